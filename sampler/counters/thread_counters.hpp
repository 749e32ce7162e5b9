#pragma once
// What the CPU did while each thread held the GIL, waited for it, or ran without it: scheduler figures
// (schedstat: time on a CPU, time waiting for one, switches) and perf counters, read per thread and split by
// GIL role. The sampler tells it when a thread's role changes; after each poll it reads
//  - every thread whose role changed in that poll (the hand-offs the sampler sees; at most once a
//    millisecond per thread, a thread that flips at every poll adds segments to one stretch instead),
//  - the holder every 4 ms at most, a waiter 4 ms into its wait and then every 50 ms, scheduler figures only
//    (so that the rate each role runs at is measured; their perf counts come with the next full read,
//    shared out with the CPU time). A waiter mostly sleeps in the GIL's wait: one stretch of a wait gives
//    its rate, and reading each of 15 waiters every 4 ms was two schedstat reads at every poll of a
//    16-thread target (a fifth of its /proc reads, ~4 us each),
//  - every other thread at a steady low rate (one read per 0.5 ms for the whole target, each thread about
//    every 100 ms), and voluntary / involuntary switches (/proc status) at a lower rate still,
// within fixed per-read limits, so the cost stays inside the sampler's CPU budget.
//
// Splitting a stretch between two reads. A thread changes role only while on a CPU (it takes or drops the
// GIL), and the sampler dates the change to the midpoint between two polls, so a stretch that spans a change
// holds the end of the old role and the start of the new one, neither measured on its own:
//  - CPU time (and the perf counters, which count while the thread runs) is shared out in proportion to what
//    each role would have used at the rate the thread ran in it before (measured over the stretches of that
//    role that held no change; the stretch's own average for a role without one yet). A thread asleep in
//    take_gil thus gets next to nothing of the hold that ended the stretch, and one that spins gets its
//    share.
//  - Run-queue delay and switches go to the old role: a thread waits in a run queue until it gets a CPU, and
//    only then can it change role, so the wait ended before the change.
// What each role got is summed per thread over a window of about 100 ms and emitted as one CounterSample per
// role the thread was in (three "C" lines per thread and window at most, whatever the hand-off rate), with
// the holds that began in it and those that ended preempted (the holder waited >= 1 ms for a CPU during the
// hold: the run-queue delay of its holding stretches, summed per hold).
//
// Fixed tables, allocated at construction; never allocates afterwards (the poll loop's rule).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "raw/records.hpp"
#include "sampler/counters/perf_counters.hpp"
#include "sampler/proc/sched_stats.hpp"
#include "sampler/queue/record_queue.hpp"

namespace gilspy::sampler {

// One thread's readings at one moment, cumulative.
struct CounterReading {
  std::optional<SchedStat> sched;   // none when the thread is gone
  std::optional<PerfReading> perf;  // none without a perf group (not asked, not opened yet, or failed)
};

// Where a thread's counters come from: /proc and perf in real life (ProcCounterSource), a script in tests.
class CounterSource {
 public:
  virtual ~CounterSource() = default;
  virtual void thread_added(size_t slot, int32_t tid) = 0;
  virtual void thread_removed(size_t slot) = 0;
  // `perf`: the perf group too (false: the scheduler figures only).
  virtual CounterReading read(size_t slot, bool perf) = 0;
  virtual std::optional<SwitchCounts> read_switches(size_t slot) = 0;
};

struct ThreadCountersOptions {
  int64_t change_read_gap_ns = 1'000'000;      // a thread whose role changed is read at most this often
  int64_t in_role_gap_ns = 4'000'000;          // the holder is read at most this often (a waiter too, once),
  int64_t in_role_wait_gap_ns = 50'000'000;    // a waiter from then on at most this often,
  size_t in_role_reads_per_poll = 2;           // ...and at most this many of them per poll
  int64_t steady_period_ns = 100'000'000;      // every other thread is read about this often
  int64_t sweep_gap_ns = 500'000;              // at most one steady read per this long
  int64_t switches_period_ns = 1'000'000'000;  // a thread's /proc status read about this often
  double switches_per_s = 50;                  // ...and at most this many status reads per second (burst 64)
  int64_t window_ns = 100'000'000;             // a thread's figures are emitted per role this often
};

class ThreadCounters {
 public:
  ThreadCounters(CounterSource& source, RecordQueue& queue, raw::TargetId target, size_t slots,
                 ThreadCountersOptions options = {});

  // The sampler's thread list (slot = its track index). `at` in CLOCK_MONOTONIC ns.
  void thread_added(size_t slot, int64_t tid, raw::GilRole role, int64_t at);
  void role_changed(size_t slot, raw::GilRole role, int64_t at);
  // Reads what is due after the poll at `t_now` (see above).
  void after_poll(int64_t t_now);
  // A last read (the thread may be gone already: then only its perf counters, which stay readable, count).
  void thread_removed(size_t slot, int64_t at);

