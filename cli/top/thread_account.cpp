#include "cli/top/thread_account.hpp"

#include <algorithm>
#include "base/share_interval.hpp"

namespace gilspy::top {

namespace {
constexpr std::size_t kMaxCredits = 4;
}  // namespace

void ThreadAccount::seen(int64_t ts_ns) {
  if (first_ns_ < 0 || ts_ns < first_ns_) first_ns_ = ts_ns;
}

void ThreadAccount::ended(int64_t ts_ns, int64_t state_se_ns) {
  // Its final variance: what the last stats tick's ThreadState said plus the polls since.
  if (state_se_ns >= 0) note_variance(static_cast<double>(state_se_ns) * static_cast<double>(state_se_ns));
  seen(ts_ns);
  if (ended_ns_ < 0 || ts_ns < ended_ns_) ended_ns_ = ts_ns;
}

Credited ThreadAccount::add_piece(Role role, int64_t a, int64_t e, const Bounds& b) {
  Credited c;
  c.window_ns = std::max<int64_t>(0, e - std::max(a, b.window_start_ns));
  c.total_ns = std::max<int64_t>(0, e - std::max(a, b.totals_start_ns));
  if (role == Role::kHolding) {
    window_.hold_ns += c.window_ns;
    total_.hold_ns += c.total_ns;
    return c;
  }
  window_.wait_ns += c.window_ns;
  total_.wait_ns += c.total_ns;
  return {};  // only holds make the GIL busy
}

Credited ThreadAccount::completed(Role role, int64_t start_ns, int64_t dur_ns, const Bounds& b) {
  if (dur_ns < 0 || role == Role::kReleased) return {};
  const int64_t end_ns = start_ns + dur_ns;
  seen(start_ns);

  Credited sum;
  auto add = [&](int64_t a, int64_t e) {
    if (e <= a) return;
    const Credited c = add_piece(role, a, e, b);
    sum.window_ns += c.window_ns;
    sum.total_ns += c.total_ns;
  };
  // The open state of this very interval was credited for [from, until]: count only what lies outside.
  const auto it = std::find_if(credits_.begin(), credits_.end(), [&](const Credit& c) {
    return c.role == role && (c.since_ns == start_ns || (c.since_ns > start_ns && c.since_ns < end_ns));
  });
  if (it != credits_.end() && it->from_ns >= 0) {
    add(start_ns, std::min(end_ns, it->from_ns));
    add(std::max(start_ns, it->until_ns), end_ns);
  } else {
    add(start_ns, end_ns);
  }
  // This credit is used up, and any older one belongs to an interval that can no longer complete after this.
  if (it != credits_.end()) credits_.erase(it);
  std::erase_if(credits_, [&](const Credit& c) { return c.since_ns < start_ns; });
  if (open_ && open_->since_ns < end_ns)
    open_.reset();  // that interval is over; one since end_ns is the next
  last_completed_end_ns_ = std::max(last_completed_end_ns_, end_ns);

  // Counts and lengths belong to the period the interval ends in (a late arrival only reaches the totals).
  const bool in_window = end_ns > b.window_start_ns, in_total = end_ns > b.totals_start_ns;
  for (Tally* t : {in_window ? &window_ : nullptr, in_total ? &total_ : nullptr}) {
    if (!t) continue;
    if (role == Role::kHolding) {
      ++t->holds;
      t->completed_hold_ns += dur_ns;
      t->longest_hold_ns = std::max(t->longest_hold_ns, dur_ns);
    } else {
      t->longest_wait_ns = std::max(t->longest_wait_ns, dur_ns);
    }
  }
  return sum;
}

void ThreadAccount::note_variance(double state_var_ns2) {
  if (var_now_ < 0) var_window_start_ = var_totals_start_ = 0;  // the sampler's figure covers its whole life
  var_now_ = std::max(var_now_, state_var_ns2);
}

void ThreadAccount::open(Role role, int64_t since_ns, int64_t at_ns, double state_var_ns2) {
  if (state_var_ns2 >= 0) note_variance(state_var_ns2);
  // A report older than an interval that has already completed (they crossed on the way) is stale.
  if (is_ended() || since_ns < last_completed_end_ns_ || at_ns < last_completed_end_ns_) return;
  seen(since_ns);
  if (role == Role::kReleased) {
    open_.reset();
    return;
  }
  open_ = Open{role, since_ns};
  if (!credit_for(role, since_ns)) {
    if (credits_.size() >= kMaxCredits) credits_.erase(credits_.begin());
    credits_.push_back(Credit{role, since_ns});
  }
}

ThreadAccount::Credit* ThreadAccount::credit_for(Role role, int64_t since_ns) {
  for (Credit& c : credits_) {
    if (c.role == role && c.since_ns == since_ns) return &c;
  }
  return nullptr;
}

Credited ThreadAccount::close_window(int64_t now_ns, const Bounds& b, ThreadFigures& interval,
                                     ThreadFigures& total) {
  Credited sum;
  Credit* credit = open_ ? credit_for(open_->role, open_->since_ns) : nullptr;
  if (credit) {
    const int64_t cap = is_ended() ? std::min(now_ns, ended_ns_) : now_ns;
    int64_t a = std::max(open_->since_ns, b.window_start_ns);
    if (credit->until_ns >= 0) a = std::max(a, credit->until_ns);
    if (cap > a) {
      sum = add_piece(open_->role, a, cap, b);
      if (credit->from_ns < 0) credit->from_ns = a;
      credit->until_ns = cap;
    }
    // The open interval is as long as it has been so far: a hold of minutes shows while it lasts.
    const int64_t so_far = cap - open_->since_ns;
    for (Tally* t : {&window_, &total_}) {
      int64_t& longest = open_->role == Role::kHolding ? t->longest_hold_ns : t->longest_wait_ns;
      longest = std::max(longest, so_far);
    }
  }
  interval = figures(window_, b.window_start_ns, now_ns);
  total = figures(total_, b.totals_start_ns, now_ns);
  interval.share_ci95 = ci95(var_window_start_, interval.lifetime_ns);
  total.share_ci95 = ci95(var_totals_start_, total.lifetime_ns);
  var_window_start_ = var_now_;
  window_ = Tally{};
  return sum;
}

void ThreadAccount::reset_totals() {
  window_ = Tally{};
  total_ = Tally{};
  var_totals_start_ = var_now_;
}

double ThreadAccount::ci95(double var_start, int64_t lifetime_ns) const {
  if (var_now_ < 0 || var_start < 0) return -1;
  return share_ci95(var_now_ - var_start, lifetime_ns);
}

ThreadFigures ThreadAccount::figures(const Tally& t, int64_t period_start_ns, int64_t now_ns) const {
  ThreadFigures f;
  const int64_t life_start = first_ns_ < 0 ? now_ns : std::max(period_start_ns, first_ns_);
  const int64_t life_end = is_ended() ? std::min(now_ns, ended_ns_) : now_ns;
  f.lifetime_ns = std::max<int64_t>(0, life_end - life_start);
  if (f.lifetime_ns > 0) {
    const auto life = static_cast<double>(f.lifetime_ns);
    // Timestamps after `now` (a caller's clock mix-up) could push a share past 1; the screen must not show
    // 104 %.
    f.hold_share = std::min(1.0, static_cast<double>(t.hold_ns) / life);
    f.wait_share = std::min(1.0 - f.hold_share, static_cast<double>(t.wait_ns) / life);
    f.released_share = 1.0 - f.hold_share - f.wait_share;
    f.holds_per_s = static_cast<double>(t.holds) / (life / 1e9);
  }
  f.holds = t.holds;
  f.mean_hold_ns = t.holds > 0 ? t.completed_hold_ns / static_cast<int64_t>(t.holds) : 0;
  f.longest_hold_ns = t.longest_hold_ns;
  f.longest_wait_ns = t.longest_wait_ns;
  return f;
}

}  // namespace gilspy::top
