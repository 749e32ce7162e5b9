#include "cli/check_report.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "base/terminal_text.hpp"
#include "cli/summary_text.hpp"

namespace gilspy::cli {

bool CheckRow::held() const {
  return judged() && std::abs(hold_diff_pp()) <= 100 * ci95 && std::abs(wait_diff_pp()) <= 100 * ci95;
}

std::vector<CheckRow> check_rows(const raw::SummaryBuilder& sampled,
                                 const std::vector<ExactThreadTotal>& exact) {
  std::vector<CheckRow> rows;
  auto share = [](int64_t ns, int64_t life) {
    return life > 0 ? static_cast<double>(ns) / static_cast<double>(life) : 0.0;
  };
  for (const raw::ThreadSummary& t : sampled.threads()) {
    CheckRow r{.tid = t.tid, .name = t.name, .life_ns = std::max<int64_t>(0, t.last_ns - t.first_ns)};
    r.sampled_hold = t.hold_share();
    r.sampled_wait = t.wait_share();
    r.ci95 = t.share_ci95();
    const auto x =
        std::find_if(exact.begin(), exact.end(), [&](const ExactThreadTotal& e) { return e.tid == t.tid; });
    if (x != exact.end()) {
      r.exact_hold = share(x->hold_ns, r.life_ns);
      r.exact_wait = share(x->wait_ns, r.life_ns);
    }
    rows.push_back(r);
  }
  for (const ExactThreadTotal& e : exact) {
    const bool known =
        std::any_of(rows.begin(), rows.end(), [&](const CheckRow& r) { return r.tid == e.tid; });
    if (known || e.hold_ns + e.wait_ns == 0) continue;
    CheckRow r{.tid = e.tid, .name = "(never seen by the sampler)", .life_ns = sampled.duration_ns()};
    r.exact_hold = share(e.hold_ns, r.life_ns);
    r.exact_wait = share(e.wait_ns, r.life_ns);
    r.seen_by_sampler = false;
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const CheckRow& a, const CheckRow& b) {
    return a.exact_hold * static_cast<double>(a.life_ns) + a.exact_wait * static_cast<double>(a.life_ns) >
           b.exact_hold * static_cast<double>(b.life_ns) + b.exact_wait * static_cast<double>(b.life_ns);
  });
  return rows;
}

namespace {

struct Verdict {
  size_t judged = 0, held = 0, unseen = 0;
  const CheckRow* worst_hold = nullptr;
  const CheckRow* worst_wait = nullptr;
};

Verdict verdict_of(const std::vector<CheckRow>& rows) {
  Verdict v;
  for (const CheckRow& r : rows) {
    if (!r.seen_by_sampler) {
      ++v.unseen;  // said apart: it has no sampled shares to differ
      continue;
    }
    if (r.judged()) {
      ++v.judged;
      if (r.held()) ++v.held;
    }
    if (v.worst_hold == nullptr || std::abs(r.hold_diff_pp()) > std::abs(v.worst_hold->hold_diff_pp()))
      v.worst_hold = &r;
    if (v.worst_wait == nullptr || std::abs(r.wait_diff_pp()) > std::abs(v.worst_wait->wait_diff_pp()))
      v.worst_wait = &r;
  }
  return v;
}

// The answer first: how many intervals held, the worst differences, threads the sampler never saw.
void check_verdict_lines(std::string& out, const CheckHeader& h, const Verdict& v) {
  fmt::format_to(
      std::back_inserter(out),
      "gilspy check: pid {} (Python {}), {:.2f} s, the sampler against every take and drop (--exact)\n",
      h.pid, escape_for_terminal(h.python_version), h.seconds);
  if (v.judged > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  the sampler's 95 % interval held for {} of {} threads ({:.0f} %; about 95 % is expected)\n",
        v.held, v.judged, percent_of(static_cast<double>(v.held), static_cast<double>(v.judged)));
  }
  if (v.worst_hold != nullptr) {
    fmt::format_to(std::back_inserter(out),
                   "  worst difference: hold {:+.2f} pp (thread {}), wait {:+.2f} pp (thread {})\n",
                   v.worst_hold->hold_diff_pp(), v.worst_hold->tid, v.worst_wait->wait_diff_pp(),
                   v.worst_wait->tid);
  }
  if (v.unseen > 0) {
    fmt::format_to(std::back_inserter(out),
                   "  {} thread{} held or waited for the GIL without the sampler seeing {}\n", v.unseen,
                   v.unseen == 1 ? "" : "s", v.unseen == 1 ? "it" : "them");
  }
}

// Per thread, both ways, at most `max_rows` rows (0: all).
void check_table(std::string& out, const std::vector<CheckRow>& rows, size_t max_rows) {
  fmt::format_to(std::back_inserter(out), "  {:>8}  {:<{}} {:>17} {:>7} {:>17} {:>7} {:>6} {:>5}\n", "TID",
                 "THREAD", kNameColumns, "HOLD % poll/exact", "Δpp", "WAIT % poll/exact", "Δpp", "±95%",
                 "HELD");
  size_t shown = 0;
  for (const CheckRow& r : rows) {
    if (max_rows > 0 && shown++ >= max_rows) break;
    const std::string name = fit_with_marker(escape_for_terminal(r.name), kNameColumns);
    const std::string pad(kNameColumns - std::min(kNameColumns, display_width(name)), ' ');
    fmt::format_to(std::back_inserter(out),
                   "  {:>8}  {}{} {:>8.2f} {:>8.2f} {:>+7.2f} {:>8.2f} {:>8.2f} {:>+7.2f} {:>6} {:>5}\n",
                   r.tid, name, pad, 100 * r.sampled_hold, 100 * r.exact_hold, r.hold_diff_pp(),
                   100 * r.sampled_wait, 100 * r.exact_wait, r.wait_diff_pp(),
                   r.judged() ? fmt::format("{:.2f}", 100 * r.ci95) : "?",
                   !r.judged() ? "-"
                   : r.held()  ? "yes"
                               : "NO");
  }
  if (max_rows > 0 && rows.size() > max_rows) {
    fmt::format_to(std::back_inserter(out), "  + {} more threads (--threads all)\n", rows.size() - max_rows);
  }
}