  uint64_t reads() const { return reads_; }                // counter reads (schedstat + perf group)
  uint64_t switch_reads() const { return switch_reads_; }  // /proc status reads

 private:
  struct Segment {
    raw::GilRole role = raw::GilRole::kReleased;
    int64_t since = 0;
    bool starts = false;  // begins where the thread entered the role
  };
  struct RoleRate {  // CPU over the stretches of one role that held no change (recent ones weigh most)
    int64_t cpu_ns = 0, time_ns = 0;
  };
  struct Slot {
    bool active = false;
    int64_t tid = 0;
    int64_t last_read_ns = 0;
    std::optional<SchedStat> sched;  // at last_read_ns
    std::optional<PerfReading> perf;
    std::array<Segment, 4> segments{};
    uint8_t segment_count = 0;
    bool changed = false;
    bool contending = false;    // holding or waiting: read every in_role_gap_ns
    bool read_in_role = false;  // read since its last change without one in between (a waiter's rate known)
    int64_t next_switches_ns = 0;
    std::array<RoleRate, 3> rates{};
    std::array<raw::CounterSample, 3> window{};  // per role (GilRole order) since window_start_ns
    int64_t window_start_ns = 0;
    bool in_hold = false;  // a hold began and has not ended: its run-queue delay so far
    int64_t hold_delay_ns = 0;
    int64_t perf_pending_cpu_ns = 0, perf_pending_ns = 0;  // read without perf since the last full read
  };
  struct Split {  // one segment's share of a stretch
    int64_t cpu_ns = 0, run_delay_ns = 0;
    uint64_t slices = 0;
    std::array<uint64_t, raw::kMaxCounterValues> values{};
  };

  // What changed since a slot's last read (its CPU, run-queue delay, slices and perf counts).
  struct Deltas {
    bool sched = false;  // scheduler figures at both reads
    int64_t cpu_ns = 0, run_delay_ns = 0;
    uint64_t slices = 0;
    uint8_t count = 0;  // perf values (0: none this time)
    std::array<uint64_t, raw::kMaxCounterValues> values{};
  };
  using Edges = std::array<int64_t, 5>;  // where each segment of a stretch begins, then the stretch's end
  using Parts = std::array<Split, 4>;    // each segment's share

  void read_now(size_t slot, int64_t t, bool with_perf = true);
  // read_now()'s steps: the deltas, the rate of a stretch without a change, the CPU and the counts shared
  // out between the stretch's segments.
  static Deltas deltas_since(const Slot& s, const CounterReading& r, bool with_perf);
  static void learn_rate(Slot& s, int64_t cpu_ns, int64_t span);
  static void share_cpu(const Slot& s, const Edges& edge, int64_t cpu, Parts& parts);
  static void share_counts(Slot& s, const Edges& edge, const Deltas& d, bool with_perf, Parts& parts);
  void add_piece(Slot& s, const Segment& seg, int64_t from, int64_t to, const Split& part, bool sched,
                 uint8_t count);
  void end_hold(Slot& s);
  void emit_window(Slot& s, int64_t t);  // the window's records, and a new window from t
  void read_switches(size_t slot, int64_t t);
  bool take_switch_token(int64_t t);

  CounterSource& source_;
  RecordQueue& queue_;
  raw::TargetId target_;
  ThreadCountersOptions options_;
  std::vector<Slot> slots_;
  std::vector<uint16_t> active_;      // reserved to the slot count
  std::vector<uint16_t> changed_;     // reserved
  std::vector<uint16_t> contending_;  // reserved
  size_t sweep_cursor_ = 0, switch_cursor_ = 0, contending_cursor_ = 0;
  int64_t next_sweep_ns_ = 0;
  double switch_tokens_ = 64;
  int64_t switch_tokens_at_ = -1;
  bool polled_ = false;  // after_poll ran: threads added from now on were found during the recording
  uint64_t reads_ = 0, switch_reads_ = 0;
};

// The real source: /proc/PID/task/TID/schedstat (kept open) and status, and a perf group per thread when the
// session counts any (`perf` may be null: scheduler figures only).
class ProcCounterSource final : public CounterSource {
 public:
  ProcCounterSource(pid_t pid, size_t slots, PerfSlots* perf, PerfOpener* opener);
  void thread_added(size_t slot, int32_t tid) override;
  void thread_removed(size_t slot) override;
  CounterReading read(size_t slot, bool perf) override;
  std::optional<SwitchCounts> read_switches(size_t slot) override;

 private:
  pid_t pid_;
  std::vector<TaskSchedStatFile> sched_;
  std::vector<int32_t> tids_;
  std::vector<uint32_t> generations_;  // per slot: which thread it holds now, for the opener
  PerfSlots* perf_;
  PerfOpener* opener_;
};

}  // namespace gilspy::sampler
