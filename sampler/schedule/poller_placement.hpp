#pragma once
// Keeps the poll thread off the CPUs where the targets' GIL holders run. A wake-up that lands on the holder's
// CPU preempts it (a SCHED_FIFO poller always does, and the scheduler keeps a woken thread where its timer
// fired), and while the holder is off its CPU the whole process waits for the GIL. Each holder's CPU comes
// from /proc/PID/task/TID/stat; the poll thread's affinity is revised when a holder moves, at most once per
// `min_interval_ns`. On a machine with one allowed CPU it does nothing.
#include <sched.h>

#include <cstdint>
#include <span>

namespace gilspy::sampler {

class PollerPlacement {
 public:
  explicit PollerPlacement(bool enabled, int64_t min_interval_ns = 1'000'000);
  // Whether update() would act now: the holders' CPUs are worth reading.
  bool due(int64_t now) const { return enabled_ && now - last_ns_ >= min_interval_ns_; }
  // Called by the poll thread itself. `holder_cpus`: the CPU of each target's holder (-1: none or unknown).
  void update(std::span<const int> holder_cpus, int64_t now);
  bool active() const { return enabled_; }
  uint64_t moves() const { return moves_; }

 private:
  bool enabled_;
  int64_t min_interval_ns_;
  int64_t last_ns_ = INT64_MIN / 2;
  cpu_set_t allowed_{};  // where the poll thread may run at all (its affinity at start)
  cpu_set_t current_{};
  uint64_t moves_ = 0;
};

}  // namespace gilspy::sampler
