#pragma once
// Decoding one minor version's _Py_DebugOffsets block from a table of where its fields sit (the block's own
// layout changes between minor versions; what a field means does not). Internal to cpython_layouts/.
#include <cstddef>
#include <optional>
#include <span>

#include "cpython_layouts/debug_offsets.hpp"

namespace gilspy::layouts {

// Byte positions, inside the block, of the fields gilspy reads. Every `*_size` is the size the block
// publishes for the structure that the fields after it describe; every offset is checked against it.
struct BlockPositions {
  const char* label;  // "3.14": the version whose block this is, for messages
  size_t free_threaded;
  size_t runtime_size, runtime_interpreters_head;
  size_t interp_size, interp_id, interp_next, interp_threads_head, interp_gc, interp_ceval_gil,
      interp_gil_runtime_state, interp_gil_enabled, interp_gil_locked, interp_gil_holder;
  size_t tstate_size, tstate_prev, tstate_next, tstate_interp, tstate_thread_id, tstate_native_thread_id;
  std::optional<size_t> tstate_holds_gil;
  size_t gc_size, gc_collecting;
  bool gc_stats_inline;  // generation_stats[3] right before `collecting` (3.13, 3.14); 3.15 keeps a pointer
  size_t block_size;     // how much of the block must have been read (to the end of its gc section)
  // 3.15+: gc.generation_stats_size and gc.generation_stats (the pointer's offset in the GC state).
  std::optional<size_t> gc_generation_stats_size, gc_generation_stats;
};

// Throws Error(kLayoutMismatch) when the bytes are too short or any published offset falls outside the
// structure it belongs to (the block is not this version's shape).
DebugOffsets decode_block(std::span<const uint8_t> block, const BlockPositions& at);

extern const BlockPositions kBlock3_14;  // debug_offsets_3_14.cpp
extern const BlockPositions kBlock3_15;  // debug_offsets_3_15.cpp

}  // namespace gilspy::layouts
