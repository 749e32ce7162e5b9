#include "convert/gc_trace.hpp"

#include <fmt/format.h>

#include <string>

namespace gilspy::convert {
namespace {

// A timed collection's args, on the GC lane and on its thread's.
auto collection_args(const raw::GcCollection& x) {
  return [&x](JsonWriter& w) {
    w.field("generation", x.generation)
        .field("collected", x.collected)
        .field("uncollectable", x.uncollectable)
        .field("waiters", x.waiters)
        .key("gil_wait_ms")
        .fixed(static_cast<double>(x.wait_ns) / 1e6, 3);
  };
}

// gen0, gen1, gen2 of a counter (counts, thresholds).
auto generations(const int64_t (&v)[3]) {
  return [&v](JsonWriter& w) { w.field("gen0", v[0]).field("gen1", v[1]).field("gen2", v[2]); };
}

}  // namespace

void GcLanes::begin(EventWriter& out, int64_t pid, int64_t offset_ns) {
  out_ = &out;
  pid_ = pid;
  offset_ns_ = offset_ns;
  lane_named_ = false;
}

void GcLanes::name_lane() {
  if (lane_named_) return;
  out_->thread_name(pid_, kGcTid, offset_ns_, "GC");
  out_->thread_sort_index(pid_, kGcTid, offset_ns_, -2);
  lane_named_ = true;
}

void GcLanes::collection(const raw::GcCollection& x) {
  name_lane();
  const int64_t start = offset_ns_ + x.ts;
  out_->slice("gil", "gc", pid_, kGcTid, start, start + x.dur, collection_args(x));
}

void GcLanes::thread_collection(const raw::GcCollection& x, int64_t start_ns, int64_t end_ns,
                                bool held_part) {
  if (end_ns <= start_ns) return;
  out_->slice("gil", "gc", pid_, x.tid, offset_ns_ + start_ns, offset_ns_ + end_ns, [&](JsonWriter& w) {
    collection_args(x)(w);
    if (held_part) w.field("held_part", true);  // the collector let the GIL go: only what ran in this hold
  });
}

void GcLanes::untimed(const raw::GcUntimed& x) {
  name_lane();
  out_->instant("gc", pid_, kGcTid, offset_ns_ + x.ts + x.window / 2, [&](JsonWriter& w) {
    w.field("generation", x.generation)
        .field("count", x.n)
        .field("collected", x.collected)
        .field("uncollectable", x.uncollectable)
        .key("window_us")
        .fixed(static_cast<double>(x.window) / 1e3, 3)
        .field("untimed", fmt::format("{} collection(s) between two polls, too short to time", x.n));
  });
}

void GcLanes::counts(const raw::GcCounts& x) {
  out_->process_counter("gc_count", pid_, offset_ns_ + x.ts, generations(x.count));
}

void GcLanes::settings(const raw::GcSettings& x) {
  out_->process_counter("gc_enabled", pid_, offset_ns_ + x.ts,
                        [&](JsonWriter& w) { w.field("enabled", x.enabled ? 1 : 0); });
  out_->process_counter("gc_threshold", pid_, offset_ns_ + x.ts, generations(x.threshold));
}

}  // namespace gilspy::convert
