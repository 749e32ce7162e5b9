#include "raw/summary.hpp"

#include <algorithm>
#include <iterator>

#include "base/name_pattern.hpp"
#include "base/share_interval.hpp"

namespace gilspy::raw {

double ThreadSummary::hold_share() const {
  const int64_t life = last_ns - first_ns;
  return life > 0 ? static_cast<double>(hold_ns) / static_cast<double>(life) : 0.0;
}
double ThreadSummary::wait_share() const {
  const int64_t life = last_ns - first_ns;
  return life > 0 ? static_cast<double>(wait_ns) / static_cast<double>(life) : 0.0;
}
double ThreadSummary::share_ci95() const {
  return gilspy::share_ci95(state_var_ns2, last_ns - first_ns);
}

void SummaryBuilder::add(const Record& r) {
  if (std::holds_alternative<ThreadState>(r)) return;
  stacks_.add(r);
  last_ts_ = std::max(last_ts_, end_of(r));
  std::visit(overloaded{
                 [&](const ThreadStart& x) { add_thread_start(x); },
                 [&](const ThreadEnd& x) { add_thread_end(x); },
                 [&](const Hold& x) { add_hold(x); },
                 [&](const Wait& x) { add_wait(x); },
                 [&](const Stats& x) { stats_ = x; },
                 [&](const ProcessStopped& x) {
                   stopped_ns_ += x.dur;
                   ++stops_;
                 },
                 [](const Waiters&) {},
                 [](const ThreadState&) {},  // returned above
                 [&](const GcCollection& x) { gc_.add(x); },
                 [&](const GcUntimed& x) { gc_.add(x); },
                 [&](const GcCounts& x) { gc_.add(x); },
                 [&](const GcSettings& x) { gc_.add(x); },
                 [&](const ThreadName& x) {
                   if (!x.name.empty()) thread_entry(x.tid).name = x.label();
                 },
                 // The stack kinds go to stacks_ (above).
                 [](const FrameDef&) {},
                 [](const StackDef&) {},
                 [](const StackSample&) {},
                 [](const StackStats&) {},
                 [&](const CounterSetup& x) { counters_.add(x); },
                 [&](const CounterSample& x) { counters_.add(x); },
                 [&](const ThreadSwitches& x) { counters_.add(x); },
             },
             r);
}

ThreadSummary& SummaryBuilder::thread_entry(int64_t tid) {
  auto [it, inserted] = threads_.try_emplace(tid);
  if (inserted) {
    it->second.tid = tid;
    order_.push_back(tid);
  }
  return it->second;
}

ThreadSummary& SummaryBuilder::interval(int64_t tid, int64_t ts, int64_t dur) {
  ThreadSummary& t = thread_entry(tid);
  if (t.first_ns < 0 || ts < t.first_ns) t.first_ns = ts;
  t.last_ns = std::max(t.last_ns, ts + dur);
  return t;
}

void SummaryBuilder::add_thread_start(const ThreadStart& x) {
  ThreadSummary& t = thread_entry(x.tid);
  t.name = x.name;  // a ThreadName (the Python name) comes after it
  t.os_name = x.name;
  if (t.first_ns < 0 || x.ts < t.first_ns) t.first_ns = x.ts;
  t.last_ns = std::max(t.last_ns, x.ts);
}

void SummaryBuilder::add_thread_end(const ThreadEnd& x) {
  ThreadSummary& t = thread_entry(x.tid);
  t.last_ns = std::max(t.last_ns, x.ts);
  if (x.state_se_ns >= 0) {
    const double se = static_cast<double>(x.state_se_ns);
    t.state_var_ns2 = std::max(0.0, t.state_var_ns2) + se * se;
  }
  if (threads_.size() > kKeptThreads) fold(x.tid);
}

void SummaryBuilder::add_hold(const Hold& x) {
  ThreadSummary& t = interval(x.tid, x.ts, x.dur);
  t.hold_ns += x.dur;
  ++t.holds;
  t.longest_hold_ns = std::max(t.longest_hold_ns, x.dur);
  total_hold_ns_ += x.dur;
}

void SummaryBuilder::add_wait(const Wait& x) {
  ThreadSummary& t = interval(x.tid, x.ts, x.dur);
  t.wait_ns += x.dur;
  ++t.waits;
  t.longest_wait_ns = std::max(t.longest_wait_ns, x.dur);
}

void SummaryBuilder::fold(int64_t tid) {
  const auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  const ThreadSummary& t = it->second;
  static const std::string kOther = "*";
  const std::string own = name_pattern(t.name);
  const std::string& pattern = folded_.size() >= kMaxPatterns && !folded_.contains(own) ? kOther : own;
  FoldedThreads& f = folded_[pattern];
  f.pattern = pattern;
  ++f.threads;
  f.life_ns += std::max<int64_t>(0, t.last_ns - t.first_ns);
  f.hold_ns += t.hold_ns;
  f.wait_ns += t.wait_ns;
  f.holds += t.holds;
  f.waits += t.waits;
  f.longest_hold_ns = std::max(f.longest_hold_ns, t.longest_hold_ns);
  f.longest_wait_ns = std::max(f.longest_wait_ns, t.longest_wait_ns);
  f.state_var_ns2 = t.state_var_ns2 < 0 || f.state_var_ns2 < 0 ? -1 : f.state_var_ns2 + t.state_var_ns2;
  if (t.hold_ns + t.wait_ns > f.busiest_ns) {
    f.busiest_ns = t.hold_ns + t.wait_ns;
    f.busiest_tid = t.tid;
  }
  // A thread that ends is mostly a recent one: looked for from the back.
  const auto pos = std::find(order_.rbegin(), order_.rend(), tid);
  if (pos != order_.rend()) order_.erase(std::next(pos).base());
  threads_.erase(it);
  ++folded_count_;
}

std::vector<ThreadSummary> SummaryBuilder::threads() const {
  std::vector<ThreadSummary> out;
  for (const int64_t tid : order_) out.push_back(threads_.at(tid));
  return out;
}

double SummaryBuilder::coverage() const {
  return stats_.handoffs_total == 0
             ? 1.0
             : static_cast<double>(stats_.handoffs_seen) / static_cast<double>(stats_.handoffs_total);
}

double SummaryBuilder::gil_busy_share() const {
  const int64_t d = duration_ns();
  return d > 0 ? static_cast<double>(total_hold_ns_) / static_cast<double>(d) : 0.0;
}

namespace {

nlohmann::json ci95_json(const ThreadSummary& t) {
  const double ci = t.share_ci95();
  return ci < 0 ? nlohmann::json(nullptr) : nlohmann::json(ci);
}

nlohmann::json thread_summary_json(const ThreadSummary& t, bool exact) {
  return {{"tid", t.tid},
          {"name", t.name},
          {"os_name", t.os_name},
          {"first_ns", t.first_ns},
          {"last_ns", t.last_ns},
          {"hold_ns", t.hold_ns},
          {"wait_ns", t.wait_ns},
          {"hold_share", t.hold_share()},
          {"wait_share", t.wait_share()},
          {"holds", t.holds},
          {"waits", t.waits},
          {"longest_hold_ns", t.longest_hold_ns},
          {"longest_wait_ns", t.longest_wait_ns},
          // --exact: every take and drop was traced, the shares are not estimates
          {"hold_share_ci95", exact ? nlohmann::json(0.0) : ci95_json(t)},
          {"wait_share_ci95", exact ? nlohmann::json(0.0) : ci95_json(t)}};
}

// What the recorder says of its poll loop (zeros for a recovered file).
nlohmann::json loop_figures_json(const LoopFigures& loop) {
  return {{"stop_reason", loop.stop_reason},
          {"late_polls", loop.late},
          {"missed_polls", loop.missed},
          {"max_lateness_ns", loop.max_lateness_ns},
          {"p99_lateness_ns", loop.p99_lateness_ns},
          {"poll_loop_wakeups", loop.ticks},
          {"poller_scheduling", loop.poller_scheduling},
          {"poll_mode", loop.poll_mode},
          {"dense_polls", loop.dense_polls},
          {"poller_cpu_moves", loop.placement_moves},
          {"budget_limited_polls", loop.budget_limited},
          {"low_coverage_polls", loop.low_coverage},
          {"dropped_events", loop.dropped_events},
          {"unknown_holder_polls", loop.unknown_holder_polls},
          {"impossible_switch_moves", loop.impossible_switch_moves},
          {"walk_period_ns", loop.walk_period_ns},
          {"task_reads", loop.task_reads},
          {"counter_reads", loop.counter_reads},
          {"switch_reads", loop.switch_reads},
          {"gilspy_cpu_share", loop.gilspy_cpu_share},
          {"cpu_budget", loop.cpu_budget},
          {"threads_truncated", loop.threads_truncated}};
}

nlohmann::json exact_figures_json(const ExactFigures& x) {
  return {{"probe_hits", x.hits},
          {"lost_hits", x.lost},
          {"throttled", x.throttled},
          {"takes", x.takes},
          {"handoffs", x.handoffs},
          {"undecoded_hits", x.undecoded},
          {"probe_events", x.probe_events},
          {"probe_points", x.probe_points},
          {"threads_at_start", x.threads_at_start},
          {"take_cost_ns", x.take_cost_ns},
          {"drop_cost_ns", x.drop_cost_ns}};
}

}  // namespace

// Its members are sorted by name in the output (nlohmann::json's objects are ordered maps), so the parts can
// be put together in any order.
nlohmann::json SummaryBuilder::to_json(double rate_asked, const LoopFigures& loop) const {
  const double seconds = static_cast<double>(duration_ns()) / 1e9;
  nlohmann::json threads = nlohmann::json::array();
  for (const auto& t : this->threads()) threads.push_back(thread_summary_json(t, loop.exact.on));
  nlohmann::json out = loop_figures_json(loop);
  out.update({{"duration_ns", duration_ns()},
              {"start_ns", start_ns_},
              {"stopped_ns", stopped_ns_},
              {"stops", stops_},
              {"rate_asked_hz", rate_asked},
              {"polls", stats_.polls},
              {"rate_achieved_hz", seconds > 0 ? static_cast<double>(stats_.polls) / seconds : 0.0},
              {"handoffs_seen", stats_.handoffs_seen},
              {"handoffs_total", stats_.handoffs_total},
              {"coverage", coverage()},
              {"gil_busy_share", gil_busy_share()},
              {"threads", threads},
              {"folded_threads", folded_json()},
              {"gc", gc_.to_json(duration_ns(), wait_ns())},
              {"stacks", stacks_.to_json(duration_ns(), end_ns())}});
  if (counters_.any()) out["counters"] = counters_.to_json();
  out["mode"] = loop.exact.on ? "exact" : "sampled";
  if (loop.exact.on) out["exact"] = exact_figures_json(loop.exact);
  return out;
}

int64_t SummaryBuilder::wait_ns() const {
  int64_t total = 0;
  for (const auto& [tid, t] : threads_) total += t.wait_ns;
  for (const auto& [pattern, f] : folded_) total += f.wait_ns;
  return total;
}

nlohmann::json SummaryBuilder::folded_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [pattern, f] : folded_) {
    out.push_back({{"name_pattern", f.pattern},
                   {"threads", f.threads},
                   {"busiest_tid", f.busiest_tid},
                   {"life_ns", f.life_ns},
                   {"hold_ns", f.hold_ns},
                   {"wait_ns", f.wait_ns},
                   {"holds", f.holds},
                   {"waits", f.waits},
                   {"longest_hold_ns", f.longest_hold_ns},
                   {"longest_wait_ns", f.longest_wait_ns}});
  }
  return out;
}

}  // namespace gilspy::raw
