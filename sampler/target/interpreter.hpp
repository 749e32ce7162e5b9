#pragma once
// Attaching to one interpreter: from the binary's `_PyRuntime` to a validated interpreter, its GIL and its GC
// state, using nothing but the layout and remote reads.
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "cpython_layouts/layout.hpp"
#include "cpython_layouts/stack_layout.hpp"
#include "elfutils/python_binary.hpp"
#include "sampler/remote/memory_reader.hpp"
#include "sampler/target/gil_sample.hpp"

namespace gilspy::sampler {

struct Interpreter {
  pid_t pid = 0;
  elf::PythonBinary binary;
  layouts::Layout layout;
  uint64_t interp_addr = 0;  // the main interpreter (the list's head)
  int64_t interp_id = 0;
  uint64_t gil_addr = 0;
  uint64_t gc_addr = 0;  // 0 when the layout does not describe the GC state
  GilSample first_gil;   // the reading that validated it
  // Frames, code objects, strings and dicts (Python stacks, thread names); known == false when this version's
  // are not known or its _Py_DebugOffsets do not hold together for them (stack_problem says why): the GIL is
  // recorded all the same.
  layouts::StackLayout stack_layout;
  std::string stack_problem;
};

// Throws Error(kNotReady) while the interpreter or its GIL do not exist yet (a process just started),
// Error(kLayoutMismatch) when what is read makes no sense for the layout, Error(kNoGil) for a free-threaded
// interpreter without a GIL, and whatever the reader throws.
Interpreter attach_interpreter(pid_t pid, MemoryReader& reader, const elf::PythonBinary& binary);

// Where the GIL of `interp_addr` lives (follows the 3.12+ pointer). Throws Error(kNotReady) for a null
// pointer.
uint64_t locate_gil(MemoryReader& reader, const layouts::Layout& layout, uint64_t runtime_addr,
                    uint64_t interp_addr);

}  // namespace gilspy::sampler
