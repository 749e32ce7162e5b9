#pragma once
// The garbage collector in a Chrome trace (issue 9), written by convert_to_chrome_trace() per input:
//
// - a "gc" slice per timed collection on the collecting thread's lane, nested inside the hold_gil slice it
//   ran in (the part of the collection inside that hold: raw::GcCollection::held_dur), and there inside the
//   innermost Python frame slice it began under (input_events.cpp places it), args generation, collected,
//   uncollectable, waiters (threads that waited for the GIL during it) and gil_wait_ms;
// - the same slices on a process-level lane "GC" (tid kGcTid), where collections too short to time between
//   two polls are "gc" instants carrying their count (args count, generation, window_us: where they
//   happened);
// - counters: "gc_count" (gen0, gen1, gen2: what gc.get_count() prints) and "gc_enabled" (1/0: a run-time
//   gc.disable() shows), with the thresholds as "gc_threshold".
//
// Nesting keeps the lane rule of chrome_trace.hpp in the viewers' double arithmetic: the child ends, as
// ts + dur added as doubles, no later than its parent does (nested_end_ns(), convert/trace_time.hpp).
#include <cstdint>

#include "convert/trace_events.hpp"
#include "raw/records.hpp"

namespace gilspy::convert {

// The process-level GC lane, beside the "GIL waiters" lane (kWaitersTid, chrome_trace.hpp).
inline constexpr int64_t kGcTid = 4'194'305;

class GcLanes {
 public:
  // `offset_ns`: the input's offset on the trace's timeline.
  void begin(EventWriter& out, int64_t pid, int64_t offset_ns);
  // The collection on the GC lane.
  void collection(const raw::GcCollection& x);
  // ...and on its thread's lane: [start_ns, end_ns) (input ns, the end already fitted inside its parent).
  // `held_part`: only the part of it that ran in this hold (the collector let the GIL go), marked so in args.
  void thread_collection(const raw::GcCollection& x, int64_t start_ns, int64_t end_ns, bool held_part);
  void untimed(const raw::GcUntimed& x);
  void counts(const raw::GcCounts& x);
  void settings(const raw::GcSettings& x);

 private:
  void name_lane();
  EventWriter* out_ = nullptr;
  int64_t pid_ = 0;
  int64_t offset_ns_ = 0;
  bool lane_named_ = false;
};

}  // namespace gilspy::convert
