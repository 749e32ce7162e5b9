#pragma once
// CPython's line tables: which source line an instruction belongs to. Three formats, one per era, decoded as
// CPython's own PyCode_Addr2Line does (Objects/codeobject.c of each version; Objects/lnotab_notes.txt for
// 3.8-3.9, Objects/locations.md for 3.11+), from the bytes of a code object's table. Pure functions: the
// sampler copies the table out of the target and asks here.
#include <cstdint>
#include <span>

#include "cpython_layouts/stack_layout.hpp"

namespace gilspy::layouts {

struct LineLookup {
  bool ok = false;  // false: the table is malformed or ends before the address (torn or not a line table)
  int line = -1;    // the source line; -1 where the instruction has none (3.10 -128, 3.11+ "no location")
};

// The line of the instruction at byte offset `addr` from the start of the code (3.8-3.9: f_lasti; 3.10:
// f_lasti * 2; 3.11+: (instruction pointer - first instruction) in bytes). A negative `addr` (a frame that
// has not started) is the first line, as in CPython.
LineLookup line_for_address(LineTableKind kind, std::span<const uint8_t> table, int first_line, int64_t addr);

}  // namespace gilspy::layouts
