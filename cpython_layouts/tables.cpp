// One table per CPython minor version, x86-64 glibc default builds. Numbers read from the DWARF of the pyenv
// builds on the project machine (gdb `ptype/o`, then the DWARF test in tests/ keeps them honest against
// every installed build) and for Debian's stripped python3.11 checked in a live process (same as pyenv 3.11).
#include <array>

#include "base/error.hpp"
#include "cpython_layouts/layout.hpp"

namespace gilspy::layouts {
namespace {

constexpr Layout make_3_8() {
  Layout l;
  l.minor = 8;
  l.source = "DWARF of pyenv 3.8.18 libpython3.8.so (gdb ptype/o), checked by tests/unit/test_layouts_dwarf";
  l.gil_home = GilHome::kRuntime;
  l.gil_offset = 1152;  // _PyRuntime.ceval.gil
  l.runtime.interpreters_head = 32;
  l.interp = {.next = 0, .id = 16, .threads_head = 8};
  l.tstate.thread_id = 176;
  l.gc.home = GcHome::kRuntime;
  l.gc.offset = 344;  // _PyRuntime.gc
  return l;
}

constexpr Layout make_3_9_or_3_10(int minor) {
  Layout l;
  l.minor = minor;
  l.source = minor == 9 ? "DWARF of pyenv 3.9.18 libpython3.9.so" : "DWARF of pyenv 3.10.13 libpython3.10.so";
  l.gil_home = GilHome::kRuntime;
  l.gil_offset = 352;  // _PyRuntime.ceval.gil
  l.runtime.interpreters_head = 32;
  l.interp = {.next = 0, .id = 24, .threads_head = 8};
  l.tstate.thread_id = 176;
  l.gc.home = GcHome::kInterp;
  l.gc.offset = 616;  // interp->gc
  return l;
}

constexpr Layout make_3_11() {
  Layout l;
  l.minor = 11;
  l.source = "DWARF of pyenv 3.11.7 libpython3.11.so; Debian 3.11.2 (stripped) matches in a live process";
  l.gil_home = GilHome::kRuntime;
  l.gil_offset = 360;  // _PyRuntime.ceval.gil
  l.runtime.interpreters_head = 40;
  l.interp = {.next = 0, .id = 48, .threads_head = 16};
  l.tstate.thread_id = 152;
  l.tstate.native_thread_id = 160;
  l.gc.home = GcHome::kInterp;
  l.gc.offset = 648;
  return l;
}

constexpr Layout make_3_12() {
  Layout l;
  l.minor = 12;
  l.source = "DWARF of pyenv 3.12.1 libpython3.12.so";
  l.gil_home = GilHome::kInterpPointer;
  l.gil_offset = 384;  // interp->ceval.gil (normally &interp->_gil, +1040)
  l.runtime.interpreters_head = 40;
  l.interp = {.next = 0, .id = 8, .threads_head = 72};
  l.tstate.thread_id = 136;
  l.tstate.native_thread_id = 144;
  l.gc.home = GcHome::kInterp;
  l.gc.offset = 112;
  return l;
}

constexpr Layout make_3_13() {
  Layout l;
  l.minor = 13;
  l.source = "DWARF of pyenv 3.13.0 libpython3.13.so; cross-checked against _Py_DebugOffsets at attach";
  l.gil_home = GilHome::kInterpPointer;
  l.gil_offset = 16;  // interp->ceval.gil (normally &interp->_gil, +7752)
  l.runtime.interpreters_head = 632;
  l.interp = {.next = 7264, .id = 7272, .threads_head = 7344};
  l.tstate.thread_id = 152;
  l.tstate.native_thread_id = 160;
  l.tstate.holds_gil = 32;  // bit 5 of the byte holding the _status bit fields
  l.tstate.holds_gil_bit = 5;
  l.gc.home = GcHome::kInterp;
  l.gc.offset = 7400;
  return l;
}

constexpr std::array<Layout, 6> kLayouts = {make_3_8(),  make_3_9_or_3_10(9), make_3_9_or_3_10(10),
                                            make_3_11(), make_3_12(),         make_3_13()};

}  // namespace

std::string supported_range() {
  return "3." + std::to_string(kOldestMinor) + " to 3." + std::to_string(kNewestMinor);
}

const Layout* builtin_layouts(size_t* count) {
  *count = kLayouts.size();
  return kLayouts.data();
}

const Layout& layout_for(const elf::PyVersion& version) {
  if (version.major == 3) {
    for (const auto& l : kLayouts) {
      if (l.minor == version.minor) return l;
    }
  }
  throw Error(
      ErrorKind::kUnsupportedVersion,
      "Python " + version.text() + ", which gilspy does not support (it supports CPython " +
          supported_range() +
          (version.major == 3 && version.minor >= 14 ? "; 3.14+ is read through _Py_DebugOffsets" : "") +
          ")");
}

GlibcLayout glibc_layout_for(int major, int minor) {
  GlibcLayout g;
  if (major > 2 || (major == 2 && minor >= 41)) g.cond_wrefs = 28;
  return g;
}

}  // namespace gilspy::layouts
