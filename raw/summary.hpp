#pragma once
// Per-thread and whole-GIL figures from a stream of raw records: what `record` prints at the end and writes
// as the summary, and what `convert` rebuilds for a recording that was killed before it could write its own.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/counter_summary.hpp"
#include "raw/gc_summary.hpp"
#include "raw/records.hpp"
#include "raw/stack_summary.hpp"

namespace gilspy::raw {

struct ThreadSummary {
  int64_t tid = 0;
  std::string name;  // the Python name (threading.Thread.name) once known, else the OS's (os_name)
  int64_t first_ns = -1, last_ns = -1;  // lifetime seen in the recording
  int64_t hold_ns = 0, wait_ns = 0;
  uint64_t holds = 0, waits = 0;
  int64_t longest_hold_ns = 0, longest_wait_ns = 0;
  double hold_share() const;  // of the thread's lifetime in the recording
  double wait_share() const;
  // The variance (ns²) of its time in each state (raw ThreadEnd's state_se_ns, squared and summed over its
  // ends); -1 when the recorder did not say (an older one, or a recording killed before the thread ended).
  double state_var_ns2 = -1;
  // The half-width of the 95 % confidence interval of hold_share() and wait_share(); -1: not known.
  double share_ci95() const;
  std::string os_name;  // what the session named it from the OS (ThreadStart)
};

// --exact (sampler/exact/): what the probes saw and cost. on == false: the holds and waits were sampled.
struct ExactFigures {
  bool on = false;
  uint64_t hits = 0, lost = 0,
           throttled = 0;            // probe hits read; lost in full rings; kernel throttling notices
  uint64_t takes = 0, handoffs = 0;  // returns from take_gil; of them by another thread than the last
  uint64_t undecoded = 0;            // hits of threads past the decoder's table (none expected)
  uint64_t probe_events = 0, probe_points = 0;
  uint64_t threads_at_start = 0;  // each with events of its own; the threads they start inherit them
  double take_cost_ns = 0, drop_cost_ns = 0;  // per take / drop on this machine, measured at start; 0: not
};

struct LoopFigures {  // filled by the recorder; absent (zeros) for a recovered file
  uint64_t ticks = 0, late = 0, missed = 0, dropped_events = 0, unknown_holder_polls = 0, task_reads = 0;
  uint64_t impossible_switch_moves = 0;  // SamplerCounters: hand-off counter moves not counted
  int64_t walk_period_ns = 0;            // SamplerCounters: the thread list's longest re-read period
  int64_t max_lateness_ns = 0;
  int64_t p99_lateness_ns = 0;  // an upper bound (bucketed: at most 12.5 % over)
  std::string poller_scheduling = "normal";
  std::string poll_mode;     // "adaptive", "fixed" or "busy"; empty for a recovered file
  uint64_t dense_polls = 0;  // polls on the peak rate's period (adaptive mode)
  uint64_t placement_moves = 0;
  uint64_t budget_limited = 0;  // polls taken while the CPU budget held the peak rate down
  uint64_t low_coverage = 0;    // polls taken while few hand-offs were seen, the budget's floor up to 16 ms
  std::string stop_reason;
  bool threads_truncated = false;
  uint64_t counter_reads = 0,
           switch_reads = 0;    // schedstat (+ perf) and /proc status reads (thread_counters.hpp)
  double gilspy_cpu_share = 0;  // gilspy's CPU while it recorded (all targets), in cores
  double cpu_budget = 0;        // --cpu-budget in cores (0: none, or a fixed rate)
  ExactFigures exact;
};

// Threads that ended past the first SummaryBuilder::kKeptThreads, folded by name pattern
// (base/name_pattern.hpp) as they end.
struct FoldedThreads {
  std::string pattern;  // target text; "*" for threads past kMaxPatterns patterns
  uint64_t threads = 0;
  int64_t busiest_tid = 0, busiest_ns = -1;  // the member with the most hold + wait
  int64_t life_ns = 0, hold_ns = 0, wait_ns = 0;
  uint64_t holds = 0, waits = 0;
  int64_t longest_hold_ns = 0, longest_wait_ns = 0;
  double state_var_ns2 = 0;  // summed; -1 when some member's is not known
};

class SummaryBuilder {
 public:
  // A summary keeps this many threads one by one; each that ends past them is folded into its name pattern's
  // group, and past kMaxPatterns patterns into one. Its memory and its JSON stay bounded whatever a target
  // does (a server's thread per request for hours, a target forging thread states).
  static constexpr size_t kKeptThreads = 5000;
  static constexpr size_t kMaxPatterns = 1000;

  void add(const Record& r);  // ThreadState records change nothing: the intervals say the same once they end
  void set_end(int64_t end_ns) { end_ns_ = end_ns; }
  // The part of the session's timeline this process was recorded over: a child found late, or one that ended
  // before the session, has every share and rate over its own span, not the session's.
  void set_span(int64_t start_ns, int64_t end_ns) {
    start_ns_ = start_ns;
    end_ns_ = end_ns;
  }
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_ > 0 ? end_ns_ : last_ts_; }
  int64_t last_ts() const { return last_ts_; }  // the end of the latest record
  int64_t duration_ns() const { return std::max<int64_t>(0, end_ns() - start_ns_); }
  std::vector<ThreadSummary> threads() const;  // in order of appearance; the folded ones are not there
  const std::map<std::string, FoldedThreads>& folded() const { return folded_; }
  uint64_t folded_threads() const { return folded_count_; }
  uint64_t handoffs_seen() const { return stats_.handoffs_seen; }
  uint64_t handoffs_total() const { return stats_.handoffs_total; }
  uint64_t polls() const { return stats_.polls; }
  double coverage() const;                            // hand-offs seen / happened; 1 when none happened
  double gil_busy_share() const;                      // all holds / duration
  int64_t stopped_ns() const { return stopped_ns_; }  // the process was stopped (SIGSTOP) this long
  uint64_t stops() const { return stops_; }
  nlohmann::json to_json(double rate_asked, const LoopFigures& loop) const;
  const GcSummary& gc() const { return gc_; }  // the garbage collector's figures (issue 9)
  GcSummary& gc() { return gc_; }
  int64_t wait_ns() const;                                      // all threads' GIL waiting together
  const StackSummary& stacks() const { return stacks_; }        // which code held and waited (stack samples)
  const CounterSummary& counters() const { return counters_; }  // CPU, scheduler and perf figures per role

 private:
  GcSummary gc_;
  ThreadSummary& thread_entry(int64_t tid);  // made when first seen, in order of appearance
  ThreadSummary& interval(int64_t tid, int64_t ts, int64_t dur);  // a hold or wait: within its lifetime
  void add_thread_start(const ThreadStart& x);
  void add_thread_end(const ThreadEnd& x);
  void add_hold(const Hold& x);
  void add_wait(const Wait& x);
  void fold(int64_t tid);
  nlohmann::json folded_json() const;
  std::map<int64_t, ThreadSummary> threads_;
  std::vector<int64_t> order_;
  std::map<std::string, FoldedThreads> folded_;
  uint64_t folded_count_ = 0;
  Stats stats_;  // the latest
  int64_t start_ns_ = 0, end_ns_ = 0;
  int64_t last_ts_ = 0;
  int64_t total_hold_ns_ = 0;
  int64_t stopped_ns_ = 0;
  uint64_t stops_ = 0;
  StackSummary stacks_;
  CounterSummary counters_;
};

}  // namespace gilspy::raw
