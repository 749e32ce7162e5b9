#include "cli/top/top_format.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "base/terminal_text.hpp"

namespace gilspy::top {

std::string format_percent(double share) {
  return fmt::format("{:.1f}", 100.0 * share);
}

std::string format_duration(int64_t ns) {
  if (ns <= 0) return "-";
  if (ns < 1'000'000) return fmt::format("{}us", ns / 1000);
  if (ns < 1'000'000'000) return fmt::format("{:.1f}ms", static_cast<double>(ns) / 1e6);
  if (ns < 100'000'000'000) return fmt::format("{:.2f}s", static_cast<double>(ns) / 1e9);
  return fmt::format("{:.0f}s", static_cast<double>(ns) / 1e9);
}

std::string format_rate(double per_s) {
  return per_s < 100 ? fmt::format("{:.1f}", per_s) : fmt::format("{:.0f}", per_s);
}

std::vector<HeaderFigure> header_figures(const ProcessRow& p, bool totals) {
  const ProcessFigures& f = totals ? p.total : p.interval;
  auto or_dash = [](const auto& opt, auto format) { return opt ? format(*opt) : std::string("-"); };
  std::vector<HeaderFigure> out;
  out.push_back({"GIL busy", format_percent(f.gil_busy_share) + " %"});
  out.push_back({"waiters", f.mean_waiters
                                ? fmt::format("{:.1f} avg, {} max", *f.mean_waiters, *f.max_waiters)
                                : std::string("-")});
  out.push_back({"hand-offs", or_dash(f.handoffs_per_s, [](double v) { return format_rate(v) + "/s"; })});
  out.push_back({"coverage", or_dash(f.coverage, [](double v) { return format_percent(v) + " %"; })});
  out.push_back({"polls", or_dash(f.poll_rate_hz, [](double v) { return fmt::format("{:.0f}/s", v); })});
  out.push_back({"late", std::to_string(f.late_polls)});
  out.push_back({"missed", std::to_string(f.missed_polls)});
  for (const Figure& x : p.extra) {
    out.push_back(
        {escape_for_terminal(x.label),
         fmt::format("{:.6g}", x.value) + (x.unit.empty() ? "" : " " + escape_for_terminal(x.unit))});
  }
  return out;
}

std::vector<const ThreadRow*> sorted_threads(const ProcessRow& p, SortKey key, bool totals) {
  std::vector<const ThreadRow*> out;
  for (const ThreadRow& t : p.threads) out.push_back(&t);
  auto share = [&](const ThreadRow* t) {
    const ThreadFigures& f = totals ? t->total : t->interval;
    return key == SortKey::kWait ? f.wait_share : f.hold_share;
  };
  std::stable_sort(out.begin(), out.end(), [&](const ThreadRow* a, const ThreadRow* b) {
    if (a->ended != b->ended) return !a->ended;  // the ones going away sink to the bottom
    if (key != SortKey::kTid && share(a) != share(b)) return share(a) > share(b);
    return a->tid < b->tid;
  });
  return out;
}

namespace {

const char* sgr(Style s) {
  switch (s) {
    case Style::kPlain:
      return "";
    case Style::kBold:
      return "1";
    case Style::kHeading:
      return "7";  // reverse video, like top's column header
    case Style::kHold:
      return "32";
    case Style::kWait:
      return "31";
    case Style::kWarn:
      return "1;33";
  }
  return "";
}

}  // namespace

std::string emit(const Line& line, std::size_t width, bool colour) {
  std::string out;
  std::size_t used = 0;
  for (const Segment& seg : line.segments) {
    if (used >= width) break;
    const std::string_view text = cut_to_width(seg.text, width - used);
    used += display_width(text);
    std::string code = colour ? sgr(seg.style) : "";
    if (colour && line.dim) code = code.empty() ? "2" : "2;" + code;
    if (code.empty() || text.empty()) {
      out.append(text);
    } else {
      out += "\x1b[" + code + "m";
      out.append(text);
      out += "\x1b[0m";
    }
  }
  return out;
}

namespace {

constexpr std::size_t kNameMin = 8, kNameComfort = 16, kNameMax = 28, kBarWidth = 10;

struct ColumnSpec {
  Col col;
  const char* title;
  std::size_t width;  // for NAME: its minimum
  int keep;           // the lowest is dropped first
};

constexpr std::size_t kFunctionWidth = 30;

constexpr std::array<ColumnSpec, 12> kColumns{{
    {Col::kTid, "TID", 7, 100},
    {Col::kName, "NAME", kNameMin, 40},
    {Col::kHold, "HOLD%", 5, 90},
    {Col::kWait, "WAIT%", 5, 80},
    {Col::kCi95, "±95", 4, 60},  // HOLD% and WAIT% lie within this many points of the truth, 19 times in 20
    {Col::kReleased, "REL%", 5, 1},
    {Col::kHoldsPerS, "HOLDS/S", 7, 10},
    {Col::kMeanHold, "MEAN HOLD", 9, 2},
    {Col::kMaxHold, "MAX HOLD", 8, 30},
    {Col::kMaxWait, "MAX WAIT", 8, 20},
    {Col::kBar, "HOLD/WAIT", kBarWidth, 5},
    {Col::kFunction, "FUNCTION", kFunctionWidth, 12},  // where its last stack sample was
}};
constexpr int kAlwaysKept = 80;  // TID, HOLD%, WAIT%

const ColumnSpec& spec(Col c) {
  return kColumns[static_cast<std::size_t>(c)];
}

std::size_t column_width(const TableLayout& l, Col c) {
  return c == Col::kName ? l.name_width : spec(c).width;
}

}  // namespace

TableLayout layout_table(std::size_t width) {
  std::vector<ColumnSpec> kept(kColumns.begin(), kColumns.end());
  auto needed = [&] {
    std::size_t sum = kept.size() - 1;  // one space between columns
    for (const ColumnSpec& c : kept) sum += c.width;
    return sum;
  };
  // Past the columns that do not fit, those that matter less than the name go while it would be cut shorter
  // than kNameComfort: "worker-1 (ended)" in full beats a mean hold.
  const auto name_short = [&] { return needed() + (kNameComfort - kNameMin) > width; };
  while (needed() > width || name_short()) {
    auto least = std::min_element(kept.begin(), kept.end(),
                                  [](const ColumnSpec& a, const ColumnSpec& b) { return a.keep < b.keep; });
    if (least->keep >= kAlwaysKept) break;  // what is left is cut at the screen's edge
    if (needed() <= width && least->keep >= spec(Col::kName).keep) break;
    kept.erase(least);
  }
  TableLayout l;
  for (const ColumnSpec& c : kept) l.columns.push_back(c.col);
  const bool has_name = std::find(l.columns.begin(), l.columns.end(), Col::kName) != l.columns.end();
  if (has_name) {
    const std::size_t spare = width > needed() ? width - needed() : 0;
    l.name_width = std::min(kNameMax, kNameMin + spare);
  }
  return l;
}

Line table_heading(const TableLayout& layout) {
  std::string text;
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const Col c = layout.columns[i];
    if (i > 0) text += ' ';
    text += pad_to_width(spec(c).title, column_width(layout, c),
                         c == Col::kName || c == Col::kBar || c == Col::kFunction);
  }
  return Line{{{text, Style::kHeading}}, false};
}

namespace {
// hold cells '#', wait cells '~', released blank: readable without colour, coloured when there is colour.
std::vector<Segment> bar(const ThreadFigures& f) {
  const auto cells = [](double share) {
    return static_cast<std::size_t>(std::lround(std::clamp(share, 0.0, 1.0) * kBarWidth));
  };
  const std::size_t hold = cells(f.hold_share);
  const std::size_t wait =
      std::min(kBarWidth, cells(f.hold_share + f.wait_share)) - std::min(hold, kBarWidth);
  const std::size_t rest = kBarWidth - std::min(kBarWidth, hold + wait);
  return {{std::string(hold, '#'), Style::kHold},
          {std::string(wait, '~'), Style::kWait},
          {std::string(rest, ' '), Style::kPlain}};
}
}  // namespace

Line table_row(const TableLayout& layout, const ThreadRow& t, bool totals) {
  const ThreadFigures& f = totals ? t.total : t.interval;
  Line line;
  line.dim = t.ended;
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const Col c = layout.columns[i];
    if (i > 0) line.segments.push_back({" ", Style::kPlain});
    if (c == Col::kBar) {
      for (Segment& s : bar(f)) line.segments.push_back(std::move(s));
      continue;
    }
    std::string value;
    switch (c) {
      case Col::kTid:
        value = std::to_string(t.tid);
        break;
      case Col::kName:
        value = escape_for_terminal(t.name) + (t.ended ? " (ended)" : "");
        break;
      case Col::kHold:
        value = format_percent(f.hold_share);
        break;
      case Col::kWait:
        value = format_percent(f.wait_share);
        break;
      case Col::kCi95:
        value = f.share_ci95 < 0 ? "?" : format_percent(f.share_ci95);
        break;
      case Col::kReleased:
        value = format_percent(f.released_share);
        break;
      case Col::kHoldsPerS:
        value = format_rate(f.holds_per_s);
        break;
      case Col::kMeanHold:
        value = format_duration(f.mean_hold_ns);
        break;
      case Col::kMaxHold:
        value = format_duration(f.longest_hold_ns);
        break;
      case Col::kMaxWait:
        value = format_duration(f.longest_wait_ns);
        break;
      case Col::kBar:
        break;
      case Col::kFunction:
        value = t.function.empty() ? "-" : escape_for_terminal(t.function);
        break;
    }
    const bool left = c == Col::kName || c == Col::kFunction;
    line.segments.push_back({pad_to_width(value, column_width(layout, c), left), Style::kPlain});
  }
  return line;
}

}  // namespace gilspy::top
