#include "sampler/proc/process_cpu.hpp"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <string>

namespace gilspy::sampler {

std::optional<std::vector<TaskCpu>> read_process_cpu(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  const std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return std::nullopt;
  std::vector<TaskCpu> tasks;
  while (const dirent* e = ::readdir(d.get())) {
    int32_t tid = 0;
    const char* end = e->d_name + std::char_traits<char>::length(e->d_name);
    if (std::from_chars(e->d_name, end, tid).ptr != end || tid <= 0) continue;  // ".", ".."
    TaskSchedStatFile sched;
    sched.reset(pid, tid);
    TaskStatFile stat;
    stat.reset(pid, tid);
    const std::optional<SchedStat> s = sched.read();
    const std::optional<StatTimes> t = stat.times();
    if (s && t) tasks.push_back({tid, *s, *t});  // else: ended since the listing
  }
  return tasks;
}

void CpuTotals::add(int64_t mono_ns, const std::vector<TaskCpu>& tasks) {
  if (!points_.empty() && mono_ns <= points_.back().mono_ns) return;
  Point p = points_.empty() ? Point{} : points_.back();
  p.mono_ns = mono_ns;
  const bool first = points_.empty();
  std::unordered_map<int32_t, TaskCpu> now;
  for (const TaskCpu& t : tasks) {
    const auto before = last_.find(t.tid);
    if (!first) {
      const TaskCpu from = before != last_.end() ? before->second : TaskCpu{};
      p.cpu_ns += std::max<int64_t>(0, t.stat.cpu_ns - from.stat.cpu_ns);
      p.user_ticks += t.times.user_ticks - std::min(t.times.user_ticks, from.times.user_ticks);
      p.system_ticks += t.times.system_ticks - std::min(t.times.system_ticks, from.times.system_ticks);
    }
    now.emplace(t.tid, t);
  }
  most_threads_ = std::max(most_threads_, static_cast<int>(tasks.size()));
  last_ = std::move(now);
  points_.push_back(p);
}

namespace {

// The running totals at `t`, linear between the two points around it.
CpuTotals::Point at(const std::vector<CpuTotals::Point>& pts, int64_t t) {
  const auto after = std::lower_bound(pts.begin(), pts.end(), t,
                                      [](const CpuTotals::Point& p, int64_t v) { return p.mono_ns < v; });
  if (after == pts.begin()) return *after;
  const CpuTotals::Point& a = *(after - 1);
  const CpuTotals::Point& b = *after;
  const double f = static_cast<double>(t - a.mono_ns) / static_cast<double>(b.mono_ns - a.mono_ns);
  auto mix = [f](auto x, auto y) {
    return x + static_cast<decltype(x)>(f * (static_cast<double>(y) - static_cast<double>(x)));
  };
  return {t, mix(a.cpu_ns, b.cpu_ns), mix(a.user_ticks, b.user_ticks), mix(a.system_ticks, b.system_ticks)};
}

}  // namespace

std::optional<CpuTotals::Rates> CpuTotals::rates(int64_t from_ns, int64_t to_ns, double tick_s) const {
  if (points_.size() < 2 || to_ns <= from_ns || from_ns < points_.front().mono_ns ||
      to_ns > points_.back().mono_ns)
    return std::nullopt;
  const Point a = at(points_, from_ns), b = at(points_, to_ns);
  const double span_s = static_cast<double>(to_ns - from_ns) / 1e9;
  return Rates{static_cast<double>(b.cpu_ns - a.cpu_ns) / 1e9 / span_s,
               static_cast<double>(b.user_ticks - a.user_ticks) * tick_s / span_s,
               static_cast<double>(b.system_ticks - a.system_ticks) * tick_s / span_s};
}

}  // namespace gilspy::sampler
