// Where CPython 3.14's _Py_DebugOffsets keeps its fields, the block that starts _PyRuntime.
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
#include "cpython_layouts/debug_offsets_block.hpp"

namespace gilspy::layouts {

// Positions in the 3.14 block (see the table above).
const BlockPositions kBlock3_14 = {
    .label = "3.14",
    .free_threaded = 16,
    .runtime_size = 24,
    .runtime_interpreters_head = 40,
    .interp_size = 48,
    .interp_id = 56,
    .interp_next = 64,
    .interp_threads_head = 72,
    .interp_gc = 88,
    .interp_ceval_gil = 120,
    .interp_gil_runtime_state = 128,
    .interp_gil_enabled = 136,
    .interp_gil_locked = 144,
    .interp_gil_holder = 152,
    .tstate_size = 176,
    .tstate_prev = 184,
    .tstate_next = 192,
    .tstate_interp = 200,
    .tstate_thread_id = 216,
    .tstate_native_thread_id = 224,
    .tstate_holds_gil = std::nullopt,  // 3.14's block publishes no holds_gil
    .gc_size = 648,
    .gc_collecting = 656,
    .gc_stats_inline = true,
    .block_size = 664,  // what must have been read: everything up to the end of the gc section
    .gc_generation_stats_size = std::nullopt,  // generation_stats[3] are inline in 3.14
    .gc_generation_stats = std::nullopt,
};

}  // namespace gilspy::layouts
