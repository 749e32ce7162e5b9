// Decoder for CPython 3.14's _Py_DebugOffsets, the block that starts _PyRuntime.
//
// Source: Include/internal/pycore_debug_offsets.h of the 3.14 line (struct _Py_DebugOffsets and the
// _Py_DebugOffsets_INIT initializer), as mirrored for 3.14 by bloomberg/pystack (cpython/runtime.h,
// namespace Python3_14) and by a 3.14-based CPython fork, which agree field for field. The copy of the header
// itself at CPython main 7a57f7c2 (3.14 development, spring 2025) has the same shape minus the fields marked
// "3.14 late" below, which the 3.14 release carries. CPython keeps the block stable within a minor version
// (only its values change), so one table serves every 3.14.x.
//
// Every field is a uint64_t; every nested struct except llist_node and debugger_support starts with the
// `size` of the structure it describes. Values are offsets inside that structure, except where noted.
//
//   pos  field                                          gilspy uses   since
//   ---  ---------------------------------------------  ------------  -----
//     0  cookie "xdebugpy" (char[8])                    dispatch      3.13
//     8  version (PY_VERSION_HEX)                       yes           3.13
//    16  free_threaded (0/1)                            yes           3.13
//        runtime_state (_PyRuntimeState)
//    24    size                                         check         3.13
//    32    finalizing                                                 3.13
//    40    interpreters_head                            yes           3.13
//        interpreter_state (PyInterpreterState)
//    48    size                                         check         3.13
//    56    id                                           yes           3.13
//    64    next                                         yes           3.13
//    72    threads_head                                 yes           3.13
//    80    threads_main                                               3.14 (new: shifts all below)
//    88    gc                                           yes           3.13
//    96    imports_modules                                            3.13
//   104    sysdict                                                    3.13
//   112    builtins                                                   3.13
//   120    ceval_gil (the pointer)                      yes           3.13
//   128    gil_runtime_state (the interp's own _gil)    yes           3.13
//   136    gil_runtime_state_enabled                    decoded (*)   3.13
//   144    gil_runtime_state_locked                     yes           3.13
//   152    gil_runtime_state_holder                     yes           3.13
//   160    code_object_generation                                     3.14 late
//   168    tlbc_generation (0 unless free-threaded)                   3.14 late
//        thread_state (PyThreadState)
//   176    size                                         check         3.13
//   184    prev                                                       3.13
//   192    next                                         yes           3.13
//   200    interp                                       yes           3.13
//   208    current_frame                                              3.13
//   216    thread_id                                    yes           3.13
//   224    native_thread_id                             yes           3.13
//   232    datastack_chunk                                            3.13
//   240    status                                                     3.13
//          (no holds_gil / gil_requested: those arrive in 3.15's block, not 3.14's)
//   248  interpreter_frame: size previous executable instr_ptr localsplus owner stackpointer(3.14)
//                           tlbc_index(3.14 late)                          8 words, to 312
//   312  code_object: size filename name qualname linetable firstlineno argcount localsplusnames
//                     localspluskinds co_code_adaptive co_tlbc(3.14 late)  11 words, to 400
//   400  pyobject: size ob_type                                            2 words
//   416  type_object: size tp_name tp_repr tp_flags                        4 words
//   448  tuple_object: size ob_item ob_size                                3 words
//   472  list_object: size ob_item ob_size                                 3 words
//   496  set_object: size used table mask (3.14)                           4 words
//   528  dict_object: size ma_keys ma_values                               3 words
//   552  float_object: size ob_fval                                        2 words
//   568  long_object: size lv_tag ob_digit                                 3 words
//   592  bytes_object: size ob_size ob_sval                                3 words
//   616  unicode_object: size state length asciiobject_size               4 words, to 648
//        gc (struct _gc_runtime_state, at interp + interpreter_state.gc)
//   648    size                                         check         3.13
//   656    collecting                                   yes           3.13
//   664  gen_object: size gi_name gi_iframe gi_frame_state (3.14)          4 words
//   696  llist_node: next prev (3.14 late, no size)                        2 words
//   712  debugger_support: eval_breaker remote_debugger_support remote_debugging_enabled
//                          debugger_pending_call debugger_script_path debugger_script_path_size (3.14)
//   760  end of the block
//
// Cross-check: 760 bytes of block, then five ints (to 780, padded to 784), _finalizing (784),
// _finalizing_id (792), interpreters.mutex (800) puts interpreters.head at 808 -- the figure design.md
// gives for 3.14, and what runtime_state.interpreters_head should say.
//
// (*) gil_runtime_state_enabled is offsetof(struct _gil_runtime_state, enabled), i.e. relative to the GIL
// struct, not to the interpreter like locked/holder; it is 0 in default builds (no such field) and 0 in
// free-threaded ones (first field). It is decoded as published and not relied upon.
#include <cstring>
#include <string>

#include "cpython_layouts/debug_offsets.hpp"
#include "base/error.hpp"

