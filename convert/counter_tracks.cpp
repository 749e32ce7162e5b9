#include "convert/counter_tracks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "raw/counter_summary.hpp"

namespace gilspy::convert {

std::string CounterPoint::name() const {
  return fmt::format("tid {}", tid);
}

void CounterPoint::write_args(JsonWriter& w) const {
  if (closing()) {
    w.field("cpu %", 0);
    return;
  }
  if (cpu_percent) w.key("cpu %").fixed(*cpu_percent, 1);
  if (run_delay_ms) w.key("run-queue delay ms").fixed(*run_delay_ms, 3);
  if (ipc) w.key("IPC").fixed(*ipc, 3);
}

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
    if (gap) emit_({.tid = s.tid, .ts = end});
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
  CounterPoint p{.tid = tid, .ts = w.start};
  if (w.sched_ns > 0) {
    t.run_delay_total_ns = raw::saturating_add(t.run_delay_total_ns, w.run_delay_ns);
    p.cpu_percent = 100.0 * static_cast<double>(w.cpu_ns) / static_cast<double>(w.sched_ns);
    p.run_delay_ms = static_cast<double>(t.run_delay_total_ns) / 1e6;
  }
  if (w.counted && w.cycles > 0) p.ipc = static_cast<double>(w.instructions) / static_cast<double>(w.cycles);
  if (!p.closing()) emit_(p);
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
    if (end >= 0) emit_({.tid = tid, .ts = end});
  }
  threads_.clear();
}

}  // namespace gilspy::convert
