#pragma once
// A fake 3.12 interpreter for the stack tests: FakePython's objects and frames, the interpreter and its GIL
// at made-up addresses; and a 3.11+ location table for fake code objects.
#include <cstdint>
#include <vector>

#include "cpython_layouts/layout.hpp"
#include "cpython_layouts/stack_layout.hpp"
#include "elfutils/python_binary.hpp"
#include "sampler/target/interpreter.hpp"
#include "support/fake_python.hpp"

namespace gilspy::testing {

// A location table (3.11+) where each of `lines` covers one code unit: "no column" entries with line deltas.
inline std::vector<uint8_t> location_table(int first_line, const std::vector<int>& lines) {
  std::vector<uint8_t> t;
  int at = first_line;
  for (const int line : lines) {
    const int delta = line - at;
    at = line;
    t.push_back(static_cast<uint8_t>(0x80 | (13 << 3) | 0));
    const uint32_t u =
        delta < 0 ? (static_cast<uint32_t>(-delta) << 1) | 1 : static_cast<uint32_t>(delta) << 1;
    t.push_back(static_cast<uint8_t>(u & 63));  // small deltas: one varint byte
  }
  return t;
}

struct FakeSession {
  FakePython py{*layouts::stack_layout_table(12)};
  layouts::Layout layout = layouts::layout_for(*elf::parse_version_text("3.12.1"));
  sampler::Interpreter interp;
  uint64_t gil = 0, interp_addr = 0;
  FakeSession() {
    gil = py.alloc(256);
    interp_addr = py.alloc(4096);
    interp.pid = 1;
    interp.layout = layout;
    interp.stack_layout = py.l;
    interp.gil_addr = gil;
    interp.interp_addr = interp_addr;
  }
  void hold(uint64_t ts, uint64_t switches) {
    py.put(gil, layout.gil.locked, 1);
    py.put(gil, layout.gil.last_holder, ts);
    py.put(gil, layout.gil.switch_number, switches);
  }
};

}  // namespace gilspy::testing
