// Where CPython 3.15's _Py_DebugOffsets keeps its fields, the block that starts _PyRuntime.
//
// Source: the block of Debian unstable's python3.15 3.15.2 (read from its .PyRuntime section and checked in a
// live process), laid against design.md §7's description of 3.15's struct (thread_state gains base_frame,
// last_profiled_frame, ..., holds_gil, gil_requested; new err_stackitem and heap_type_object sections; gc
// gains frame and generation_stats; interpreter_frame moves from 0xf8 to 0x138; 0x378 bytes in all, 3.14:
// 0x2f8). The runtime and interpreter sections keep 3.14's shape. Every field is a uint64_t; every section
// starts with the size of the structure it describes, except err_stackitem, llist_node and debugger_support.
//
//   pos    field                                        3.15.2 value   gilspy uses
//   -----  -------------------------------------------  -------------  -----------
//   0x00   cookie "xdebugpy"                                           dispatch
//   0x08   version                                      0x030f02f0     yes
//   0x10   free_threaded                                0              yes
//          runtime_state
//   0x18     size                                       0x549c8        check
//   0x20     finalizing                                 0x390
//   0x28     interpreters_head                          0x3a8          yes
//          interpreter_state
//   0x30     size                                       0x373c0        check
//   0x38     id / 0x40 next / 0x48 threads_head         0x1c68 ...     yes
//   0x50     threads_main                               0x1cb8
//   0x58     gc                                         0x1ce8         yes (address only)
//   0x60     imports_modules / 0x68 sysdict / 0x70 builtins
//   0x78     ceval_gil (the pointer)                    0x10           yes
//   0x80     gil_runtime_state (the interp's own _gil)  0x1e38         yes
//   0x88     gil_runtime_state_enabled                  0              decoded
//   0x90     gil_runtime_state_locked                   0x1e48 (+16)   yes
//   0x98     gil_runtime_state_holder                   0x1e40 (+8)    yes
//   0xa0     code_object_generation / 0xa8 tlbc_generation
//          thread_state
//   0xb0     size                                       0x378          check
//   0xb8     prev / 0xc0 next / 0xc8 interp             0 / 8 / 0x10   yes
//   0xd0     current_frame / 0xd8 base_frame / 0xe0 last_profiled_frame / 0xe8 (last_profiled_frame_seq)
//   0xf0     thread_id                                  0xb0           yes
//   0xf8     native_thread_id                           0xb8           yes
//   0x100    datastack_chunk / 0x108 status (+0x20)
//   0x110    holds_gil                                  0x24           yes (an int, as 3.14's +36)
//   0x118    gil_requested                              0x28
//   0x120    current_exception / 0x128 exc_state
//   0x130  err_stackitem: exc_value (no size)
//   0x138  interpreter_frame (size 0x58) ... unicode_object, as 3.14's sections shifted by 0x40, plus
//          heap_type_object (0x200..0x218) and a fifth unicode_object word (0x2e8)
//          gc (struct _gc_runtime_state)
//   0x2f0    size                                       0xb0           check
//   0x2f8    collecting                                 0x70           decoded
//   0x300    frame / 0x308 generation_stats_size (0x460) / 0x310 generation_stats (a pointer, +0x68)
//   0x318  gen_object, llist_node, debugger_support
//   0x378  end of the block
//
// 3.15 keeps the generation statistics behind a pointer, not in front of `collecting`: gc_stats_inline is
// false, and the GC layout (gc_layouts.cpp) follows gc.generation_stats to struct gc_stats, ring buffers
// whose entry shape the block does not publish (a table there, checked live against gc.get_stats()).
// The thread-state names between current_frame and thread_id are not used; the values of those gilspy uses
// were checked live (thread_id / native_thread_id agree with design.md §7, holds_gil is 1 only in the
// holder).
#include "cpython_layouts/debug_offsets_block.hpp"

namespace gilspy::layouts {

const BlockPositions kBlock3_15 = {
    .label = "3.15",
    .free_threaded = 0x10,
    .runtime_size = 0x18,
    .runtime_interpreters_head = 0x28,
    .interp_size = 0x30,
    .interp_id = 0x38,
    .interp_next = 0x40,
    .interp_threads_head = 0x48,
    .interp_gc = 0x58,
    .interp_ceval_gil = 0x78,
    .interp_gil_runtime_state = 0x80,
    .interp_gil_enabled = 0x88,
    .interp_gil_locked = 0x90,
    .interp_gil_holder = 0x98,
    .tstate_size = 0xb0,
    .tstate_prev = 0xb8,
    .tstate_next = 0xc0,
    .tstate_interp = 0xc8,
    .tstate_thread_id = 0xf0,
    .tstate_native_thread_id = 0xf8,
    .tstate_holds_gil = 0x110,
    .gc_size = 0x2f0,
    .gc_collecting = 0x2f8,
    .gc_stats_inline = false,
    .block_size = 0x318,                // to the end of the gc section
    .gc_generation_stats_size = 0x308,  // 0x460 in 3.15.2
    .gc_generation_stats = 0x310,       // +0x68 in 3.15.2
};

}  // namespace gilspy::layouts
