#pragma once
// Where the garbage collector keeps its state in the versions read through _Py_DebugOffsets (3.13's
// cross-check, 3.14, 3.15), and what the block must agree with. Internal to cpython_layouts/: the rest of
// gilspy sees only Layout::gc. 3.8-3.12 use GcLayout's defaults (tables.cpp), checked against DWARF by the
// unit tests.
#include "cpython_layouts/debug_offsets.hpp"
#include "cpython_layouts/layout.hpp"

namespace gilspy::layouts {

// 3.13's table against the block: `gc` is the table's, returned as is when the block agrees, else marked
// unknown (why_unknown says what disagreed): the GIL is still read, the GC is not guessed.
GcLayout checked_gc_3_13(GcLayout gc, const DebugOffsets& d);

// 3.14+ from the block and the tables below; known == false (with why_unknown) where the block or the
// version does not fit what gilspy knows (free-threaded builds, a version newer than known, a size that
// contradicts Py_Version's collector).
GcLayout gc_layout_from_debug_offsets(const elf::PyVersion& version, const DebugOffsets& d);

}  // namespace gilspy::layouts
