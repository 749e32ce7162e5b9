#include "cli/top/process_gauges.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gilspy::top {

namespace {
// The sampler is falling behind when this share of its deadlines was late or missed in the last interval...
constexpr double kBehindShare = 0.05;
// ...counted over at least this many deadlines, so that one late poll in a slow interval does not alarm.
constexpr uint64_t kBehindMinDeadlines = 20;
// Stats come about once a second; three seconds without any means the sampler or its queue is stuck.
constexpr int64_t kStatsStaleNs = 3'000'000'000;

uint64_t minus(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}  // a restarted counter reads as zero
}  // namespace

void WaiterGauge::integrate(int64_t to_ns, const Bounds& b) {
  if (!known_ || to_ns <= since_ns_) return;
  for (auto [acc, start] : {std::pair{&window_, b.window_start_ns}, std::pair{&total_, b.totals_start_ns}}) {
    const int64_t len = to_ns - std::max(since_ns_, start);
    if (len <= 0) continue;
    acc->weighted += static_cast<double>(value_) * static_cast<double>(len);
    acc->covered_ns += len;
  }
  since_ns_ = to_ns;
}

void WaiterGauge::set(int64_t ts_ns, int n, const Bounds& b) {
  if (known_) {
    ts_ns = std::max(ts_ns, since_ns_);  // an out-of-order count takes effect now, it cannot rewrite the past
    integrate(ts_ns, b);
  }
  known_ = true;
  value_ = n;
  since_ns_ = ts_ns;
  for (Acc* a : {&window_, &total_}) {
    a->max = a->any ? std::max(a->max, n) : n;
    a->any = true;
  }
}

void WaiterGauge::fill(const Acc& a, int current, ProcessFigures& f) {
  if (!a.any) return;
  f.mean_waiters = a.covered_ns > 0 ? a.weighted / static_cast<double>(a.covered_ns) : current;
  f.max_waiters = a.max;
}

void WaiterGauge::close_window(int64_t until_ns, const Bounds& b, ProcessFigures& interval,
                               ProcessFigures& total) {
  integrate(until_ns, b);
  fill(window_, value_, interval);
  fill(total_, value_, total);
  // The count in effect when the window closes is in effect when the next one opens.
  window_ = Acc{};
  if (known_) window_ = Acc{0, 0, value_, true};
}

void WaiterGauge::reset_totals() {
  window_ = total_ = Acc{};
  if (known_) window_ = total_ = Acc{0, 0, value_, true};
}

void PollTracker::start(int64_t start_ns) {
  if (!latest_) latest_ = window_base_ = total_base_ = Tick{start_ns, {}};
}

void PollTracker::tick(int64_t ts_ns, const PollCounters& c) {
  if (latest_ && ts_ns < latest_->ts_ns) return;  // out of order: the newer tick already says more
  latest_ = Tick{ts_ns, c};
  if (!window_base_) window_base_ = latest_;  // no known zero point: the first tick is the baseline
  if (!total_base_) total_base_ = latest_;
}

void PollTracker::fill(const std::optional<Tick>& base, const std::optional<Tick>& latest,
                       ProcessFigures& f) {
  if (!base || !latest || latest->ts_ns <= base->ts_ns) return;
  const double seconds = static_cast<double>(latest->ts_ns - base->ts_ns) / 1e9;
  const PollCounters& a = latest->c;
  const PollCounters& z = base->c;
  const uint64_t happened = minus(a.handoffs_total, z.handoffs_total);
  const uint64_t seen = minus(a.handoffs_seen, z.handoffs_seen);
  f.poll_rate_hz = static_cast<double>(minus(a.polls, z.polls)) / seconds;
  f.handoffs_per_s = static_cast<double>(happened) / seconds;
  f.coverage = happened == 0 ? 1.0 : std::min(1.0, static_cast<double>(seen) / static_cast<double>(happened));
  f.late_polls = minus(a.late, z.late);
  f.missed_polls = minus(a.missed, z.missed);
}

void PollTracker::close_window(int64_t now_ns, bool ended, ProcessFigures& interval, ProcessFigures& total,
                               std::string& warning) {
  fill(window_base_, latest_, interval);
  fill(total_base_, latest_, total);
  warning.clear();
  if (latest_ && window_base_ && latest_->ts_ns > window_base_->ts_ns) {
    const uint64_t polls = minus(latest_->c.polls, window_base_->c.polls);
    const uint64_t deadlines = polls + interval.missed_polls;
    const uint64_t behind = interval.late_polls + interval.missed_polls;
    if (deadlines >= kBehindMinDeadlines &&
        static_cast<double>(behind) >= kBehindShare * static_cast<double>(deadlines)) {
      warning = fmt::format("sampler falling behind: {} late and {} missed of {} polls ({:.0f} %)",
                            interval.late_polls, interval.missed_polls, deadlines,
                            100.0 * static_cast<double>(behind) / static_cast<double>(deadlines));
    }
  }
  if (!ended && latest_ && now_ns - latest_->ts_ns > kStatsStaleNs) {
    warning = fmt::format("no poll statistics for {:.1f} s: the sampler is stuck or the target stopped",
                          static_cast<double>(now_ns - latest_->ts_ns) / 1e9);
  }
  window_base_ = latest_;
}

void PollTracker::reset_totals() {
  window_base_ = total_base_ = latest_;
}

}  // namespace gilspy::top
