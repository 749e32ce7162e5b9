#include "convert/gc_trace.hpp"

#include <fmt/format.h>

#include <charconv>
#include <string>

#include "convert/chrome_trace.hpp"

namespace gilspy::convert {
namespace {

std::string collection_args(const raw::GcCollection& x) {
  return fmt::format(
      R"({{"generation":{},"collected":{},"uncollectable":{},"waiters":{},"gil_wait_ms":{:.3f}}})",
      x.generation, x.collected, x.uncollectable, x.waiters, static_cast<double>(x.wait_ns) / 1e6);
}

}  // namespace

int64_t nested_end_ns(int64_t parent_start_ns, int64_t start_ns, int64_t end_ns) {
  // The parent ends at end_ns or later; where it is written to end, in doubles, is at least where it would be
  // written to end if it ended at end_ns (reader_safe_dur_ns grows with the end).
  const double limit = reader_us(parent_start_ns) + reader_us(reader_safe_dur_ns(parent_start_ns, end_ns));
  const double start = reader_us(start_ns);
  int64_t dur = end_ns - start_ns;
  while (dur > 0 && start + reader_us(dur) > limit) --dur;
  return start_ns + dur;
}

void GcLanes::begin(TraceOut& out, int64_t pid, int64_t offset_ns) {
  out_ = &out;
  pid_ = pid;
  offset_ns_ = offset_ns;
  lane_named_ = false;
}

void GcLanes::name_lane() {
  if (lane_named_) return;
  out_->metadata("thread_name", pid_, kGcTid, offset_ns_, "name", "\"GC\"");
  out_->metadata("thread_sort_index", pid_, kGcTid, offset_ns_, "sort_index", "-2");
  lane_named_ = true;
}

void GcLanes::collection(const raw::GcCollection& x) {
  const std::string args = collection_args(x);
  name_lane();
  const int64_t start = offset_ns_ + x.ts;
  out_->slice("gc", pid_, kGcTid, start, start + x.dur, args);
}

void GcLanes::thread_collection(const raw::GcCollection& x, int64_t parent_start_ns, int64_t start_ns,
                                int64_t end_ns) {
  if (end_ns <= start_ns) return;
  const int64_t start = offset_ns_ + start_ns;
  const int64_t end = nested_end_ns(offset_ns_ + parent_start_ns, start, offset_ns_ + end_ns);
  out_->slice("gc", pid_, x.tid, start, end, collection_args(x));
}

void GcLanes::untimed(const raw::GcUntimed& x) {
  name_lane();
  out_->instant(
      "gc", pid_, kGcTid, offset_ns_ + x.ts + x.window / 2,
      fmt::format(R"({{"generation":{},"count":{},"collected":{},"uncollectable":{},"window_us":{:.3f},)"
                  R"("untimed":"{} collection(s) between two polls, too short to time"}})",
                  x.generation, x.n, x.collected, x.uncollectable, static_cast<double>(x.window) / 1e3, x.n));
}

void GcLanes::counts(const raw::GcCounts& x) {
  out_->counter("gc_count", pid_, offset_ns_ + x.ts,
                fmt::format(R"({{"gen0":{},"gen1":{},"gen2":{}}})", x.count[0], x.count[1], x.count[2]));
}

void GcLanes::settings(const raw::GcSettings& x) {
  out_->counter("gc_enabled", pid_, offset_ns_ + x.ts, fmt::format(R"({{"enabled":{}}})", x.enabled ? 1 : 0));
  out_->counter(
      "gc_threshold", pid_, offset_ns_ + x.ts,
      fmt::format(R"({{"gen0":{},"gen1":{},"gen2":{}}})", x.threshold[0], x.threshold[1], x.threshold[2]));
}

}  // namespace gilspy::convert