// What each side cost: the sampler gilspy's CPU, the probes the target's (estimated, and measured in it).
void check_cost_lines(std::string& out, const CheckHeader& h) {
  const raw::LoopFigures& f = *h.figures;
  const raw::ExactFigures& x = f.exact;
  const double takes_per_s = h.seconds > 0 ? static_cast<double>(x.takes) / h.seconds : 0;
  const double per = x.take_cost_ns + x.drop_cost_ns;
  fmt::format_to(
      std::back_inserter(out),
      "  cost: the sampler took {:.1f} % of a core of gilspy's; the probes {:.0f} takes a second at "
      "{:.1f} us per take and drop, about {:.1f} % of a core in the target\n",
      100 * f.gilspy_cpu_share, takes_per_s, per / 1000, 100 * takes_per_s * per / 1e9);
  if (h.cpu) {
    const CheckCpu& c = *h.cpu;
    fmt::format_to(std::back_inserter(out),
                   "  measured in the target (its threads' CPU time, against {:.1f} s untraced just before): "
                   "user-mode work (its progress) {:+.1f} % ±{:.1f}, kernel time {:+.1f} % of a core (the "
                   "probes' traps run in its threads)\n",
                   c.untraced_s, 100 * c.progress_change(), 100 * c.progress_change_ci95(),
                   100 * c.extra_system_cpus());
  } else {
    fmt::format_to(std::back_inserter(out), "  measured in the target: not measured ({})\n",
                   h.cpu_watched ? "its threads could not be read over the whole window"
                                 : "a launched program has no untraced stretch before it");
  }
  if (x.lost > 0 || x.throttled > 0) {
    fmt::format_to(std::back_inserter(out),
                   "  WARNING: {} probe hits lost, {} throttling notices: the exact side is not exact here\n",
                   x.lost, x.throttled);
  }
}

}  // namespace

double CheckCpu::progress_change() const {
  return untraced_user_cpus > 0 ? window_user_cpus / untraced_user_cpus - 1 : 0;
}

double CheckCpu::progress_change_ci95() const {
  if (untraced_user_cpus <= 0 || window_user_cpus <= 0 || untraced_s <= 0 || window_s <= 0) return 0;
  // Each thread's tick count is rounded at both ends of a stretch: uniform errors of one tick, sd 1/sqrt(12)
  const double sd_s = std::sqrt(2.0 * threads / 12.0) * tick_s;
  const double a = sd_s / untraced_s / untraced_user_cpus, b = sd_s / window_s / window_user_cpus;
  return 1.96 * (1 + progress_change()) * std::sqrt(a * a + b * b);
}

std::string format_check(const CheckHeader& h, const std::vector<CheckRow>& rows, size_t max_rows) {
  std::string out;
  check_verdict_lines(out, h, verdict_of(rows));
  check_table(out, rows, max_rows);
  if (h.figures != nullptr) check_cost_lines(out, h);
  return out;
}

nlohmann::json check_json(const CheckHeader& h, const std::vector<CheckRow>& rows) {
  const Verdict v = verdict_of(rows);
  nlohmann::json threads = nlohmann::json::array();
  for (const CheckRow& r : rows) {
    threads.push_back({{"tid", r.tid},
                       {"name", r.name},
                       {"life_ns", r.life_ns},
                       {"seen_by_sampler", r.seen_by_sampler},
                       {"sampled",
                        {{"hold_share", r.sampled_hold},
                         {"wait_share", r.sampled_wait},
                         {"share_ci95", r.judged() ? nlohmann::json(r.ci95) : nlohmann::json(nullptr)}}},
                       {"exact", {{"hold_share", r.exact_hold}, {"wait_share", r.exact_wait}}},
                       {"hold_diff_pp", r.hold_diff_pp()},
                       {"wait_diff_pp", r.wait_diff_pp()},
                       {"interval_held", r.judged() ? nlohmann::json(r.held()) : nlohmann::json(nullptr)}});
  }
  nlohmann::json out = {{"pid", h.pid},
                        {"python_version", h.python_version},
                        {"seconds", h.seconds},
                        {"threads_judged", v.judged},
                        {"intervals_held", v.held},
                        {"threads_unseen_by_sampler", v.unseen},
                        {"threads", threads}};
  if (h.figures != nullptr) {
    const raw::ExactFigures& x = h.figures->exact;
    out["cost"] = {{"gilspy_cpu_share", h.figures->gilspy_cpu_share},
                   {"exact_takes", x.takes},
                   {"exact_take_cost_ns", x.take_cost_ns},
                   {"exact_drop_cost_ns", x.drop_cost_ns},
                   {"exact_lost_hits", x.lost}};
    if (h.cpu) {
      const CheckCpu& c = *h.cpu;
      out["cost"]["measured"] = {{"untraced_s", c.untraced_s},
                                 {"window_s", c.window_s},
                                 {"untraced_user_cpus", c.untraced_user_cpus},
                                 {"untraced_system_cpus", c.untraced_system_cpus},
                                 {"window_user_cpus", c.window_user_cpus},
                                 {"window_system_cpus", c.window_system_cpus},
                                 {"progress_change", c.progress_change()},
                                 {"progress_change_ci95", c.progress_change_ci95()}};
    }
  }
  return out;
}

}  // namespace gilspy::cli
