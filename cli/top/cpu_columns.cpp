#include "cli/top/cpu_columns.hpp"

#include <algorithm>
#include <array>
#include <string>

#include <fmt/format.h>

#include "base/terminal_text.hpp"

namespace gilspy::top {

namespace {

constexpr std::size_t kCpuNameMin = 8, kCpuNameMax = 28;

struct Spec {
  CpuCol col;
  const char* title;
  std::size_t width;
  int keep;  // the lowest is dropped first
};

constexpr std::array<Spec, 12> kSpecs{{
    {CpuCol::kTid, "TID", 7, 100},
    {CpuCol::kName, "NAME", kCpuNameMin, 40},
    {CpuCol::kCpu, "CPU%", 5, 95},
    {CpuCol::kHoldCpu, "HOLD:CPU%", 9, 90},
    {CpuCol::kWaitCpu, "WAIT:CPU%", 9, 90},
    {CpuCol::kRunq, "RUNQ%", 5, 50},
    {CpuCol::kHoldRunq, "HOLD:RUNQ%", 10, 85},
    {CpuCol::kSwitches, "SW/S", 6, 20},
    {CpuCol::kIpc, "IPC", 5, 30},
    {CpuCol::kHoldIpc, "HOLD:IPC", 8, 25},
    {CpuCol::kCacheMiss, "CMISS/KI", 8, 10},
    {CpuCol::kBranchMiss, "BMISS/KI", 8, 5},
}};
constexpr int kCpuAlwaysKept = 85;

const Spec& spec(CpuCol c) {
  return kSpecs[static_cast<std::size_t>(c)];
}

std::size_t width_of(const CpuLayout& l, CpuCol c) {
  return c == CpuCol::kName ? l.name_width : spec(c).width;
}

std::string share(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : "-";
}

std::string ratio(uint64_t num, uint64_t den, bool counted, double scale = 1.0) {
  if (!counted || den == 0) return "-";
  return fmt::format("{:.2f}", scale * static_cast<double>(num) / static_cast<double>(den));
}

}  // namespace

CpuLayout layout_cpu_table(std::size_t width) {
  std::vector<Spec> kept(kSpecs.begin(), kSpecs.end());
  auto needed = [&] {
    std::size_t sum = kept.size() - 1;
    for (const Spec& s : kept) sum += s.width;
    return sum;
  };
  while (needed() > width) {
    auto least = std::min_element(kept.begin(), kept.end(),
                                  [](const Spec& a, const Spec& b) { return a.keep < b.keep; });
    if (least->keep >= kCpuAlwaysKept) break;
    kept.erase(least);
  }
  CpuLayout l;
  for (const Spec& s : kept) l.columns.push_back(s.col);
  if (std::find(l.columns.begin(), l.columns.end(), CpuCol::kName) != l.columns.end()) {
    l.name_width = std::min(kCpuNameMax, kCpuNameMin + (width > needed() ? width - needed() : 0));
  }
  return l;
}

Line cpu_heading(const CpuLayout& layout) {
  std::string text;
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const CpuCol c = layout.columns[i];
    if (i > 0) text += ' ';
    text += pad_to_width(spec(c).title, width_of(layout, c), c == CpuCol::kName);
  }
  return Line{{{text, Style::kHeading}}, false};
}

Line cpu_row(const CpuLayout& layout, const ThreadRow& t, bool totals) {
  const CpuFigures& f = totals ? t.cpu_total : t.cpu_interval;
  const CpuPiece all = f.total();
  const CpuPiece& hold = f.role(Role::kHolding);
  const CpuPiece& wait = f.role(Role::kWaiting);
  Line line;
  line.dim = t.ended;
  for (std::size_t i = 0; i < layout.columns.size(); ++i) {
    const CpuCol c = layout.columns[i];
    if (i > 0) line.segments.push_back({" ", Style::kPlain});
    std::string v;
    switch (c) {
      case CpuCol::kTid:
        v = std::to_string(t.tid);
        break;
      case CpuCol::kName:
        v = escape_for_terminal(t.name) + (t.ended ? " (ended)" : "");
        break;
      case CpuCol::kCpu:
        v = share(all.cpu_ns, all.time_ns);
        break;
      case CpuCol::kHoldCpu:
        v = share(hold.cpu_ns, hold.time_ns);
        break;
      case CpuCol::kWaitCpu:
        v = share(wait.cpu_ns, wait.time_ns);
        break;
      case CpuCol::kRunq:
        v = share(all.run_delay_ns, all.time_ns);
        break;
      case CpuCol::kHoldRunq:
        v = share(hold.run_delay_ns, hold.time_ns);
        break;
      case CpuCol::kSwitches:
        v = all.time_ns > 0
                ? format_rate(static_cast<double>(all.slices) * 1e9 / static_cast<double>(all.time_ns))
                : "-";
        break;
      case CpuCol::kIpc:
        v = ratio(all.instructions, all.cycles, all.counted);
        break;
      case CpuCol::kHoldIpc:
        v = ratio(hold.instructions, hold.cycles, hold.counted);
        break;
      case CpuCol::kCacheMiss:
        v = ratio(all.cache_misses, all.instructions, all.misses_counted, 1000.0);
        break;
      case CpuCol::kBranchMiss:
        v = ratio(all.branch_misses, all.instructions, all.misses_counted, 1000.0);
        break;
    }
    line.segments.push_back({pad_to_width(v, width_of(layout, c), c == CpuCol::kName), Style::kPlain});
  }
  return line;
}

}  // namespace gilspy::top
