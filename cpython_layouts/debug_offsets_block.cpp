#include "cpython_layouts/debug_offsets_block.hpp"

#include <cstring>
#include <string>

#include "base/byte_fields.hpp"
#include "base/error.hpp"

namespace gilspy::layouts {
namespace {

uint64_t word(std::span<const uint8_t> b, size_t at) {
  return load<uint64_t>(b, at);
}  // 0 past the end

[[noreturn]] void implausible(const BlockPositions& at, const std::string& what) {
  throw Error(ErrorKind::kLayoutMismatch,
              std::string("the interpreter's _Py_DebugOffsets (read as CPython ") + at.label +
                  "'s) are implausible: " + what + "; refusing to guess");
}

// An offset published for a field of a structure must lie inside that structure's published size.
void expect_inside(const BlockPositions& at, const char* field, uint64_t offset, const char* owner,
                   uint64_t owner_size) {
  if (offset >= owner_size) {
    implausible(at, std::string(field) + " is at +" + std::to_string(offset) + " but " + owner + " is only " +
                        std::to_string(owner_size) + " bytes");
  }
}

// The fields gilspy reads, as the block gives them (checked by the two functions below).
DebugOffsets fields_of_block(std::span<const uint8_t> b, const BlockPositions& at) {
  DebugOffsets d;
  d.version = word(b, 8);
  const uint64_t free_threaded = word(b, at.free_threaded);
  if (free_threaded > 1) implausible(at, "free_threaded is " + std::to_string(free_threaded));
  d.free_threaded = free_threaded == 1;

  d.runtime_interpreters_head = word(b, at.runtime_interpreters_head);
  d.interp_id = word(b, at.interp_id);
  d.interp_next = word(b, at.interp_next);
  d.interp_threads_head = word(b, at.interp_threads_head);
  d.interp_gc = word(b, at.interp_gc);
  d.interp_ceval_gil = word(b, at.interp_ceval_gil);
  d.interp_gil_runtime_state = word(b, at.interp_gil_runtime_state);
  d.gil_enabled = word(b, at.interp_gil_enabled);
  d.gil_locked = word(b, at.interp_gil_locked);
  d.gil_holder = word(b, at.interp_gil_holder);
  d.tstate_prev = word(b, at.tstate_prev);
  d.tstate_next = word(b, at.tstate_next);
  d.tstate_interp = word(b, at.tstate_interp);
  d.tstate_thread_id = word(b, at.tstate_thread_id);
  d.tstate_native_thread_id = word(b, at.tstate_native_thread_id);
  if (at.tstate_holds_gil) d.tstate_holds_gil = word(b, *at.tstate_holds_gil);
  d.gc_collecting = word(b, at.gc_collecting);
  d.gc_stats_inline = at.gc_stats_inline;
  d.gc_size = word(b, at.gc_size);
  if (at.gc_generation_stats) d.gc_generation_stats = word(b, *at.gc_generation_stats);
  if (at.gc_generation_stats_size) d.gc_generation_stats_size = word(b, *at.gc_generation_stats_size);
  return d;
}

void check_runtime_and_interp_fields(std::span<const uint8_t> b, const BlockPositions& at,
                                     const DebugOffsets& d) {
  const uint64_t runtime_size = word(b, at.runtime_size);
  const uint64_t interp_size = word(b, at.interp_size);
  expect_inside(at, "runtime_state.interpreters_head", d.runtime_interpreters_head, "_PyRuntimeState",
                runtime_size);
  expect_inside(at, "interpreter_state.id", d.interp_id, "PyInterpreterState", interp_size);
  expect_inside(at, "interpreter_state.next", d.interp_next, "PyInterpreterState", interp_size);
  expect_inside(at, "interpreter_state.threads_head", d.interp_threads_head, "PyInterpreterState",
                interp_size);
  expect_inside(at, "interpreter_state.gc", d.interp_gc, "PyInterpreterState", interp_size);
  expect_inside(at, "interpreter_state.ceval_gil", d.interp_ceval_gil, "PyInterpreterState", interp_size);
  expect_inside(at, "interpreter_state.gil_runtime_state", d.interp_gil_runtime_state, "PyInterpreterState",
                interp_size);
  expect_inside(at, "interpreter_state.gil_runtime_state_locked", d.gil_locked, "PyInterpreterState",
                interp_size);
  expect_inside(at, "interpreter_state.gil_runtime_state_holder", d.gil_holder, "PyInterpreterState",
                interp_size);
  if (d.gil_locked < d.interp_gil_runtime_state || d.gil_holder < d.interp_gil_runtime_state) {
    implausible(at, "the GIL's locked/holder (+" + std::to_string(d.gil_locked) + "/+" +
                        std::to_string(d.gil_holder) + ") lie before the GIL itself (+" +
                        std::to_string(d.interp_gil_runtime_state) + ")");
  }
}

void check_tstate_and_gc_fields(std::span<const uint8_t> b, const BlockPositions& at, const DebugOffsets& d) {
  const uint64_t tstate_size = word(b, at.tstate_size);
  const uint64_t gc_size = word(b, at.gc_size);
  expect_inside(at, "thread_state.prev", d.tstate_prev, "PyThreadState", tstate_size);
  expect_inside(at, "thread_state.next", d.tstate_next, "PyThreadState", tstate_size);
  expect_inside(at, "thread_state.interp", d.tstate_interp, "PyThreadState", tstate_size);
  expect_inside(at, "thread_state.thread_id", d.tstate_thread_id, "PyThreadState", tstate_size);
  expect_inside(at, "thread_state.native_thread_id", d.tstate_native_thread_id, "PyThreadState", tstate_size);
  if (d.tstate_holds_gil) {
    expect_inside(at, "thread_state.holds_gil", *d.tstate_holds_gil, "PyThreadState", tstate_size);
  }
  expect_inside(at, "gc.collecting", *d.gc_collecting, "struct _gc_runtime_state", gc_size);
  if (d.gc_generation_stats) {
    expect_inside(at, "gc.generation_stats", *d.gc_generation_stats, "struct _gc_runtime_state", gc_size);
  }
}

}  // namespace

DebugOffsets decode_block(std::span<const uint8_t> b, const BlockPositions& at) {
  if (b.size() < at.block_size) {
    throw Error(ErrorKind::kLayoutMismatch, std::string("_Py_DebugOffsets of CPython ") + at.label +
                                                " need " + std::to_string(at.block_size) + " bytes, only " +
                                                std::to_string(b.size()) + " were read");
  }
  const DebugOffsets d = fields_of_block(b, at);
  // Every offset gilspy will follow must fall inside the structure the block says it belongs to. Real
  // interpreters satisfy this by construction (offsetof < sizeof); bytes that are not this version's block,
  // or a block whose shape changed, almost never do.
  check_runtime_and_interp_fields(b, at, d);
  check_tstate_and_gc_fields(b, at, d);
  return d;
}

}  // namespace gilspy::layouts
