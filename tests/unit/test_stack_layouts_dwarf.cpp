// The stack and thread-name layouts (cpython_layouts/stack_tables.cpp) against the DWARF of every installed
// pyenv CPython 3.8-3.13, field by field; the 3.13+ decoder (stack_debug_offsets.cpp) on the real
// _Py_DebugOffsets blocks of pyenv's 3.13 and Debian's 3.14 and 3.15 (read from their .PyRuntime sections),
// and on blocks that do not hold together.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cpython_layouts/debug_offsets.hpp"
#include "cpython_layouts/stack_layout.hpp"
#include "elfutils/elf_image.hpp"
#include "support/dwarf_expect.hpp"
#include "support/dwarf_types.hpp"
#include "unit/pyenv_installs.hpp"

namespace gl = gilspy::layouts;
using gilspy::elf::DwarfTypes;

// Named per file, so that the unity build can put test files together.
namespace unit_stack_layouts_dwarf {
namespace {

using gilspy::testing::expect;
using gilspy::testing::expect_field;
using gilspy::testing::expect_opt_field;
using gilspy::testing::opt;
using gilspy::testing::show;

void check_stack_layout(const gl::StackLayout& s, int minor, const gilspy::testing::Install& install) {
  const std::string& v = install.version;
  const DwarfTypes d = DwarfTypes::open(install.libpython);
  REQUIRE(s.known);
  // Frames.
  if (minor <= 10) {
    CHECK(s.frame.kind == gl::FrameLayout::Kind::kFrameObject);
    expect_field(v, "tstate.frame", s.frame.tstate_frame, d, "PyThreadState", "frame");
    CHECK_FALSE(s.frame.cframe_current.has_value());
    expect_field(v, "frame.f_back", s.frame.previous, d, "_frame", "f_back");
    expect_field(v, "frame.f_code", s.frame.code, d, "_frame", "f_code");
    expect(v, "frame.f_lasti", s.frame.instr, d.offset_of("_frame", "f_lasti"));
    expect(v, "frame.f_lasti width (read as an int)", 4, d.member_size("_frame", "f_lasti"));
    CHECK(s.frame.read_size >= s.frame.instr + 4);
    CHECK_FALSE(s.frame.owner.has_value());
  } else {
    CHECK(s.frame.kind == gl::FrameLayout::Kind::kInterpreterFrame);
    const char* f = "_PyInterpreterFrame";
    if (minor <= 12) {
      expect_field(v, "tstate.cframe", s.frame.tstate_frame, d, "PyThreadState", "cframe");
      expect_opt_field(v, "cframe.current_frame", s.frame.cframe_current, d, "_PyCFrame", "current_frame");
      expect(v, "frame.prev_instr", s.frame.instr, d.offset_of(f, "prev_instr"));
      expect(v, "frame.prev_instr width (read as a pointer)", 8, d.member_size(f, "prev_instr"));
    } else {
      expect_field(v, "tstate.current_frame", s.frame.tstate_frame, d, "PyThreadState", "current_frame");
      CHECK_FALSE(s.frame.cframe_current.has_value());
      expect(v, "frame.instr_ptr", s.frame.instr, d.offset_of(f, "instr_ptr"));
      expect(v, "frame.instr_ptr width (read as a pointer)", 8, d.member_size(f, "instr_ptr"));
    }
    expect_field(v, "frame.code", s.frame.code, d, f, minor <= 12 ? "f_code" : "f_executable");
    expect_field(v, "frame.previous", s.frame.previous, d, f, "previous");
    expect_opt_field(v, "frame.owner", s.frame.owner, d, f, "owner");
    REQUIRE(s.frame.owner.has_value());
    CHECK(s.frame.read_size >= s.frame.owner->end());
    CHECK(s.frame.read_size >= s.frame.instr + 8);
    CHECK(s.frame.read_size <= d.size_of(f).value_or(0));
  }
  // Code objects.
  const char* co = "PyCodeObject";
  expect_field(v, "code.co_firstlineno", s.code.firstlineno, d, co, "co_firstlineno");
  expect_field(v, "code.co_filename", s.code.filename, d, co, "co_filename");
  expect_field(v, "code.co_name", s.code.name, d, co, "co_name");
  expect_opt_field(v, "code.co_qualname", s.code.qualname, d, co, "co_qualname");
  expect_field(v, "code.line table", s.code.linetable, d, co, minor <= 9 ? "co_lnotab" : "co_linetable");
  if (minor <= 10) {
    expect_opt_field(v, "code.co_code", s.code.co_code, d, co, "co_code");
  } else {
    CHECK_FALSE(s.code.co_code.has_value());  // 3.11+ keep the instructions inside the code object
  }
  expect(v, "code.co_code_adaptive", opt(s.code.code_adaptive), d.offset_of(co, "co_code_adaptive"));
  CHECK(s.code.read_size >= s.code.linetable.end());
  CHECK(s.code.read_size <= d.size_of(co).value_or(0));
  // Objects and types.
  expect_field(v, "ob_type", s.object.ob_type, d, "PyObject", "ob_type");
  expect_field(v, "ob_size", s.object.ob_size, d, "PyVarObject", "ob_size");
  expect_field(v, "tp_name", s.object.tp_name, d, "PyTypeObject", "tp_name");
  expect_field(v, "tp_basicsize", s.object.tp_basicsize, d, "PyTypeObject", "tp_basicsize");
  expect_field(v, "tp_flags", s.object.tp_flags, d, "PyTypeObject", "tp_flags");
  expect_field(v, "tp_dictoffset", s.object.tp_dictoffset, d, "PyTypeObject", "tp_dictoffset");
  expect_field(v, "ht_cached_keys", s.object.ht_cached_keys, d, "PyHeapTypeObject", "ht_cached_keys");
  if (minor >= 10) {
    expect(v, "ht_cached_keys (sizeof(PyTypeObject) + 464)", s.object.ht_cached_keys.off,
           d.size_of("PyTypeObject").value_or(0) + 464);
  }
  // Strings and bytes.
  expect_field(v, "str.length", s.unicode.length, d, "PyASCIIObject", "length");
  expect_field(v, "str.state", s.unicode.state, d, "PyASCIIObject", "state");
  expect(v, "str ASCII data (sizeof PyASCIIObject)", s.unicode.ascii_data, d.size_of("PyASCIIObject"));
  expect(v, "str compact data (sizeof PyCompactUnicodeObject)", s.unicode.compact_data,
         d.size_of("PyCompactUnicodeObject"));
  expect_field(v, "bytes.ob_size", s.bytes.size, d, "PyVarObject", "ob_size");
  expect(v, "bytes.ob_sval", s.bytes.data, d.offset_of("PyBytesObject", "ob_sval"));
  // Ints.
  CHECK(s.long_int.tagged == (minor >= 12));
  if (minor >= 12) {
    expect_field(v, "int.lv_tag", s.long_int.size_or_tag, d, "_longobject", "long_value.lv_tag");
    expect(v, "int.ob_digit", s.long_int.digits, d.offset_of("_longobject", "long_value.ob_digit"));
  } else {
    expect_field(v, "int.ob_size", s.long_int.size_or_tag, d, "PyVarObject", "ob_size");
    expect(v, "int.ob_digit", s.long_int.digits, d.offset_of("_longobject", "ob_digit"));
  }
  expect(v, "int digit size", 4, d.size_of("digit"));
  // Dicts.
  expect_field(v, "dict.ma_keys", s.dict.ma_keys, d, "PyDictObject", "ma_keys");
  expect_field(v, "dict.ma_values", s.dict.ma_values, d, "PyDictObject", "ma_values");
  const char* dk = "_dictkeysobject";
  CHECK(s.dict.log2_keys == (minor >= 11));
  if (minor >= 11) {
    expect_field(v, "keys.dk_log2_size", s.dict.dk_log2_size, d, dk, "dk_log2_size");
    expect_field(v, "keys.dk_log2_index_bytes", s.dict.dk_log2_index_bytes, d, dk, "dk_log2_index_bytes");
    expect_field(v, "keys.dk_kind", s.dict.dk_kind, d, dk, "dk_kind");
    expect(v, "entry size (general)", 24, d.size_of("PyDictKeyEntry"));
    expect(v, "entry size (unicode)", 16, d.size_of("PyDictUnicodeEntry"));
    expect(v, "values.values", s.dict.values_items, d.offset_of("_dictvalues", "values"));
  } else {
    expect_field(v, "keys.dk_size", s.dict.dk_size, d, dk, "dk_size");
    expect(v, "entry size", 24, d.size_of("PyDictKeyEntry"));
  }
  expect_field(v, "keys.dk_nentries", s.dict.dk_nentries, d, dk, "dk_nentries");
  expect(v, "keys.dk_indices", s.dict.dk_indices, d.offset_of(dk, "dk_indices"));
  if (minor >= 13) {
    expect_field(v, "values.valid", s.attributes.inline_valid, d, "_dictvalues", "valid");
  }
  // The interpreter's sys.modules and a module's dict.
  expect_field(v, "interp modules", s.interp_modules, d, "PyInterpreterState",
               minor <= 11 ? "modules" : "imports.modules");
  expect_field(v, "module md_dict", s.module_dict, d, "PyModuleObject", "md_dict");
}

std::string debian_python(const char* minor) {
  std::string root;
  if (const char* env = std::getenv("GILSPY_DEBIAN_PYTHONS"); env != nullptr && *env) {
    root = env;
  } else {
    const char* cache = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    root =
        (cache != nullptr && *cache ? std::string(cache) : std::string(home ? home : "/root") + "/.cache") +
        "/gilspy/debian-unstable";
  }
  return root + "/root/usr/bin/python" + minor;
}

// The _Py_DebugOffsets block a binary carries in its .PyRuntime section (what _PyRuntime starts with).
std::optional<std::vector<uint8_t>> runtime_block(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  const auto image = gilspy::elf::ElfImage::open(path);
  auto bytes = image.section_bytes(".PyRuntime");
  if (bytes && bytes->size() > gl::kDebugOffsetsReadSize) bytes->resize(gl::kDebugOffsetsReadSize);
  return bytes;
}

gilspy::elf::PyVersion from_block(const std::vector<uint8_t>& b) {
  uint64_t hex = 0;
  std::memcpy(&hex, b.data() + 8, 8);
  return gilspy::elf::version_from_hex(static_cast<uint32_t>(hex));
}

}  // namespace

TEST_CASE("DWARF: stack layout tables match the DWARF of every pyenv libpython") {
  const std::string root = gilspy::testing::pyenv_root();
  for (int minor = 8; minor <= 13; ++minor) {
    const auto table = gl::stack_layout_table(minor);
    REQUIRE(table.has_value());
    const auto found = gilspy::testing::installs_of(root, minor);
    if (found.empty()) {
      MESSAGE("SKIPPED: python 3." << minor << " not found under " << root);
      if (gilspy::testing::ci_strict()) FAIL_CHECK("python 3." << minor << " missing and CI=true");
      continue;
    }
    for (const auto& install : found) {
      SUBCASE(("python " + install.version).c_str()) {
        check_stack_layout(*table, minor, install);
      }
    }
  }
  CHECK_FALSE(gl::stack_layout_table(7).has_value());
  CHECK_FALSE(gl::stack_layout_table(14).has_value());
}

TEST_CASE("stack layout from _Py_DebugOffsets: the real blocks of 3.13, 3.14 and 3.15") {
  const std::string root = gilspy::testing::pyenv_root();
  SUBCASE("pyenv 3.13: the block agrees with the table") {
    const auto installs = gilspy::testing::installs_of(root, 13);
    if (installs.empty()) {
      MESSAGE("SKIPPED: no pyenv 3.13");
      return;
    }
    const auto block = runtime_block(installs.back().libpython);
    REQUIRE(block.has_value());
    const gl::StackLayout s = gl::resolve_stack_layout(from_block(*block), *block);
    CHECK(s.known);
    CHECK(s.frame.tstate_frame == gl::stack_layout_table(13)->frame.tstate_frame);
    CHECK(std::string(s.source).find("cross-checked") != std::string::npos);
    // A table that disagrees with the block is refused, naming the field.
    std::vector<uint8_t> moved = *block;
    const uint64_t owner = 0x44;  // interpreter_frame.owner at block position 264 (3.13)
    std::memcpy(moved.data() + 264, &owner, 8);
    try {
      (void)gl::resolve_stack_layout(from_block(moved), moved);
      FAIL("a disagreeing block was accepted");
    } catch (const gilspy::Error& e) {
      CHECK(e.kind() == gilspy::ErrorKind::kLayoutMismatch);
      CHECK(std::string(e.what()).find("interpreter_frame.owner") != std::string::npos);
    }
  }
  struct Expect {
    const char* minor;
    uint32_t owner, instr, code_adaptive, modules, cached_keys;
  };
  for (const Expect& e :
       {Expect{"3.14", 0x4a, 0x38, 0xd0, 0x1e08, 880}, Expect{"3.15", 0x4a, 0x38, 0xd0, 0x1da8, 888}}) {
    SUBCASE((std::string("Debian ") + e.minor).c_str()) {
      const auto block = runtime_block(debian_python(e.minor));
      if (!block) {
        MESSAGE("SKIPPED: " << debian_python(e.minor) << " not found (scripts/fetch_debian_pythons.sh)");
        if (gilspy::testing::ci_strict()) FAIL_CHECK("Debian python" << e.minor << " missing and CI=true");
        return;
      }
      const gl::StackLayout s = gl::resolve_stack_layout(from_block(*block), *block);
      CHECK(s.known);
      CHECK(s.frame.kind == gl::FrameLayout::Kind::kInterpreterFrame);
      CHECK(s.frame.tstate_frame == 0x48);
      CHECK_FALSE(s.frame.cframe_current.has_value());
      CHECK(s.frame.code == 0);
      CHECK(s.frame.previous == 8);
      CHECK(s.frame.instr == e.instr);
      CHECK(s.frame.owner == e.owner);
      CHECK(s.frame.code_pointer_mask == ~uint64_t{3});
      CHECK(s.code.filename == 0x70);
      CHECK(s.code.qualname == 0x80);
      CHECK(s.code.linetable == 0x88);
      CHECK(s.code.firstlineno == 0x44);
      CHECK(s.code.code_adaptive == e.code_adaptive);
      CHECK(s.object.tp_flags == 0xa8);
      CHECK(s.object.ht_cached_keys == e.cached_keys);
      CHECK(s.unicode.ascii_data == 40);
      CHECK(s.unicode.compact_data == 56);
      CHECK(s.long_int.digits == 0x18);
      CHECK(s.bytes.data == 0x20);
      CHECK(s.dict.ma_keys == 0x20);
      CHECK(s.interp_modules == e.modules);
      if (std::string(e.minor) == "3.15") {
        // 3.15's block also carries, after type_object, words that read as PyTypeObject.tp_basicsize and
        // tp_dictoffset, then sizeof(PyHeapTypeObject) and ht_cached_keys: they agree with the constants
        // used.
        auto word = [&](size_t at) {
          uint64_t w = 0;
          std::memcpy(&w, block->data() + at, 8);
          return w;
        };
        CHECK(word(0x200) == s.object.tp_basicsize);
        CHECK(word(0x208) == s.object.tp_dictoffset);
        CHECK(word(0x218) == s.object.ht_cached_keys);
        CHECK(word(0x2e8) == s.unicode.compact_data);
      }
    }
  }
}

TEST_CASE("stack layout from _Py_DebugOffsets: fields outside their structure and short blocks are refused") {
  // A 3.14-shaped block with every section's size and fields plausible, then one field broken at a time.
  std::vector<uint8_t> b(gl::kDebugOffsetsReadSize, 0);
  auto put = [&](size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  std::memcpy(b.data(), gl::kDebugCookie, 8);
  put(8, 0x030E0AF0);
  put(48, 200000);  // interpreter_state.size
  put(96, 7688);    // imports_modules
  put(176, 832);    // thread_state.size
  put(208, 72);     // current_frame
  const uint64_t frame[] = {88, 8, 0, 56, 80, 74};
  for (size_t i = 0; i < 6; ++i) put(248 + 8 * i, frame[i]);
  const uint64_t code[] = {216, 112, 120, 128, 136, 68, 52, 96, 104, 208};
  for (size_t i = 0; i < 10; ++i) put(312 + 8 * i, code[i]);
  put(400, 16), put(408, 8);
  put(416, 416), put(424, 24), put(432, 88), put(440, 168);
  put(528, 48), put(536, 32), put(544, 40);
  put(568, 32), put(576, 16), put(584, 24);
  put(592, 40), put(600, 16), put(608, 32);
  put(616, 64), put(624, 32), put(632, 16), put(640, 40);
  const auto v = gilspy::elf::version_from_hex(0x030E0AF0);
  REQUIRE(gl::stack_layout_from_debug_offsets(v, b).known);
  struct Bad {
    size_t at;
    uint64_t value;
    const char* field;
  };
  for (const Bad& bad : {Bad{288, 88, "interpreter_frame.owner"}, Bad{344, 216, "code_object.linetable"},
                         Bad{208, 832, "thread_state.current_frame"}, Bad{624, 64, "unicode_object.state"},
                         Bad{536, 0, "dict_object.ma_keys"}}) {
    CAPTURE(bad.field);
    std::vector<uint8_t> broken = b;
    std::memcpy(broken.data() + bad.at, &bad.value, 8);
    if (bad.value == 0) std::memset(broken.data() + 528, 0, 8);  // a zero size
    try {
      (void)gl::stack_layout_from_debug_offsets(v, broken);
      FAIL("accepted");
    } catch (const gilspy::Error& e) {
      CHECK(e.kind() == gilspy::ErrorKind::kLayoutMismatch);
      CHECK(std::string(e.what()).find(bad.field) != std::string::npos);
    }
  }
  const std::vector<uint8_t> cut(b.begin(), b.begin() + 600);
  CHECK_THROWS_AS(gl::stack_layout_from_debug_offsets(v, cut), gilspy::Error);
}

}  // namespace unit_stack_layouts_dwarf
