#include "convert/counter_tracks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "raw/counter_summary.hpp"

namespace gilspy::convert {

void CounterTracks::setup(const raw::CounterSetup& s) {
  cycles_.reset();
  instructions_.reset();
  for (size_t i = 0; i < s.count && i < raw::kMaxCounterValues; ++i) {
    if (s.kinds[i] == raw::CounterKind::kCycles) cycles_ = i;
    if (s.kinds[i] == raw::CounterKind::kInstructions) instructions_ = i;
  }
}

void CounterTracks::sample(const raw::CounterSample& s) {
  Thread& t = threads_[s.tid];
  Window& w = t.w;
  // A window's records (one per role) come together and share its span; the next window starts a new point.
  if (w.start >= 0 && s.ts != w.start) {
    const bool gap = s.ts > w.end;  // the thread's windows did not follow on (a cut file, an edit)
    const int64_t end = w.end;
    flush(s.tid, t);
    if (gap) emit_(fmt::format("tid {}", s.tid), s.tid, end, R"({"cpu %":0})");
  }
  w.start = s.ts;
  w.end = std::max(w.end, s.ts + s.dur);
  w.sched_ns = raw::saturating_add(w.sched_ns, s.time_ns);
  w.cpu_ns = raw::saturating_add(w.cpu_ns, s.cpu_ns);
  w.run_delay_ns = raw::saturating_add(w.run_delay_ns, s.run_delay_ns);
  if (cycles_ && instructions_ && *cycles_ < s.count && *instructions_ < s.count) {
    w.cycles = raw::saturating_add(w.cycles, s.values[*cycles_]);
    w.instructions = raw::saturating_add(w.instructions, s.values[*instructions_]);
    w.counted = true;
  }
}

void CounterTracks::flush(int64_t tid, Thread& t) {
  Window& w = t.w;
  if (w.start < 0) return;
  std::string args = "{";
  if (w.sched_ns > 0) {
    t.run_delay_total_ns = raw::saturating_add(t.run_delay_total_ns, w.run_delay_ns);
    args += fmt::format(R"("cpu %":{:.1f},"run-queue delay ms":{:.3f})",
                        100.0 * static_cast<double>(w.cpu_ns) / static_cast<double>(w.sched_ns),
                        static_cast<double>(t.run_delay_total_ns) / 1e6);
  }
  if (w.counted && w.cycles > 0) {
    args += fmt::format(R"({}"IPC":{:.3f})", args.size() > 1 ? "," : "",
                        static_cast<double>(w.instructions) / static_cast<double>(w.cycles));
  }
  args += "}";
  if (args.size() > 2) emit_(fmt::format("tid {}", tid), tid, w.start, args);
  const int64_t end = w.end;
  w = Window{};
  w.end = end;
}

void CounterTracks::finish() {
  // In tid order, so that the output does not depend on the hash table's.
  std::vector<int64_t> tids;
  for (const auto& [tid, t] : threads_) tids.push_back(tid);
  std::sort(tids.begin(), tids.end());
  for (const int64_t tid : tids) {
    Thread& t = threads_.at(tid);
    const int64_t end = t.w.end;
    if (t.w.start >= 0) flush(tid, t);
    if (end >= 0) emit_(fmt::format("tid {}", tid), tid, end, R"({"cpu %":0})");
  }
  threads_.clear();
}

}  // namespace gilspy::convert
