#include "sampler/schedule/poll_schedule.hpp"

#include <algorithm>

namespace gilspy::sampler {

void PollSchedule::add(const PollActivity& a, int64_t now) {
  const bool changed = a.last_change_ns == now;
  // A change inside the expected switch's window (or while it is overdue) is that switch, not a surprise;
  // only one inside the window proper earns the peak rate that follows a forced switch.
  const bool forced = a.expected_due_ns >= 0 && in_due_window(a.expected_due_ns, now);
  const bool expected = forced || (a.expected_due_ns >= 0 && now >= a.expected_due_ns &&
                                   now < a.expected_due_ns + o_.due_grace_ns + o_.overdue_span_ns);
  if (changed && !expected) linger_until_ = std::max(linger_until_, now + o_.linger_ns);
  if (changed && forced) forced_linger_until_ = std::max(forced_linger_until_, now + o_.linger_ns);
  if (changed && !expected && step_ > dense_) surprise_ = true;
  if (now < linger_until_) active_ = true;
  if (a.collecting) active_ = true;
  // Forced switches and what follows them (a woken sleeper takes the GIL and drops it within microseconds)
  // are polled at (nearly) the peak rate whatever the CPU budget: they are few (one per switch interval at
  // most) and they bound the longest holds and waits. Everything else dense is polled at the period the
  // budget allows.
  if (now < forced_linger_until_ || (a.switch_due_ns >= 0 && in_due_window(a.switch_due_ns, now)))
    peak_ = true;
  if (a.switch_due_ns >= 0) {
    // Past the window the switch is overdue: the waiter that forces it re-armed its timer unseen, or the
    // woken thread waits for a CPU. It comes within an interval; poll at a middling rate until then.
    const int64_t overdue_from = a.switch_due_ns + o_.due_grace_ns;
    if (now >= overdue_from && now < overdue_from + o_.overdue_span_ns) overdue_ = true;
    if (overdue_from > now) due_ = std::min(due_, a.switch_due_ns);
  }
}

int64_t PollSchedule::next_step(int64_t now) {
  if (!o_.adaptive) return step_ = dense_;
  if (surprise_) {
    ++surprises_;
    ceiling_ = std::max(dense_, ceiling_ / 2);
  } else if (step_ >= ceiling_ && step_ > dense_) {
    ceiling_ = std::min(o_.sparse_max_ns, ceiling_ + ceiling_ / 8);
  }
  // Under the CPU budget's pressure even these polls come at most every two peak periods.
  if (peak_) return step_ = saturated_ ? dense_ : std::min(dense_, 2 * o_.dense_ns);
  if (active_ || surprise_) return step_ = dense_;
  step_ = std::min(std::max(step_ * 2, dense_), std::max(ceiling_, dense_));
  if (overdue_) step_ = std::max(dense_, std::min(step_, o_.overdue_step_ns));
  // Never sleep past the start of the dense window before a forced switch.
  if (due_ != INT64_MAX) {
    const int64_t until_window = due_ - o_.due_lead_ns - now;
    if (until_window < step_) step_ = std::max(dense_, until_window);
  }
  return step_;
}

}  // namespace gilspy::sampler
