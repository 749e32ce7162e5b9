#pragma once
// CPython 3.13+ starts _PyRuntime with _Py_DebugOffsets: a cookie, the exact version, the build kind and the
// offsets of the fields debuggers need. gilspy decodes it (the decoder is picked by its `version`), uses it
// to cross-check the 3.13 table, and builds the 3.14 layout from it.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "cpython_layouts/layout.hpp"

namespace gilspy::layouts {

// How many bytes from the start of _PyRuntime to read for decode_debug_offsets().
inline constexpr size_t kDebugOffsetsReadSize = 1024;
inline constexpr char kDebugCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

struct DebugOffsets {
  uint64_t version = 0;  // PY_VERSION_HEX
  bool free_threaded = false;
  uint64_t runtime_interpreters_head = 0;
  uint64_t interp_id = 0, interp_next = 0, interp_threads_head = 0, interp_gc = 0;
  uint64_t interp_ceval_gil = 0, interp_gil_runtime_state = 0;
  uint64_t gil_enabled = 0, gil_locked = 0, gil_holder = 0;  // from the interpreter (its own _gil)
  uint64_t tstate_prev = 0, tstate_next = 0, tstate_interp = 0, tstate_thread_id = 0,
           tstate_native_thread_id = 0;
  std::optional<uint64_t> tstate_holds_gil;  // 3.14
  std::optional<uint64_t> gc_collecting;     // 3.14
  bool gc_stats_inline = true;      // generation_stats[3] right before `collecting` (3.13, 3.14; not 3.15)
  std::optional<uint64_t> gc_size;  // sizeof(struct _gc_runtime_state) (3.13+)
  std::optional<uint64_t> gc_generation_stats;       // 3.15: offset of the pointer to struct gc_stats
  std::optional<uint64_t> gc_generation_stats_size;  // 3.15: the size published for what it points to
  // Set when the version is newer than every decoder gilspy has and the block decoded and validated with the
  // newest one: the minor version whose decoder read it. 0 otherwise.
  int read_as_minor = 0;
};

// How many bytes of _PyRuntime resolve_layout() needs for this version: kDebugOffsetsReadSize where the
// runtime starts with _Py_DebugOffsets (3.13+), 0 before.
size_t runtime_head_size(const elf::PyVersion& version);

// nullopt when the bytes do not start with the cookie (3.12 and older, or not the runtime at all).
// A version newer than the newest known is read with the newest decoder (read_as_minor says so) when its
// block validates with it; otherwise, and for an unknown older shape, throws Error(kUnsupportedVersion)
// saying why.
std::optional<DebugOffsets> decode_debug_offsets(std::span<const uint8_t> runtime_head);

// The layout to use for a process: the table for 3.8-3.12; for 3.13 the table after checking it against the
// debug offsets (a disagreement throws Error(kLayoutMismatch)); for 3.14+ built from the debug offsets (a
// version newer than known: Layout::read_as_minor says so).
// `runtime_head` is the first kDebugOffsetsReadSize bytes of _PyRuntime (may be shorter for < 3.13).
Layout resolve_layout(const elf::PyVersion& version, std::span<const uint8_t> runtime_head);

// For a layout read with a newer version's debug offsets (Layout::read_as_minor): one line naming the version
// and how it was read ("Python 3.16.1 is newer than gilspy knows (newest 3.15); ..."); empty otherwise.
std::string newer_than_known_note(const elf::PyVersion& version, const Layout& layout);

// A layout built from the debug offsets alone (3.14+, and free-threaded 3.13).
Layout layout_from_debug_offsets(const elf::PyVersion& version, const DebugOffsets& debug);

}  // namespace gilspy::layouts
