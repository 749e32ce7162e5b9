#pragma once
// When to poll next. A fixed schedule polls every period. The adaptive schedule (the default) polls densely
// only while the GIL's state can change soon, and backs off while it is steady:
// - right after a hand-off, a lock or unlock, or a doubt about a thread that was not an expected forced
// switch
//   (hand-offs come in chains: sleepers take and drop the GIL within microseconds), for `linger_ns`;
// - around the moment a forced switch is due: a waiter's timed wait on the GIL's cond expires `interval`
// after
//   it began, and only a wait that began after the last hand-off can force the next one, so the next forced
//   switch is due `interval` after the later of the last hand-off and the first waiter since (plus how late
//   switches were seen after that moment so far: the sampler learns it);
// - past that window the switch is overdue (the forcing waiter re-armed its timer unseen, or the woken thread
//   waits for a CPU): steps of at most `overdue_step_ns` until it comes;
// - otherwise the step doubles after every quiet poll, up to a ceiling.
// The ceiling adapts to the workload: a change that a poll after a long step finds, outside the window of the
// forced switch that was expected, is a surprise (a thread released or took the GIL on its own): it halves
// the ceiling; every quiet step at the ceiling raises it by an eighth, up to `sparse_max_ns`. CPU-bound
// threads that only switch when forced are polled sparsely; threads that sleep, do I/O or release the GIL in
// C calls keep the schedule dense, where they need it. Any change returns to dense polling at once. Deadlines
// stay absolute: each is the previous deadline plus the step chosen, so lateness is measured as before.
#include <algorithm>
#include <cstdint>

namespace gilspy::sampler {

// What one target's last poll says about the near future.
struct PollActivity {
  int64_t last_change_ns = -1;  // last poll that saw the holder, the lock, switch_number, a hold or a doubt
  int64_t last_handoff_ns =
      -1;  // last poll that saw the holder or switch_number change (where it runs may too)
  int64_t switch_due_ns = -1;    // when a forced switch is next due (waiters present, GIL held); -1: none
  int64_t expected_due_ns = -1;  // switch_due_ns as it stood before the last poll: was its change expected?
  bool collecting = false;       // a garbage collection runs: poll densely so that its end is timed
};

struct ScheduleOptions {
  int64_t dense_ns = 100'000;           // the period while something may change (1 / rate)
  bool adaptive = true;                 // false: every step is dense_ns
  int64_t linger_ns = 500'000;          // dense this long after a change
  int64_t sparse_max_ns = 2'000'000;    // the longest step while steady
  int64_t due_lead_ns = 500'000;        // dense from this long before a forced switch is due...
  int64_t due_grace_ns = 1'000'000;     // ...until this long after,
  int64_t overdue_step_ns = 400'000;    // then at most this step...
  int64_t overdue_span_ns = 5'000'000;  // ...for this long (a holder in a long C call never drops)
};

class PollSchedule {
 public:
  explicit PollSchedule(ScheduleOptions o)
      : o_(o), dense_(o.dense_ns), step_(o.dense_ns), ceiling_(o.sparse_max_ns) {}

  // Before the targets of a tick are added.
  void begin_tick() {
    active_ = false;
    peak_ = false;
    surprise_ = false;
    overdue_ = false;
    due_ = INT64_MAX;
  }
  // Once per live target per tick, after its poll at `now`.
  void add(const PollActivity& a, int64_t now);
  // The step from the current deadline to the next one.
  int64_t next_step(int64_t now);
  // The CPU budget's floor on every step (cpu_budget.hpp): the dense period becomes max(dense_ns, floor).
  // `saturated`: the budget is still exceeded at its highest floor, so even the peak-rate polls take the
  // floor.
  void set_floor(int64_t floor_ns, bool saturated = false) {
    dense_ = std::max(o_.dense_ns, floor_ns);
    saturated_ = saturated;
  }
  bool dense() const { return step_ <= dense_; }
  int64_t ceiling() const { return ceiling_; }
  uint64_t surprises() const { return surprises_; }

 private:
  bool in_due_window(int64_t due, int64_t now) const {
    return now >= due - o_.due_lead_ns && now < due + o_.due_grace_ns;
  }
  ScheduleOptions o_;
  int64_t dense_;        // the dense period in force: dense_ns, or the CPU budget's floor
  int64_t step_;         // the step that led to the current tick
  int64_t ceiling_;      // the longest step for now
  bool active_ = false;  // poll at the dense period in force
  bool peak_ = false;    // poll at the peak rate, whatever the CPU budget (unless saturated_)
  bool saturated_ = false;
  int64_t forced_linger_until_ = 0;
  int64_t linger_until_ = 0;
  bool surprise_ = false;
  bool overdue_ = false;
  int64_t due_ = INT64_MAX;  // earliest forced switch due among the targets
  uint64_t surprises_ = 0;
};

}  // namespace gilspy::sampler
