#include "cpython_layouts/debug_offsets.hpp"

#include <cstring>

#include "base/byte_fields.hpp"
#include "base/error.hpp"
#include "cpython_layouts/debug_offsets_block.hpp"
#include "cpython_layouts/gc_layouts.hpp"

namespace gilspy::layouts {
namespace {

uint64_t u64_at(std::span<const uint8_t> b, size_t off) {
  if (!fits(b, off, 8)) throw Error(ErrorKind::kLayoutMismatch, "_Py_DebugOffsets is shorter than expected");
  return load<uint64_t>(b, off);
}

// 3.13's struct _Py_DebugOffsets (Include/internal/pycore_runtime.h, 3.13.0): every field a uint64_t.
DebugOffsets decode_3_13(std::span<const uint8_t> b) {
  DebugOffsets d;
  d.version = u64_at(b, 8);
  d.free_threaded = u64_at(b, 16) != 0;
  d.runtime_interpreters_head = u64_at(b, 40);
  d.interp_id = u64_at(b, 56);
  d.interp_next = u64_at(b, 64);
  d.interp_threads_head = u64_at(b, 72);
  d.interp_gc = u64_at(b, 80);
  d.interp_ceval_gil = u64_at(b, 112);
  d.interp_gil_runtime_state = u64_at(b, 120);
  d.gil_enabled = u64_at(b, 128);
  d.gil_locked = u64_at(b, 136);
  d.gil_holder = u64_at(b, 144);
  d.tstate_prev = u64_at(b, 160);
  d.tstate_next = u64_at(b, 168);
  d.tstate_interp = u64_at(b, 176);
  d.tstate_thread_id = u64_at(b, 192);
  d.tstate_native_thread_id = u64_at(b, 200);
  d.gc_size = u64_at(b, 568);        // gc.size (checked in pyenv's 3.13.0: 240)
  d.gc_collecting = u64_at(b, 576);  // gc.collecting (200)
  return d;
}

void expect_equal(const char* what, uint64_t table, uint64_t debug) {
  if (table != debug) {
    throw Error(ErrorKind::kLayoutMismatch,
                std::string("the 3.13 layout table disagrees with the interpreter's ") +
                    "_Py_DebugOffsets on " + what + " (table " + std::to_string(table) + ", interpreter " +
                    std::to_string(debug) + "); refusing to guess");
  }
}
template <class T>
void expect_equal(const char* what, Field<T> table, uint64_t debug) {
  expect_equal(what, table.off, debug);
}

}  // namespace

std::optional<DebugOffsets> decode_debug_offsets(std::span<const uint8_t> b) {
  if (b.size() < 24 || std::memcmp(b.data(), kDebugCookie, sizeof kDebugCookie) != 0) return std::nullopt;
  const uint64_t version = u64_at(b, 8);
  const int major = static_cast<int>((version >> 24) & 0xFF),
            minor = static_cast<int>((version >> 16) & 0xFF);
  if (major == 3 && minor == 13) return decode_3_13(b);
  if (major == 3 && minor == 14) return decode_block(b, kBlock3_14);
  if (major == 3 && minor == 15) return decode_block(b, kBlock3_15);
  const std::string text = elf::version_from_hex(static_cast<uint32_t>(version)).text();
  if (major == 3 && minor > kNewestMinor) {
    // CPython changes this block's shape between minor versions, but not always: a newer version whose block
    // passes every check of the newest decoder is read with it (and said to be), one that does not is
    // refused.
    try {
      DebugOffsets d = decode_block(b, kBlock3_15);
      d.read_as_minor = kNewestMinor;
      return d;
    } catch (const Error& e) {
      throw Error(ErrorKind::kUnsupportedVersion,
                  "Python " + text + " is newer than gilspy knows (it supports CPython " + supported_range() +
                      ") and its _Py_DebugOffsets do not read as 3." + std::to_string(kNewestMinor) +
                      "'s: " + e.what());
    }
  }
  throw Error(ErrorKind::kUnsupportedVersion,
              "Python " + text +
                  " publishes _Py_DebugOffsets in a form gilspy does not know "
                  "(it supports CPython " +
                  supported_range() + ")");
}

size_t runtime_head_size(const elf::PyVersion& version) {
  return version.at_least(3, 13) ? kDebugOffsetsReadSize : 0;
}

Layout resolve_layout(const elf::PyVersion& version, std::span<const uint8_t> runtime_head) {
  if (version.major == 3 && version.minor < 13) return layout_for(version);
  const auto debug = decode_debug_offsets(runtime_head);
  if (!debug) {
    throw Error(ErrorKind::kLayoutMismatch,
                "Python " + version.text() +
                    " should start _PyRuntime with _Py_DebugOffsets, but the cookie "
                    "\"xdebugpy\" is not there");
  }
  const auto dv = elf::version_from_hex(static_cast<uint32_t>(debug->version));
  if (dv.major != version.major || dv.minor != version.minor) {
    throw Error(ErrorKind::kLayoutMismatch,
                "the binary says Python " + version.text() + " but its _Py_DebugOffsets say " + dv.text());
  }
  Layout l;
  if (version.minor == 13 && !debug->free_threaded) {
    l = layout_for(version);
    expect_equal("runtime.interpreters_head", l.runtime.interpreters_head, debug->runtime_interpreters_head);
    expect_equal("interp.threads_head", l.interp.threads_head, debug->interp_threads_head);
    expect_equal("interp.next", l.interp.next, debug->interp_next);
    expect_equal("interp.id", l.interp.id, debug->interp_id);
    expect_equal("interp.gc", l.gc.offset, debug->interp_gc);
    expect_equal("interp.ceval.gil", l.gil_offset, debug->interp_ceval_gil);
    expect_equal("tstate.prev", l.tstate.prev, debug->tstate_prev);
    expect_equal("tstate.next", l.tstate.next, debug->tstate_next);
    expect_equal("tstate.interp", l.tstate.interp, debug->tstate_interp);
    expect_equal("tstate.thread_id", l.tstate.thread_id, debug->tstate_thread_id);
    expect_equal("tstate.native_thread_id", *l.tstate.native_thread_id, debug->tstate_native_thread_id);
    expect_equal("gil.locked", l.gil.locked, debug->gil_locked - debug->interp_gil_runtime_state);
    expect_equal("gil.last_holder", l.gil.last_holder, debug->gil_holder - debug->interp_gil_runtime_state);
    l.gc = checked_gc_3_13(l.gc, *debug);  // a GC disagreement leaves the GC unread, the GIL is still read
    return l;
  }
  Layout from_debug = layout_from_debug_offsets(version, *debug);
  from_debug.read_as_minor = debug->read_as_minor;
  return from_debug;
}

std::string newer_than_known_note(const elf::PyVersion& version, const Layout& layout) {
  if (layout.read_as_minor == 0) return {};
  return "Python " + version.text() + " is newer than gilspy knows (newest 3." +
         std::to_string(kNewestMinor) + "); its _Py_DebugOffsets read and validate as 3." +
         std::to_string(layout.read_as_minor) + "'s";
}

Layout layout_from_debug_offsets(const elf::PyVersion& version, const DebugOffsets& d) {
  Layout l;
  l.major = version.major;
  l.minor = version.minor;
  l.source = "_Py_DebugOffsets of the running interpreter";
  l.gil_home = GilHome::kInterpPointer;
  l.gil_offset = static_cast<Off>(d.interp_ceval_gil);
  l.runtime.interpreters_head = static_cast<Off>(d.runtime_interpreters_head);
  l.interp = {.next = static_cast<Off>(d.interp_next),
              .id = static_cast<Off>(d.interp_id),
              .threads_head = static_cast<Off>(d.interp_threads_head)};
  l.tstate.prev = static_cast<Off>(d.tstate_prev);
  l.tstate.next = static_cast<Off>(d.tstate_next);
  l.tstate.interp = static_cast<Off>(d.tstate_interp);
  l.tstate.thread_id = static_cast<Off>(d.tstate_thread_id);
  l.tstate.native_thread_id = static_cast<Off>(d.tstate_native_thread_id);
  if (d.tstate_holds_gil) {
    l.tstate.holds_gil = static_cast<Off>(*d.tstate_holds_gil);
    l.tstate.holds_gil_bit = -1;
  }
  // The GIL struct is not described field by field; its shape is the same in every version, and the offsets
  // that are published (locked, last_holder, relative to the interpreter's own _gil) must agree with it.
  const uint64_t shift = d.free_threaded ? 8 : 0;  // free-threaded: `int enabled` first, the rest moves by 8
  if (d.gil_locked - d.interp_gil_runtime_state != l.gil.locked.off + shift ||
      d.gil_holder - d.interp_gil_runtime_state != l.gil.last_holder.off + shift) {
    throw Error(ErrorKind::kLayoutMismatch,
                "Python " + version.text() + " describes a GIL struct gilspy does not know (locked at +" +
                    std::to_string(d.gil_locked - d.interp_gil_runtime_state) + ")");
  }
  if (d.free_threaded) {
    l.free_threaded = true;
    l.gil.enabled = 0;
    for (uint32_t* f :
         {&l.gil.interval.off, &l.gil.last_holder.off, &l.gil.locked.off, &l.gil.switch_number.off,
          &l.gil.cond, &l.gil.mutex, &l.gil.switch_cond, &l.gil.switch_mutex, &l.gil.size}) {
      *f += 8;
    }
  }
  l.gc = gc_layout_from_debug_offsets(version, d);  // gc_layouts.cpp
  return l;
}

}  // namespace gilspy::layouts
