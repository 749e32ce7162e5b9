#pragma once
// The poll loop: polls every target on absolute deadlines (CLOCK_MONOTONIC, TIMER_ABSTIME, timer slack lowered
// so the kernel does not batch our wake-ups), counts late and missed polls instead of hiding them, and emits a
// stats event per target about once a second so even a killed recording keeps its counters.
#include <atomic>
#include <cstdint>
#include <span>

#include "sampler/events.hpp"
#include "sampler/process_sampler.hpp"

namespace gilspy::sampler {

struct PollLoopOptions {
  double rate_hz = 10000;  // adaptive: the rate while something may change; fixed: the rate
  bool adaptive = true;    // poll densely only around changes (poll_schedule.hpp); false: a fixed rate
  int64_t sparse_max_ns = 2'000'000;  // adaptive: the longest step while the GIL's state is steady
  bool placement = true;   // keep the poll thread off the CPUs of the GIL holders (poller_placement.hpp)
  double duration_s = 0;  // 0: until stopped or every target is gone
  bool busy = false;      // spin instead of sleeping: highest rates, one core
  int64_t spin_ns = 0;    // when sleeping: wake this early and spin the rest (sharper deadlines, more CPU)
  // How the poll thread asks to be scheduled. On a machine whose cores the target keeps busy, a poller at the
  // default priority waits behind the target's threads at every wake-up: polls come late, most often right
  // after a hand-off (the woken thread preempts us), which skews every interval boundary. SCHED_FIFO at the
  // lowest real-time priority lets it preempt them for its few microseconds. --busy spins at nice -10
  // instead (a spinning real-time thread is throttled 50 ms a second). Both need CAP_SYS_NICE; without it
  // the loop runs as it is, and says which it got.
  bool realtime = true;
  int nice = -10;
};

enum class PollerScheduling { kNormal, kNice, kRealtime };
const char* to_string(PollerScheduling s);

enum class StopReason { kDuration, kStopped, kTargetsGone };

struct LoopCounters {
  std::atomic<uint64_t> polls{0};   // ticks (each polls every live target)
  std::atomic<uint64_t> late{0};    // ticks that started more than a fifth of a period after their deadline
  std::atomic<uint64_t> missed{0};  // deadlines skipped because a tick ran over a whole period
  std::atomic<int64_t> start_ns{0};
  std::atomic<int64_t> last_ns{0};
  std::atomic<int64_t> max_lateness_ns{0};
  std::atomic<PollerScheduling> scheduling{PollerScheduling::kNormal};  // what the poll thread got
  std::atomic<uint64_t> dense_polls{0};      // ticks on the dense period (all of them at a fixed rate)
  std::atomic<uint64_t> placement_moves{0};  // times the poll thread changed CPUs to avoid a holder
};

int64_t monotonic_ns();
int64_t realtime_ns();

class PollLoop {
 public:
  PollLoop(PollLoopOptions options, EventQueue& queue) : options_(options), queue_(queue) {}
  // Runs on the calling thread until the duration passes, `stop` is set, or every sampler reports its target
  // gone. Throws what a sampler throws (permission lost).
  StopReason run(std::span<ProcessSampler* const> samplers, const std::atomic<bool>& stop);
  const LoopCounters& counters() const { return counters_; }

 private:
  void emit_stats(std::span<ProcessSampler* const> samplers, int64_t now);
  PollLoopOptions options_;
  EventQueue& queue_;
  LoopCounters counters_;
};

}  // namespace gilspy::sampler
