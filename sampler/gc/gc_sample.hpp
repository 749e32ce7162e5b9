#pragma once
// One reading of the interpreter's GC state (struct _gc_runtime_state, and for 3.15+ the struct gc_stats its
// generation_stats points to), decoded with the layout (cpython_layouts/layout.hpp GcLayout).
#include <cstdint>

#include "base/byte_fields.hpp"
#include "cpython_layouts/layout.hpp"

namespace gilspy::sampler {

struct GcSample {
  int32_t enabled = 1;               // gc.isenabled()
  int32_t collecting = 0;            // 1 while a collection runs
  int64_t count[3] = {0, 0, 0};      // gc.get_count()
  int64_t threshold[3] = {0, 0, 0};  // gc.get_threshold()
  int64_t collections[3] = {0, 0, 0}, collected[3] = {0, 0, 0}, uncollectable[3] = {0, 0, 0};
  bool stats_ok = true;  // the ring buffers' indexes (3.15+) were in range

  // What a real GC state holds; anything else is a torn read or not a GC state at all.
  bool plausible() const {
    if ((enabled != 0 && enabled != 1) || (collecting != 0 && collecting != 1) || !stats_ok) return false;
    for (int g = 0; g < 3; ++g) {
      if (threshold[g] < 0 || collections[g] < 0 || collected[g] < 0 || uncollectable[g] < 0) return false;
    }
    return true;
  }
};

// `state`: layout.read_size() bytes from the GC state; `ring`: layout.ring_size bytes of struct gc_stats
// (3.15+; empty for inline stats). A field outside what was read makes the sample implausible (stats_ok
// false).
inline GcSample decode_gc(RemoteBytes state, RemoteBytes ring, const layouts::GcLayout& l) {
  FieldReader st(state), rg(ring);
  GcSample s;
  s.enabled = st.get(l.enabled);
  s.collecting = st.get(l.collecting);
  // gc.get_count() order: the incremental collector (3.14.0-3.14.4) shows young, then the old space being
  // visited, then the other one.
  int slot_of[3] = {0, 1, 2};
  if (l.incremental) {
    const int visited = st.get(l.visited_space) & 1;
    slot_of[1] = 1 + visited;
    slot_of[2] = 1 + (visited ^ 1);
  }
  for (int g = 0; g < 3; ++g) {
    const size_t gen = l.generations + static_cast<size_t>(g) * l.generation_stride;
    const size_t counted_gen = l.generations + static_cast<size_t>(slot_of[g]) * l.generation_stride;
    s.threshold[g] = st.get(l.generation_threshold, gen);
    s.count[g] = st.get(l.generation_count, counted_gen);
    FieldReader* from = &st;
    size_t entry = l.stats + static_cast<size_t>(g) * l.stats_stride;
    if (l.stats_home == layouts::GcStatsHome::kRing) {
      const int index = rg.get(l.ring_index[g]);
      if (index < 0 || index >= l.ring_items[g]) {
        s.stats_ok = false;
        continue;
      }
      from = &rg;
      entry = l.ring_buffer[g] + static_cast<size_t>(index) * l.stats_stride;
    }
    s.collections[g] = from->get(l.stats_collections, entry);
    s.collected[g] = from->get(l.stats_collected, entry);
    s.uncollectable[g] = from->get(l.stats_uncollectable, entry);
  }
  if (!st.complete() || !rg.complete()) s.stats_ok = false;
  return s;
}

}  // namespace gilspy::sampler
