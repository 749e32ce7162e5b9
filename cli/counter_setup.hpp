#pragma once
// The session's side of `--counters` and of the scheduler figures every recording takes: what this machine
// lets gilspy count (probed once, each counter it cannot count named once with the reason), the thread that
// opens perf groups (sampler/perf_counters.hpp), and per target the sources the sampler reads
// (sampler/thread_counters.hpp).
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raw/records.hpp"
#include "sampler/counters/perf_counters.hpp"
#include "sampler/counters/thread_counters.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/queue/record_queue.hpp"

namespace gilspy::cli {

// One target's: perf groups (when any counter is counted), the /proc + perf source, the attribution.
struct TargetCounters {
  std::unique_ptr<sampler::PerfSlots> perf;
  std::unique_ptr<sampler::ProcCounterSource> source;
  std::unique_ptr<sampler::ThreadCounters> threads;
};

class SessionCounters {
 public:
  using Note = std::function<void(const std::string&)>;
  // Probes `asked` (empty: no perf counters) and starts the opener if anything can be counted. Call after the
  // descriptor limit was raised: perf groups may take up to half of what is left.
  void start(const std::vector<raw::CounterKind>& asked, const Note& note);
  // Sets up `t` and hands its attribution to `sampler` (before the sampler's first poll).
  void attach(TargetCounters& t, sampler::ProcessSampler& sampler, pid_t pid, sampler::RecordQueue& queue,
              raw::TargetId id);
  // The "CD" record every target's records begin with (ts 0: the session's start).
  raw::CounterSetup setup_record() const;
  // At the end: threads whose group could not be opened, or had none for want of descriptors or queue room.
  void report(const Note& note) const;

 private:
  sampler::CounterPlan plan_;
  size_t max_fds_ = 0;
  std::unique_ptr<sampler::PerfOpener> opener_;
};

}  // namespace gilspy::cli
