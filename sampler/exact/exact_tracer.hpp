#pragma once
// `--exact`: every take and drop of the GIL from uprobes on take_gil / drop_gil (probe_rings.hpp), decoded
// into the same holds and waits the sampler would write (handoff_decoder.hpp). The sampler still polls for
// everything else (threads, names, stacks, the GC); only the holds and waits come from here.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "elfutils/python_binary.hpp"
#include "sampler/exact/handoff_decoder.hpp"
#include "sampler/exact/probe_rings.hpp"

namespace gilspy::sampler::exact {

// Read by the session's summary while the poll thread runs: atomics.
struct ExactCounters {
  std::atomic<uint64_t> hits{0}, lost{0}, throttled{0}, takes{0}, handoffs{0}, undecoded{0};
};

class ExactTracer {
 public:
  // Finds take_gil / drop_gil in the target's interpreter binary and places the probes; the holds and waits
  // it writes start when they are in (start_ns()). Throws Error(kUnavailable) with the reason (a
  // stripped binary, no uprobe PMU, no permission), Error(kNoSuchProcess) when the target is gone.
  ExactTracer(pid_t pid, const elf::PythonBinary& binary, size_t max_threads);
  ~ExactTracer();

  // Decodes the hits older than `now` less a settling time (a hit is written to its CPU's ring a moment
  // after it is timed; the rings are read one after the other), at most every kDrainPeriodNs.
  void drain(int64_t now, IntervalSink& out);
  // Decodes every hit left and closes what is open at `t_end`. The probes stay until destruction.
  void finish(int64_t t_end, IntervalSink& out);

  const ExactCounters& counters() const { return counters_; }
  size_t probe_events() const { return rings_->events(); }
  size_t probe_points() const { return points_; }
  size_t threads_at_start() const { return rings_->threads_at_start(); }
  int64_t start_ns() const { return start_ns_; }  // CLOCK_MONOTONIC: when every probe was in

  static constexpr int64_t kDrainPeriodNs = 2'000'000;
  static constexpr int64_t kSettleNs = 1'000'000;

 private:
  void read_and_decode(int64_t cutoff, IntervalSink& out);
  void publish();

  size_t points_ = 0;     // before rings_: place_probes() sets it while rings_ is made
  int64_t start_ns_ = 0;  // likewise
  std::unique_ptr<ProbeRings> rings_;
  HandoffDecoder decoder_;
  std::vector<ProbeHit> pending_;  // sized once
  size_t used_ = 0;
  int64_t last_drain_ = 0;  // CLOCK_MONOTONIC: the first drain comes at once
  bool finished_ = false;

  ExactCounters counters_;
};

}  // namespace gilspy::sampler::exact
