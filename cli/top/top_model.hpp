#pragma once
// The window aggregation behind `gilspy top`. The recording core (through an adapter) feeds it the events of
// every target as they arrive; every refresh, snapshot(now) closes the window [previous snapshot, now] and
// returns plain figures for the window and for the totals (since start or the last reset).
//
// Contract with the feeder:
//  - hold()/wait() are completed intervals, given when they end; they may begin in an earlier window.
//  - open_state() gives each thread's still-open interval, with every stats tick. A hold or wait reported
//  open
//    is credited to each window up to the snapshot (it is open as far as anyone knows) and never again when
//    it completes. Without open states a long hold shows only when it ends, in the window it ends in.
//  - Timestamps are on one clock, the one snapshot()'s `now_ns` comes from.
//  - Events of an id never added get a placeholder process until add_process() names it.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/top/cpu_account.hpp"
#include "cli/top/function_account.hpp"
#include "cli/top/gc_account.hpp"
#include "cli/top/process_gauges.hpp"
#include "cli/top/thread_account.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

// An ended thread (or process) is shown, flagged, in this many snapshots after its end, then dropped.
inline constexpr int kEndedSnapshotsShown = 3;

// The last snapshot of a run whose targets exited (`final`), given the one shown before it (`shown`). When
// nothing was polled in between (the targets ended right after a tick), the figures of the interval before
// stand: the last screen shows the last real interval, not an empty one. The totals, the ended flags and the
// threads that appeared since are the final ones. Otherwise `final` is returned as it is.
TopSnapshot keep_last_interval(const TopSnapshot& shown, TopSnapshot final);

class TopModel {
 public:
  explicit TopModel(int64_t start_ns);  // the first window and the totals begin here

  void add_process(ProcessInfo info);
  void thread_started(uint32_t id, int64_t tid, std::string name, int64_t ts_ns);
  void thread_named(uint32_t id, int64_t tid, std::string name);  // its Python name, once read or renamed
  // The function it was in at its last stack sample (a hold's start, every 10 ms of a hold, a wait's start).
  void thread_function(uint32_t id, int64_t tid, std::string function);
  // `state_se_ns`: the sampler's standard error of its time in each state over its life (-1: not known).
  void thread_ended(uint32_t id, int64_t tid, int64_t ts_ns, int64_t state_se_ns = -1);
  void hold(uint32_t id, int64_t tid, int64_t start_ns, int64_t dur_ns);
  void wait(uint32_t id, int64_t tid, int64_t start_ns, int64_t dur_ns);
  // `state_var_ns2`: the sampler's variance of the thread's time in each state so far (raw::ThreadState).
  void open_state(uint32_t id, int64_t tid, Role role, int64_t since_ns, int64_t at_ns,
                  double state_var_ns2 = -1);
  void waiters(uint32_t id, int64_t ts_ns, int n);
  void stats(uint32_t id, int64_t ts_ns, const PollCounters& counters, std::vector<Figure> extra = {});
  void process_ended(uint32_t id, int64_t ts_ns);
  // A garbage collection that ended (dur_ns timed; wait_ns: GIL waiting during it), or `n` too short to time.
  void gc_collection(uint32_t id, int32_t generation, int64_t ts_ns, int64_t dur_ns, int64_t wait_ns);
  void gc_untimed(uint32_t id, int32_t generation, uint64_t n, int64_t ts_ns);
  void gc_settings(uint32_t id, bool enabled, int64_t ts_ns);  // gc.isenabled(), first and on change
  // The thread's CPU over [start_ns, start_ns + dur_ns] in `role` (the CPU columns).
  void cpu(uint32_t id, int64_t tid, Role role, int64_t start_ns, int64_t dur_ns, const CpuPiece& piece);
  // A piece of a hold, a wait or a stretch without the GIL that ended, `ns` long, in the functions of its
  // stack (innermost first): the function view (function_account.hpp). Every target's together.
  void function_time(Role role, const std::vector<std::string>& functions, int64_t ns) {
    functions_.add(role, functions, ns);
  }

  TopSnapshot snapshot(int64_t now_ns);  // closes the window [previous snapshot, now_ns]
  void reset(int64_t now_ns);            // totals and the window restart at now_ns

 private:
  struct Thread {
    int64_t tid = 0;
    std::string name;
    std::string function;  // the innermost function of its last stack sample
    ThreadAccount account;
    int shown_after_end = 0;
    CpuAccount cpu;
  };
  struct Process {
    ProcessInfo info;
    int64_t first_ns = -1, ended_ns = -1;
    int shown_after_end = 0;
    std::unordered_map<int64_t, Thread> threads;
    std::vector<int64_t> order;  // tids in order of first appearance
    WaiterGauge waiters;
    PollTracker polls;
    std::vector<Figure> extra;
    GcAccount gc;
    int64_t busy_window_ns = 0, busy_total_ns = 0;

    void note(int64_t ts_ns);  // the process's life in the model starts at its first event
    Thread& thread(int64_t tid);
  };

  Process& process(uint32_t id);
  Bounds bounds() const { return {window_start_ns_, totals_start_ns_}; }
  void completed(uint32_t id, int64_t tid, Role role, int64_t start_ns, int64_t dur_ns);
  ProcessRow close_process(Process& p, int64_t now_ns);
  ProcessFigures process_figures(const Process& p, int64_t period_start_ns, int64_t now_ns,
                                 int64_t busy_ns) const;

  int64_t window_start_ns_, totals_start_ns_;
  std::vector<Process> processes_;     // a handful: found by a linear search, shown in this order
  std::vector<uint32_t> dropped_ids_;  // ended and no longer shown (ids are never reused in a session)
  Process discarded_;                  // where the records of a dropped process go
  FunctionAccount functions_;
};

}  // namespace gilspy::top
