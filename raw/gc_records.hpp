#pragma once
// The garbage collector's record kinds (issue 9), included by records.hpp. Raw lines start with "G":
//
//   ["G",tid,ts,dur,gen,collected,uncollectable,waiters,wait_ns,hold_lead,held_dur,held_from]   a timed
//   collection (held_from: since format 3's first files, which lack it, read as 0)
//   ["GI",ts,window,gen,n,collected,uncollectable]                                   collections too short to
//   time
//   ["GC",ts,count0,count1,count2]                                                   gc.get_count()
//   ["GS",ts,enabled,threshold0,threshold1,threshold2]                               gc.isenabled(),
//   thresholds
//
// A collection is a stretch of polls that read the GC state's `collecting` as 1; it starts and ends at the
// midpoints between the polls that saw it begin and end (like holds), and its generation is the one whose
// `collections` counter moved. Collections that began and ended between two polls are counted from the
// counters alone (GcUntimed): how many, and within which window, never with a made-up duration.
#include <cstdint>

namespace gilspy::raw {

// One collection the sampler saw running.
struct GcCollection {
  int64_t tid = 0;  // the thread that ran it (sampler/gc_tracker.hpp says how it is told); 0 when not known
  int64_t ts = 0;
  int64_t dur = 0;
  int32_t generation = -1;     // 0-2; -1 when it had not ended (no counter moved) when the recording did
  uint64_t collected = 0;      // objects freed (the generation's `collected` counter delta)
  uint64_t uncollectable = 0;  // objects put into gc.garbage
  uint64_t waiters = 0;  // threads that waited for the GIL during it (inside take_gil at any time in it)
  int64_t wait_ns = 0;   // GIL waiting that happened during it, all threads together (thread-ns)
  // The part of the collection on the collector's lane: its longest hold inside the collection,
  // [ts + held_from, ts + held_from + held_dur] (all of it, unless the collector handed the GIL over in the
  // middle: in a gc.callbacks function or a finalizer), inside the hold_gil slice that began hold_lead before
  // the part did; hold_lead -1 when the collector was not seen holding. The trace nests it there.
  int64_t hold_lead = -1;
  int64_t held_dur = 0;
  int64_t held_from = 0;
  bool operator==(const GcCollection&) const = default;
};

// `n` collections of generation `generation` that began and ended inside [ts, ts + window] (between two
// polls), with what they freed together.
struct GcUntimed {
  int64_t ts = 0;
  int64_t window = 0;
  int32_t generation = 0;
  uint64_t n = 0;
  uint64_t collected = 0;
  uint64_t uncollectable = 0;
  bool operator==(const GcUntimed&) const = default;
};

// The three generation counts as gc.get_count() prints them, read at ts (emitted on change, at most every
// kGcCountsPeriodNs, and at every collection's start and end).
struct GcCounts {
  int64_t ts = 0;
  int64_t count[3] = {0, 0, 0};
  bool operator==(const GcCounts&) const = default;
};
inline constexpr int64_t kGcCountsPeriodNs = 10'000'000;

// gc.isenabled() and gc.get_threshold() from ts on (emitted first, then on change).
struct GcSettings {
  int64_t ts = 0;
  bool enabled = true;
  int64_t threshold[3] = {0, 0, 0};
  bool operator==(const GcSettings&) const = default;
};

}  // namespace gilspy::raw
