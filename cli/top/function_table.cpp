#include "cli/top/function_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/terminal_text.hpp"

namespace gilspy::top {
namespace {

const FunctionFigures& figures(const FunctionRow& r, bool totals) {
  return totals ? r.total : r.interval;
}

int64_t period_ns(const TopSnapshot& s, bool totals) {
  return s.now_ns - (totals ? s.totals_start_ns : s.interval_start_ns);
}

// HOLD%: the function's own hold time over the period, the share of the GIL it had (several targets add up).
constexpr std::size_t kNumbersWidth = 6 + 2 + 10 + 2 + 10 + 2 + 10 + 2 + 10 + 2;

}  // namespace

std::vector<const FunctionRow*> sorted_functions(const TopSnapshot& s, SortKey key, bool totals) {
  std::vector<const FunctionRow*> rows;
  for (const FunctionRow& r : s.functions) {
    // With something in a column shown: an outer frame that only ever waited or slept in callees is noise.
    const FunctionFigures& f = figures(r, totals);
    if (f.own(Role::kHolding) > 0 || f.total(Role::kHolding) > 0 || f.own(Role::kWaiting) > 0 ||
        f.own(Role::kReleased) > 0)
      rows.push_back(&r);
  }
  std::sort(rows.begin(), rows.end(), [&](const FunctionRow* a, const FunctionRow* b) {
    const FunctionFigures& x = figures(*a, totals);
    const FunctionFigures& y = figures(*b, totals);
    if (key == SortKey::kHold && x.own(Role::kHolding) != y.own(Role::kHolding))
      return x.own(Role::kHolding) > y.own(Role::kHolding);
    if (key == SortKey::kWait && x.own(Role::kWaiting) != y.own(Role::kWaiting))
      return x.own(Role::kWaiting) > y.own(Role::kWaiting);
    if (key != SortKey::kTid) {
      for (const auto& [u, v] : {std::pair{x.total(Role::kHolding), y.total(Role::kHolding)},
                                 std::pair{x.own(Role::kWaiting), y.own(Role::kWaiting)},
                                 std::pair{x.own(Role::kReleased), y.own(Role::kReleased)}}) {
        if (u != v) return u > v;
      }
    }
    return a->function < b->function;
  });
  return rows;
}

std::vector<Line> function_lines(const TopSnapshot& s, SortKey key, bool totals, std::size_t width,
                                 std::size_t max_rows) {
  std::vector<Line> out;
  out.push_back(Line{{{fmt::format("{:>6}  {:>10}  {:>10}  {:>10}  {:>10}  FUNCTION", "HOLD%", "OWN HOLD",
                                   "TOTAL HOLD", "OWN WAIT", "W/O GIL"),
                       Style::kHeading}},
                     false});
  const auto rows = sorted_functions(s, key, totals);
  if (rows.empty()) {
    out.push_back(
        Line{{{"  no stack read in this period (--no-stacks, or no hold or wait ended yet)", Style::kPlain}},
             false});
    return out;
  }
  const double period = static_cast<double>(std::max<int64_t>(1, period_ns(s, totals)));
  const std::size_t room = width > kNumbersWidth ? width - kNumbersWidth : 8;
  const bool cut = rows.size() > max_rows;
  const std::size_t shown = cut ? (max_rows > 0 ? max_rows - 1 : 0) : rows.size();
  for (std::size_t i = 0; i < shown; ++i) {
    const FunctionFigures& f = figures(*rows[i], totals);
    const std::string numbers =
        fmt::format("{:>6}  {:>10}  {:>10}  {:>10}  {:>10}  ",
                    format_percent(static_cast<double>(f.own(Role::kHolding)) / period),
                    format_duration(f.own(Role::kHolding)), format_duration(f.total(Role::kHolding)),
                    format_duration(f.own(Role::kWaiting)), format_duration(f.own(Role::kReleased)));
    out.push_back(Line{{{numbers, Style::kPlain},
                        {fit_with_marker(escape_for_terminal(rows[i]->function), room), Style::kBold}},
                       false});
  }
  if (cut && max_rows > 0) {
    out.push_back(
        Line{{{fmt::format("  ... {} more functions (a taller terminal shows them)", rows.size() - shown),
               Style::kPlain}},
             false});
  }
  return out;
}

nlohmann::json functions_json(const TopSnapshot& s, std::size_t n) {
  nlohmann::json out = nlohmann::json::array();
  const auto rows = sorted_functions(s, SortKey::kHold, false);
  for (std::size_t i = 0; i < rows.size() && i < n; ++i) {
    const FunctionFigures& f = rows[i]->interval;
    out.push_back({{"function", rows[i]->function},
                   {"own_hold_s", seconds(f.own(Role::kHolding))},
                   {"total_hold_s", seconds(f.total(Role::kHolding))},
                   {"own_wait_s", seconds(f.own(Role::kWaiting))},
                   {"total_wait_s", seconds(f.total(Role::kWaiting))},
                   {"own_released_s", seconds(f.own(Role::kReleased))}});
  }
  return out;
}

}  // namespace gilspy::top
