// The GC state of CPython 3.13-3.15 (x86-64, default builds).
//
// 3.13 (pyenv 3.13.0 DWARF, tests/unit/test_layouts_dwarf.cpp): struct _gc_runtime_state as in 3.8-3.12
// (trash_delete_later, trash_delete_nesting, enabled +12, debug, generations[3] +24, generation0 +96,
// permanent_generation +104, generation_stats[3] +128, collecting +200; 240 bytes). Its block publishes
// gc.size and gc.collecting, which must agree.
//
// 3.14 (Include/internal/pycore_interp_structs.h of the 3.14 line): generation0 is gone, so
// generation_stats[3] sits at +120 and collecting at +192. 3.14.0-3.14.4 collect incrementally: the three
// generation slots are `young` and `old[2]`, followed by garbage, callbacks, heap_size, work_to_do,
// visited_space (+232) and phase (240 bytes in all); gc.get_count() shows young.count,
// old[visited_space].count, old[visited_space ^ 1].count. 3.14.5 went back to generations[3] at the same
// offsets and kept placeholders where work_to_do, visited_space and phase were, then appended
// long_lived_total, long_lived_pending and generation0 (264 bytes). The block has the same shape for both;
// only Py_Version tells them apart, and the published gc.size confirms it (Debian unstable's 3.14.10: 264,
// counts and stats read live agree with gc.get_count() / gc.get_stats()).
//
// 3.15 (3.15.2, Debian unstable, read live and compared with gc.get_count() / gc.get_stats(); the struct as
// in CPython's Include/internal/pycore_interp_structs.h): trash_delete_* left the struct, so enabled is at
// +0, generations[3] at +8 (threshold +16, count +20 each, stride 24), permanent_generation +80, then
// `struct gc_stats *generation_stats` +104 (published: gc.generation_stats) and collecting +112
// (published), 176 bytes. struct gc_stats holds one ring buffer per generation: young { items[11]; int8_t
// index; } (712 bytes), then old[2] { items[3]; int8_t index; } (200 bytes each), 1112 bytes; the block
// publishes 0x460 for it, so at least that much is there. Each entry (struct gc_generation_stats, 64 bytes:
// ts_start, ts_stop, collections +16, collected +24, uncollectable +32, candidates, duration, heap_size) is
// written at the next index as a copy of the previous one plus the collection's figures: the entry at
// `index` carries the cumulative counters, as gc.get_stats() shows them.
#include "cpython_layouts/gc_layouts.hpp"

namespace gilspy::layouts {
namespace {

constexpr Off kGcSize3_13 = 240;
constexpr Off kGcSize3_14Incremental = 240;
constexpr Off kGcSize3_14Generational = 264;

GcLayout unknown(GcLayout gc, const char* why) {
  gc.known = false;
  gc.why_unknown = why;
  return gc;
}

GcLayout layout_3_14(const elf::PyVersion& version, const DebugOffsets& d) {
  GcLayout gc;
  gc.home = GcHome::kInterp;
  gc.offset = static_cast<Off>(d.interp_gc);
  gc.enabled = 12;
  gc.generations = 24;
  gc.stats = 120;
  gc.collecting = 192;
  if (version.micro < 0)
    return unknown(gc, "the exact 3.14 release is not known (incremental or generational GC)");
  gc.incremental = version.micro <= 4;
  if (gc.incremental) gc.visited_space = 232;
  if (!d.gc_collecting || *d.gc_collecting != gc.collecting.off) {
    return unknown(gc, "its _Py_DebugOffsets place gc.collecting elsewhere than 3.14's +192");
  }
  const Off expected = gc.incremental ? kGcSize3_14Incremental : kGcSize3_14Generational;
  if (!d.gc_size || *d.gc_size != expected) {
    return unknown(gc, gc.incremental
                           ? "its GC state is not the size of 3.14.0-3.14.4's incremental collector's"
                           : "its GC state is not the size of 3.14.5+'s generational collector's");
  }
  return gc;
}

GcLayout layout_3_15(const DebugOffsets& d) {
  GcLayout gc;
  gc.home = GcHome::kInterp;
  gc.offset = static_cast<Off>(d.interp_gc);
  gc.enabled = 0;
  gc.generations = 8;
  gc.collecting = 112;
  gc.stats = 104;  // the pointer to struct gc_stats
  gc.stats_home = GcStatsHome::kRing;
  gc.stats_stride = 64;
  gc.stats_collections = 16;
  gc.stats_collected = 24;
  gc.stats_uncollectable = 32;
  gc.ring_size = 1112;
  gc.ring_buffer[0] = 0;
  gc.ring_items[0] = 11;
  gc.ring_index[0] = 704;
  for (int g = 1; g < 3; ++g) {
    gc.ring_buffer[g] = 712 + static_cast<Off>(g - 1) * 200;
    gc.ring_items[g] = 3;
    gc.ring_index[g] = gc.ring_buffer[g] + 192;
  }
  if (!d.gc_collecting || *d.gc_collecting != gc.collecting.off) {
    return unknown(gc, "its _Py_DebugOffsets place gc.collecting elsewhere than 3.15's +112");
  }
  if (!d.gc_generation_stats || *d.gc_generation_stats != gc.stats) {
    return unknown(gc, "its _Py_DebugOffsets place gc.generation_stats elsewhere than 3.15's +104");
  }
  if (!d.gc_generation_stats_size || *d.gc_generation_stats_size < gc.ring_size) {
    return unknown(gc, "its GC statistics are smaller than 3.15's ring buffers");
  }
  if (!d.gc_size || *d.gc_size < gc.read_size()) return unknown(gc, "its GC state is smaller than 3.15's");
  return gc;
}

}  // namespace

GcLayout checked_gc_3_13(GcLayout gc, const DebugOffsets& d) {
  if (!d.gc_collecting || *d.gc_collecting != gc.collecting.off) {
    return unknown(gc, "its _Py_DebugOffsets place gc.collecting elsewhere than the 3.13 table");
  }
  if (!d.gc_size || *d.gc_size != kGcSize3_13)
    return unknown(gc, "its GC state is not the 3.13 table's size");
  return gc;
}

GcLayout gc_layout_from_debug_offsets(const elf::PyVersion& version, const DebugOffsets& d) {
  GcLayout gc;
  gc.home = GcHome::kInterp;
  gc.offset = static_cast<Off>(d.interp_gc);
  if (d.free_threaded) return unknown(gc, "free-threaded builds keep a different GC state");
  if (d.read_as_minor != 0)
    return unknown(gc, "its GC state is not described for a version newer than gilspy knows");
  if (version.major == 3 && version.minor == 14) return layout_3_14(version, d);
  if (version.major == 3 && version.minor == 15) return layout_3_15(d);
  return unknown(gc, "its GC state is not described");
}

}  // namespace gilspy::layouts
