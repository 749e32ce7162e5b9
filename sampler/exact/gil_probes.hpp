#pragma once
// Where the exact mode (--exact) puts its uprobes: CPython's own take_gil and drop_gil, in the binary that
// holds the interpreter (libpython or the executable). A thread that enters take_gil starts waiting, one that
// returns from it holds the GIL, one that enters drop_gil lets it go: the same three points as the eBPF
// tracers', placed through the kernel's uprobe PMU instead (uprobe_pmu.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "elfutils/elf_image.hpp"

namespace gilspy::sampler::exact {

enum class ProbeKind : uint8_t { kTakeEntry, kTakeReturn, kDropEntry };
const char* to_string(ProbeKind k);

struct ProbePoint {
  ProbeKind kind = ProbeKind::kTakeEntry;
  std::string function;  // the symbol: take_gil, or a compiler's clone of it (take_gil.constprop.0)
  uint64_t file_offset = 0;
};

struct GilProbes {
  std::vector<ProbePoint> points;  // empty when the binary does not name both functions
  std::string problem;             // why not, in words, when points is empty
};

// Every function symbol named take_gil or drop_gil, or a clone of one (`name.suffix`, GCC's constprop, isra
// and part clones are whole functions; a `.cold` part is not, and is left out). Stripped binaries (Debian's
// static interpreters) have neither: then `problem` says so.
GilProbes find_gil_probes(const elf::ElfImage& image);

}  // namespace gilspy::sampler::exact