namespace gilspy::layouts {
namespace {

// Positions in the 3.14 block (see the table above).
namespace pos {
constexpr size_t kVersion = 8;
constexpr size_t kFreeThreaded = 16;
constexpr size_t kRuntimeSize = 24;
constexpr size_t kRuntimeInterpretersHead = 40;
constexpr size_t kInterpSize = 48;
constexpr size_t kInterpId = 56;
constexpr size_t kInterpNext = 64;
constexpr size_t kInterpThreadsHead = 72;
constexpr size_t kInterpGc = 88;
constexpr size_t kInterpCevalGil = 120;
constexpr size_t kInterpGilRuntimeState = 128;
constexpr size_t kInterpGilEnabled = 136;
constexpr size_t kInterpGilLocked = 144;
constexpr size_t kInterpGilHolder = 152;
constexpr size_t kTstateSize = 176;
constexpr size_t kTstatePrev = 184;
constexpr size_t kTstateNext = 192;
constexpr size_t kTstateInterp = 200;
constexpr size_t kTstateThreadId = 216;
constexpr size_t kTstateNativeThreadId = 224;
constexpr size_t kGcSize = 648;
constexpr size_t kGcCollecting = 656;
// What must have been read: everything up to the end of the gc section.
constexpr size_t kNeeded = 664;
}  // namespace pos

uint64_t word(std::span<const uint8_t> b, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

[[noreturn]] void implausible(const std::string& what) {
  throw Error(ErrorKind::kLayoutMismatch,
              "the interpreter's _Py_DebugOffsets (read as CPython 3.14's) are implausible: " + what +
                  "; refusing to guess");
}

// An offset published for a field of a structure must lie inside that structure's published size.
void expect_inside(const char* field, uint64_t offset, const char* owner, uint64_t owner_size) {
  if (offset >= owner_size) {
    implausible(std::string(field) + " is at +" + std::to_string(offset) + " but " + owner + " is only " +
                std::to_string(owner_size) + " bytes");
  }
}

}  // namespace

DebugOffsets decode_debug_offsets_3_14(std::span<const uint8_t> b) {
  if (b.size() < pos::kNeeded) {
    throw Error(ErrorKind::kLayoutMismatch, "_Py_DebugOffsets of CPython 3.14 need " +
                                                std::to_string(pos::kNeeded) + " bytes, only " +
                                                std::to_string(b.size()) + " were read");
  }
  DebugOffsets d;
  d.version = word(b, pos::kVersion);
  const uint64_t free_threaded = word(b, pos::kFreeThreaded);
  if (free_threaded > 1) implausible("free_threaded is " + std::to_string(free_threaded));
  d.free_threaded = free_threaded == 1;

  d.runtime_interpreters_head = word(b, pos::kRuntimeInterpretersHead);
  d.interp_id = word(b, pos::kInterpId);
  d.interp_next = word(b, pos::kInterpNext);
  d.interp_threads_head = word(b, pos::kInterpThreadsHead);
  d.interp_gc = word(b, pos::kInterpGc);
  d.interp_ceval_gil = word(b, pos::kInterpCevalGil);
  d.interp_gil_runtime_state = word(b, pos::kInterpGilRuntimeState);
  d.gil_enabled = word(b, pos::kInterpGilEnabled);
  d.gil_locked = word(b, pos::kInterpGilLocked);
  d.gil_holder = word(b, pos::kInterpGilHolder);
  d.tstate_prev = word(b, pos::kTstatePrev);
  d.tstate_next = word(b, pos::kTstateNext);
  d.tstate_interp = word(b, pos::kTstateInterp);
  d.tstate_thread_id = word(b, pos::kTstateThreadId);
  d.tstate_native_thread_id = word(b, pos::kTstateNativeThreadId);
  // 3.14's block publishes no holds_gil for the thread state: tstate_holds_gil stays empty.
  d.gc_collecting = word(b, pos::kGcCollecting);

  // Every offset gilspy will follow must fall inside the structure the block says it belongs to. Real
  // interpreters satisfy this by construction (offsetof < sizeof); bytes that are not a 3.14 block, or a
  // block whose shape changed, almost never do.
  const uint64_t runtime_size = word(b, pos::kRuntimeSize);
  const uint64_t interp_size = word(b, pos::kInterpSize);
  const uint64_t tstate_size = word(b, pos::kTstateSize);
  const uint64_t gc_size = word(b, pos::kGcSize);
  expect_inside("runtime_state.interpreters_head", d.runtime_interpreters_head, "_PyRuntimeState",
                runtime_size);
  expect_inside("interpreter_state.id", d.interp_id, "PyInterpreterState", interp_size);
  expect_inside("interpreter_state.next", d.interp_next, "PyInterpreterState", interp_size);
  expect_inside("interpreter_state.threads_head", d.interp_threads_head, "PyInterpreterState", interp_size);
  expect_inside("interpreter_state.gc", d.interp_gc, "PyInterpreterState", interp_size);
  expect_inside("interpreter_state.ceval_gil", d.interp_ceval_gil, "PyInterpreterState", interp_size);
  expect_inside("interpreter_state.gil_runtime_state", d.interp_gil_runtime_state, "PyInterpreterState",
                interp_size);
  expect_inside("interpreter_state.gil_runtime_state_locked", d.gil_locked, "PyInterpreterState",
                interp_size);
  expect_inside("interpreter_state.gil_runtime_state_holder", d.gil_holder, "PyInterpreterState",
                interp_size);
  if (d.gil_locked < d.interp_gil_runtime_state || d.gil_holder < d.interp_gil_runtime_state) {
    implausible("the GIL's locked/holder (+" + std::to_string(d.gil_locked) + "/+" +
                std::to_string(d.gil_holder) + ") lie before the GIL itself (+" +
                std::to_string(d.interp_gil_runtime_state) + ")");
  }
  expect_inside("thread_state.prev", d.tstate_prev, "PyThreadState", tstate_size);
  expect_inside("thread_state.next", d.tstate_next, "PyThreadState", tstate_size);
  expect_inside("thread_state.interp", d.tstate_interp, "PyThreadState", tstate_size);
  expect_inside("thread_state.thread_id", d.tstate_thread_id, "PyThreadState", tstate_size);
  expect_inside("thread_state.native_thread_id", d.tstate_native_thread_id, "PyThreadState", tstate_size);
  expect_inside("gc.collecting", *d.gc_collecting, "struct _gc_runtime_state", gc_size);
  return d;
}

}  // namespace gilspy::layouts
