// The layout tables (cpython_layouts/tables.cpp) against the DWARF of every installed pyenv CPython 3.8+:
// every field of a minor version's table is compared with what its libpython's debug info says. A minor
// version with no interpreter installed is reported as SKIPPED; with CI=true it is a failure instead.
// Also small tests of elf::DwarfTypes itself.
#include <doctest/doctest.h>
#include <dwarf.h>
#include <libdwarf.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cpython_layouts/layout.hpp"
#include "elfutils/python_binary.hpp"
#include "support/dwarf_expect.hpp"
#include "support/dwarf_types.hpp"
#include "unit/pyenv_installs.hpp"

// Named per file, so that the unity build can put test files together.
namespace unit_layouts_dwarf {
namespace {

namespace fs = std::filesystem;
using gilspy::elf::DwarfTypes;
using gilspy::layouts::Layout;

using gilspy::testing::ci_strict;
using gilspy::testing::Install;
using gilspy::testing::installs_of;
using gilspy::testing::pyenv_root;

using gilspy::testing::expect;
using gilspy::testing::expect_field;
using gilspy::testing::opt;
using gilspy::testing::show;

// --- A bit field's bit position, straight from libdwarf (DwarfTypes::offset_of only gives bytes). ---------
// The first complete `struct <tag>`; its member `outer` (an inline struct); that struct's member `field`:
// DW_AT_data_bit_offset (DWARF 4+, what gcc emits for DWARF 5). nullopt when any of it is missing.
std::optional<uint64_t> data_bit_offset(const std::string& path, const std::string& tag,
                                        const std::string& outer, const std::string& field) {
  Dwarf_Debug dbg = nullptr;
  Dwarf_Error err = nullptr;
  if (dwarf_init_path(path.c_str(), nullptr, 0, DW_DLC_READ, DW_GROUPNUMBER_ANY, nullptr, nullptr, &dbg,
                      nullptr, 0, nullptr, &err) != DW_DLV_OK) {
    if (err != nullptr) dwarf_dealloc(nullptr, err, DW_DLA_ERROR);
    return std::nullopt;
  }
  auto name_is = [](Dwarf_Die die, const std::string& want) {
    char* name = nullptr;
    Dwarf_Error e = nullptr;
    return dwarf_diename(die, &name, &e) == DW_DLV_OK && name != nullptr && want == name;
  };
  auto tag_of = [](Dwarf_Die die) {
    Dwarf_Half t = 0;
    Dwarf_Error e = nullptr;
    dwarf_tag(die, &t, &e);
    return t;
  };
  // The child of `parent` with tag `want_tag` and name `want`; the caller deallocates it.
  auto find_child = [&](Dwarf_Die parent, Dwarf_Half want_tag, const std::string& want, bool complete) {
    Dwarf_Die cur = nullptr;
    if (dwarf_child(parent, &cur, &err) != DW_DLV_OK) return static_cast<Dwarf_Die>(nullptr);
    while (cur != nullptr) {
      Dwarf_Bool decl = false;
      if (complete) dwarf_hasattr(cur, DW_AT_declaration, &decl, &err);
      if (tag_of(cur) == want_tag && !decl && name_is(cur, want)) return cur;
      Dwarf_Die next = nullptr;
      if (dwarf_siblingof_b(dbg, cur, true, &next, &err) != DW_DLV_OK) next = nullptr;
      dwarf_dealloc_die(cur);
      cur = next;
    }
    return static_cast<Dwarf_Die>(nullptr);
  };
  auto udata = [&](Dwarf_Die die, Dwarf_Half attr_num) -> std::optional<uint64_t> {
    Dwarf_Attribute attr = nullptr;
    if (dwarf_attr(die, attr_num, &attr, &err) != DW_DLV_OK) return std::nullopt;
    Dwarf_Unsigned v = 0;
    const int rc = dwarf_formudata(attr, &v, &err);
    dwarf_dealloc_attribute(attr);
    return rc == DW_DLV_OK ? std::optional<uint64_t>(v) : std::nullopt;
  };
  std::optional<uint64_t> result;
  bool done = false;
  while (!done) {
    Dwarf_Unsigned hlen = 0, toff = 0, next_cu = 0;
    Dwarf_Half ver = 0, asize = 0, lsize = 0, esize = 0, utype = 0;
    Dwarf_Off aoff = 0;
    Dwarf_Sig8 sig{};
    if (dwarf_next_cu_header_d(dbg, true, &hlen, &ver, &aoff, &asize, &lsize, &esize, &sig, &toff, &next_cu,
                               &utype, &err) != DW_DLV_OK) {
      break;
    }
    Dwarf_Die cu = nullptr;
    if (dwarf_siblingof_b(dbg, nullptr, true, &cu, &err) != DW_DLV_OK) continue;
    if (Dwarf_Die st = find_child(cu, DW_TAG_structure_type, tag, true); st != nullptr) {
      done = true;  // the first complete definition decides, whatever follows
      if (Dwarf_Die member = find_child(st, DW_TAG_member, outer, false); member != nullptr) {
        Dwarf_Attribute type_attr = nullptr;
        Dwarf_Off type_off = 0;
        if (dwarf_attr(member, DW_AT_type, &type_attr, &err) == DW_DLV_OK) {
          if (dwarf_global_formref(type_attr, &type_off, &err) == DW_DLV_OK) {
            Dwarf_Die inner = nullptr;
            if (dwarf_offdie_b(dbg, type_off, true, &inner, &err) == DW_DLV_OK) {
              if (Dwarf_Die bit = find_child(inner, DW_TAG_member, field, false); bit != nullptr) {
                result = udata(bit, DW_AT_data_bit_offset);
                dwarf_dealloc_die(bit);
              }
              dwarf_dealloc_die(inner);
            }
          }
          dwarf_dealloc_attribute(type_attr);
        }
        dwarf_dealloc_die(member);
      }
      dwarf_dealloc_die(st);
    }
    dwarf_dealloc_die(cu);
  }
  // Errors met on the way (if any) belong to dbg and go with it.
  dwarf_finish(dbg, &err);
  return result;
}

// Every field of `l` against the DWARF of one libpython.
void check_layout(const Layout& l, const Install& install) {
  const std::string& v = install.version;
  const auto t0 = std::chrono::steady_clock::now();
  const DwarfTypes d = DwarfTypes::open(install.libpython);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("python " << v << ": DWARF type index of " << install.libpython << " built in "
                    << static_cast<int>(secs * 1000) << " ms");
  WARN_MESSAGE(secs < 3.0, "python " << v << ": DwarfTypes::open took " << secs << " s");

  CHECK(l.major == 3);
  CHECK_FALSE(l.free_threaded);

  // struct _gil_runtime_state
  const char* gil = "_gil_runtime_state";
  expect(v, "gil.size", l.gil.size, d.size_of(gil));
  expect_field(v, "gil.interval", l.gil.interval, d, gil, "interval");
  expect_field(v, "gil.last_holder", l.gil.last_holder, d, gil, "last_holder");
  expect_field(v, "gil.locked", l.gil.locked, d, gil, "locked");
  expect_field(v, "gil.switch_number", l.gil.switch_number, d, gil, "switch_number");
  expect(v, "gil.cond", l.gil.cond, d.offset_of(gil, "cond"));
  expect(v, "gil.mutex", l.gil.mutex, d.offset_of(gil, "mutex"));
  expect(v, "gil.switch_cond", l.gil.switch_cond, d.offset_of(gil, "switch_cond"));
  expect(v, "gil.switch_mutex", l.gil.switch_mutex, d.offset_of(gil, "switch_mutex"));
  expect(v, "gil.enabled", opt(l.gil.enabled), d.offset_of(gil, "enabled"));
  // The members are PyCOND_T / PyMUTEX_T, i.e. pthread_cond_t / pthread_mutex_t in these builds.
  expect(v, "gil.cond_size", l.gil.cond_size, d.size_of("pthread_cond_t"));
  expect(v, "gil.mutex_size", l.gil.mutex_size, d.size_of("pthread_mutex_t"));
  expect(v, "gil.switch_cond_size", l.gil.switch_cond_size, d.size_of("pthread_cond_t"));
  expect(v, "gil.switch_mutex_size", l.gil.switch_mutex_size, d.size_of("pthread_mutex_t"));
  // ...and each fits before the next member (or the end of the struct).
  CHECK(l.gil.cond + l.gil.cond_size <= l.gil.mutex);
  CHECK(l.gil.mutex + l.gil.mutex_size <= l.gil.switch_cond);
  CHECK(l.gil.switch_cond + l.gil.switch_cond_size <= l.gil.switch_mutex);
  CHECK(l.gil.switch_mutex + l.gil.switch_mutex_size <= l.gil.size);

  // Where the GIL struct is.
  if (l.minor <= 11) {
    CHECK(l.gil_home == gilspy::layouts::GilHome::kRuntime);
    expect(v, "gil_offset (_PyRuntimeState.ceval.gil)", l.gil_offset,
           d.offset_of("_PyRuntimeState", "ceval.gil"));
  } else {
    CHECK(l.gil_home == gilspy::layouts::GilHome::kInterpPointer);
    expect(v, "gil_offset (PyInterpreterState.ceval.gil)", l.gil_offset,
           d.offset_of("PyInterpreterState", "ceval.gil"));
    MESSAGE("python " << v << ": the interpreter's own GIL is at interp+"
                      << show(d.offset_of("PyInterpreterState", "_gil")));
  }

  // The runtime and the interpreter list.
  expect_field(v, "runtime.interpreters_head", l.runtime.interpreters_head, d, "_PyRuntimeState",
               "interpreters.head");
  expect_field(v, "interp.next", l.interp.next, d, "PyInterpreterState", "next");
  expect_field(v, "interp.id", l.interp.id, d, "PyInterpreterState", "id");
  const char* threads_head = l.minor <= 10 ? "tstate_head" : "threads.head";
  expect_field(v, std::string("interp.threads_head (") + threads_head + ")", l.interp.threads_head, d,
               "PyInterpreterState", threads_head);

  // Thread states.
  expect_field(v, "tstate.prev", l.tstate.prev, d, "PyThreadState", "prev");
  expect_field(v, "tstate.next", l.tstate.next, d, "PyThreadState", "next");
  expect_field(v, "tstate.interp", l.tstate.interp, d, "PyThreadState", "interp");
  expect_field(v, "tstate.thread_id", l.tstate.thread_id, d, "PyThreadState", "thread_id");
  expect(v, "tstate.native_thread_id", opt(l.tstate.native_thread_id),
         d.offset_of("PyThreadState", "native_thread_id"));
  if (l.tstate.native_thread_id) {
    expect_field(v, "tstate.native_thread_id", *l.tstate.native_thread_id, d, "PyThreadState",
                 "native_thread_id");
  }
  // holds_gil: a bit of the `_status` bit fields in 3.13. offset_of gives the byte holding the bit; the bit
  // index comes from DW_AT_data_bit_offset.
  expect(v, "tstate.holds_gil (_status.holds_gil, byte)", opt(l.tstate.holds_gil),
         d.offset_of("PyThreadState", "_status.holds_gil"));
  if (l.tstate.holds_gil && l.tstate.holds_gil_bit >= 0) {
    const auto status = d.offset_of("PyThreadState", "_status");
    const auto bits = data_bit_offset(install.libpython, "_ts", "_status", "holds_gil");
    REQUIRE_MESSAGE(status.has_value(), "python " << v << ": PyThreadState has no _status");
    REQUIRE_MESSAGE(bits.has_value(), "python " << v << ": no DW_AT_data_bit_offset for _status.holds_gil");
    expect(v, "tstate.holds_gil_bit", static_cast<uint64_t>(l.tstate.holds_gil_bit),
           (*status * 8 + *bits) % 8);
    expect(v, "tstate.holds_gil (from the bit offset)", opt(l.tstate.holds_gil), *status + *bits / 8);
  } else {
    CHECK(l.tstate.holds_gil_bit == -1);
  }

  // Garbage collector: where its state is, then struct _gc_runtime_state.
  REQUIRE(l.gc.known);
  if (l.minor == 8) {
    CHECK(l.gc.home == gilspy::layouts::GcHome::kRuntime);
    expect(v, "gc.offset (_PyRuntimeState.gc)", l.gc.offset, d.offset_of("_PyRuntimeState", "gc"));
  } else {
    CHECK(l.gc.home == gilspy::layouts::GcHome::kInterp);
    expect(v, "gc.offset (PyInterpreterState.gc)", l.gc.offset, d.offset_of("PyInterpreterState", "gc"));
  }
  const char* gc = "_gc_runtime_state";
  expect_field(v, "gc.enabled", l.gc.enabled, d, gc, "enabled");
  expect(v, "gc.generations", l.gc.generations, d.offset_of(gc, "generations"));
  expect(v, "gc.stats (generation_stats)", l.gc.stats, d.offset_of(gc, "generation_stats"));
  expect_field(v, "gc.collecting", l.gc.collecting, d, gc, "collecting");
  expect(v, "gc.generation_stride (sizeof struct gc_generation)", l.gc.generation_stride,
         d.size_of("gc_generation"));
  expect_field(v, "gc.generation_threshold", l.gc.generation_threshold, d, "gc_generation", "threshold");
  expect_field(v, "gc.generation_count", l.gc.generation_count, d, "gc_generation", "count");
  expect(v, "gc.stats_stride (sizeof struct gc_generation_stats)", l.gc.stats_stride,
         d.size_of("gc_generation_stats"));
  expect_field(v, "gc.stats_collections", l.gc.stats_collections, d, "gc_generation_stats", "collections");
  expect_field(v, "gc.stats_collected", l.gc.stats_collected, d, "gc_generation_stats", "collected");
  expect_field(v, "gc.stats_uncollectable", l.gc.stats_uncollectable, d, "gc_generation_stats",
               "uncollectable");
  CHECK_FALSE(l.gc.incremental);
  CHECK(l.gc.stats_home == gilspy::layouts::GcStatsHome::kInline);
  // generations[generations_count] is followed by `generation0`; generation_stats[] ends before `collecting`.
  expect(v, "gc.generations_count (generation0 follows generations[])",
         l.gc.generations + static_cast<uint64_t>(l.gc.generations_count) * l.gc.generation_stride,
         d.offset_of(gc, "generation0"));
  CHECK(l.gc.stats + static_cast<uint64_t>(l.gc.generations_count) * l.gc.stats_stride <=
        l.gc.collecting.off);
}

// The newest installed pyenv libpython with a table, for the DwarfTypes tests.
std::optional<Install> newest_install() {
  const std::string root = pyenv_root();
  for (int minor = gilspy::layouts::kNewestMinor; minor >= gilspy::layouts::kOldestMinor; --minor) {
    const auto found = installs_of(root, minor);
    if (!found.empty()) return found.back();
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("DWARF: layout tables match the DWARF of every pyenv libpython") {
  const std::string root = pyenv_root();
  size_t count = 0;
  const Layout* layouts = gilspy::layouts::builtin_layouts(&count);
  REQUIRE(count > 0);
  for (size_t i = 0; i < count; ++i) {
    const Layout& l = layouts[i];
    const std::string minor = "3." + std::to_string(l.minor);
    const auto found = installs_of(root, l.minor);
    if (found.empty()) {
      SUBCASE(("python " + minor + " (not installed)").c_str()) {
        MESSAGE("SKIPPED: python " << minor << " not found under " << root);
        if (ci_strict())
          FAIL_CHECK("python " << minor << " not found under " << root
                               << " and CI=true: none may be skipped");
      }
      continue;
    }
    for (const auto& install : found) {
      SUBCASE(("python " + install.version).c_str()) {
        check_layout(l, install);
      }
    }
  }
  // Interpreters newer than the last table (3.14: read through _Py_DebugOffsets) have nothing to compare.
  const int last_table_minor = layouts[count - 1].minor;
  for (int minor = last_table_minor + 1; minor <= gilspy::layouts::kNewestMinor; ++minor) {
    for (const auto& install : installs_of(root, minor)) {
      SUBCASE(("python " + install.version + " (no built-in table)").c_str()) {
        MESSAGE("python " << install.version
                          << " has no built-in table (its layout comes from _Py_DebugOffsets): "
                          << "not compared with DWARF here");
      }
    }
  }
}

TEST_CASE("DWARF: DwarfTypes answers by struct tag and by typedef name") {
  const auto install = newest_install();
  if (!install) {
    MESSAGE("SKIPPED: no pyenv libpython 3.8+ found under " << pyenv_root());
    if (ci_strict()) FAIL_CHECK("no pyenv libpython 3.8+ and CI=true");
    return;
  }
  DwarfTypes d = DwarfTypes::open(install->libpython);
  CHECK(d.size_of("_gil_runtime_state") == std::optional<uint64_t>(208));
  // A tag and its typedef are the same type.
  REQUIRE(d.size_of("_ts").has_value());
  CHECK(d.size_of("PyThreadState") == d.size_of("_ts"));
  CHECK(d.size_of("PyInterpreterState") == d.size_of("_is"));
  CHECK(d.size_of("_PyRuntimeState") == d.size_of("pyruntimestate"));
  CHECK(d.offset_of("PyThreadState", "interp") == d.offset_of("_ts", "interp"));
  // Plain typedefs of base types have a size too.
  CHECK(d.size_of("Py_ssize_t") == std::optional<uint64_t>(8));
  // Nested paths add up.
  const auto interpreters = d.offset_of("_PyRuntimeState", "interpreters");
  const auto head = d.offset_of("_PyRuntimeState", "interpreters.head");
  REQUIRE(interpreters.has_value());
  REQUIRE(head.has_value());
  CHECK(*head >= *interpreters);
  // Unknown names, unknown members, empty path components and paths through pointers give nothing.
  CHECK_FALSE(d.size_of("no_such_struct_gilspy").has_value());
  CHECK_FALSE(d.offset_of("no_such_struct_gilspy", "x").has_value());
  CHECK_FALSE(d.offset_of("PyThreadState", "no_such_member").has_value());
  CHECK_FALSE(d.offset_of("PyThreadState", "").has_value());
  CHECK_FALSE(d.offset_of("PyThreadState", "interp.").has_value());
  CHECK_FALSE(d.offset_of("PyThreadState", "interp.id").has_value());  // `interp` is a pointer
  // Moving keeps the index.
  DwarfTypes moved = std::move(d);
  CHECK(moved.size_of("_gil_runtime_state") == std::optional<uint64_t>(208));
}

TEST_CASE("DWARF: DwarfTypes::open fails with kElf and names the file") {
  auto expect_elf_error = [](const std::string& path) {
    try {
      (void)DwarfTypes::open(path);
      FAIL("DwarfTypes::open(" << path << ") did not throw");
    } catch (const gilspy::Error& e) {
      CHECK(e.kind() == gilspy::ErrorKind::kElf);
      CHECK_MESSAGE(std::string(e.what()).find(path) != std::string::npos, e.what());
    }
  };
  SUBCASE("missing file") {
    expect_elf_error("/nonexistent/gilspy/libpython3.99.so");
  }
  SUBCASE("not an ELF file") {
    expect_elf_error(std::string(GILSPY_SOURCE_DIR) + "/CMakeLists.txt");
  }
  SUBCASE("a directory") {
    expect_elf_error(GILSPY_SOURCE_DIR);
  }
  SUBCASE("stripped binary without DWARF") {
    const std::string stripped = "/usr/bin/python3.11";
    if (!fs::exists(stripped)) {
      MESSAGE("SKIPPED: " << stripped << " not found");
      if (ci_strict()) FAIL_CHECK(stripped << " not found and CI=true");
    } else {
      expect_elf_error(stripped);
    }
  }
}

}  // namespace unit_layouts_dwarf
