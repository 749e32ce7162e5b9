// The stack layout of 3.13+ from the interpreter's own _Py_DebugOffsets: where each minor version's block
// keeps the sections gilspy reads (thread_state.current_frame, interpreter_frame, code_object, pyobject,
// type_object, dict_object, long_object, bytes_object, unicode_object, interpreter_state.imports_modules),
// and what the block does not publish (owner values, tag bits, string state bits, dict keys, the heap type's
// cached keys, attribute storage), from the version's headers.
//
// Positions (bytes into the block; every section starts with the size of the structure it describes):
//
//   section                           3.13   3.14   3.15   fields gilspy uses, in order after the size
//   interpreter_state.size              48     48   0x30
//   interpreter_state.imports_modules   88     96   0x60
//   thread_state.size                  152    176   0xb0
//   thread_state.current_frame         184    208   0xd0
//   interpreter_frame                  224    248  0x138   previous executable instr_ptr localsplus owner
//   code_object                        272    312  0x178   filename name qualname linetable firstlineno
//   argcount
//                                                          localsplusnames localspluskinds co_code_adaptive
//   pyobject                           352    400  0x1d0   ob_type
//   type_object                        368    416  0x1e0   tp_name tp_repr tp_flags
//   dict_object                        448    528  0x270   ma_keys ma_values
//   long_object                        488    568  0x298   lv_tag ob_digit
//   bytes_object                       512    592  0x2b0   ob_size ob_sval
//   unicode_object                     536    616  0x2c8   state length asciiobject_size
//
// 3.13: Include/internal/pycore_runtime.h of 3.13.0 (the block of pyenv's 3.13.0 .PyRuntime section reads
// so). 3.14: debug_offsets_3_14.cpp's table (interpreter_frame gains stackpointer and tlbc_index, code_object
// gains co_tlbc, a set_object section appears before dict_object). 3.15: the block of Debian's 3.15.2, read
// from its .PyRuntime section: thread_state grows (base_frame, last_profiled_frame, ... holds_gil,
// gil_requested), an err_stackitem word precedes interpreter_frame, type_object carries two more words and a
// heap-type pair follows it (tuple_object moves to 0x220), unicode_object gains a fifth word. The unit tests
// decode the real blocks of these builds (tests/unit/test_stack_layouts_dwarf.cpp).
#include <algorithm>
#include <cstring>
#include <string>

#include "base/byte_fields.hpp"
#include "base/error.hpp"
#include "cpython_layouts/stack_layout.hpp"

namespace gilspy::layouts {
namespace {

struct StackBlockPositions {
  const char* label;
  size_t interp_size, interp_modules;
  size_t tstate_size, tstate_current_frame;
  size_t frame;       // interpreter_frame section (its size first)
  size_t code;        // code_object section
  size_t object;      // pyobject
  size_t type;        // type_object
  size_t dict;        // dict_object
  size_t long_;       // long_object
  size_t bytes;       // bytes_object
  size_t unicode;     // unicode_object
  size_t block_size;  // how much of the block must have been read
};

constexpr StackBlockPositions kStack3_13{"3.13", 48,  88,  152, 184, 224, 272,
                                         352,    368, 448, 488, 512, 536, 584};
constexpr StackBlockPositions kStack3_14{"3.14", 48,  96,  176, 208, 248, 312,
                                         400,    416, 528, 568, 592, 616, 648};
constexpr StackBlockPositions kStack3_15{"3.15", 0x30,  0x60,  0xb0,  0xd0,  0x138, 0x178,
                                         0x1d0,  0x1e0, 0x270, 0x298, 0x2b0, 0x2c8, 0x2f0};

// One field of the block, checked against the size its section publishes.
class BlockReader {
 public:
  BlockReader(std::span<const uint8_t> block, const StackBlockPositions& at) : b_(block), at_(at) {
    if (b_.size() < at.block_size) {
      throw Error(ErrorKind::kLayoutMismatch, std::string("_Py_DebugOffsets of CPython ") + at.label +
                                                  " need " + std::to_string(at.block_size) +
                                                  " bytes for stacks, only " + std::to_string(b_.size()) +
                                                  " were read");
    }
  }
  uint64_t word(size_t pos) const { return load<uint64_t>(b_, pos); }  // 0 past the end (checked above)
  // The `index`-th field after the size word of the section at `section` (1 = the first field).
  SOff field(size_t section, int index, const char* name) const {
    return at(section, section + 8 * static_cast<size_t>(index), name);
  }
  // The field at `pos` of the section whose size word is at `size_pos`.
  SOff at(size_t size_pos, size_t pos, const char* name) const {
    const uint64_t size = word(size_pos);
    const uint64_t v = word(pos);
    if (size == 0 || size > (1u << 20) || v >= size) {
      throw Error(ErrorKind::kLayoutMismatch,
                  std::string("the interpreter's _Py_DebugOffsets (read as CPython ") + at_.label +
                      "'s) are implausible for stacks: " + name + " is at +" + std::to_string(v) + " of a " +
                      std::to_string(size) + "-byte structure; refusing to guess");
    }
    return static_cast<SOff>(v);
  }
  SOff size(size_t section) const { return static_cast<SOff>(word(section)); }

 private:
  std::span<const uint8_t> b_;
  const StackBlockPositions& at_;
};

const StackBlockPositions* positions_for(int minor) {
  if (minor == 13) return &kStack3_13;
  if (minor == 14) return &kStack3_14;
  if (minor >= 15) return &kStack3_15;  // newer versions read as 3.15 (validated like the GIL's block)
  return nullptr;
}

void expect_same(const char* what, uint64_t table, uint64_t debug) {
  if (table != debug) {
    throw Error(ErrorKind::kLayoutMismatch, std::string("the 3.13 stack layout table disagrees with the "
                                                        "interpreter's _Py_DebugOffsets on ") +
                                                what + " (table " + std::to_string(table) + ", interpreter " +
                                                std::to_string(debug) + "); stacks are not read");
  }
}
template <class T>
void expect_same(const char* what, Field<T> table, Field<T> debug) {
  expect_same(what, table.off, debug.off);
}

FrameLayout frame_from_debug_block(const BlockReader& r, const StackBlockPositions& at,
                                   const elf::PyVersion& version) {
  FrameLayout f;
  f.kind = FrameLayout::Kind::kInterpreterFrame;
  f.tstate_frame = r.at(at.tstate_size, at.tstate_current_frame, "thread_state.current_frame");
  f.previous = r.field(at.frame, 1, "interpreter_frame.previous");
  f.code = r.field(at.frame, 2, "interpreter_frame.executable");
  f.instr = r.field(at.frame, 3, "interpreter_frame.instr_ptr");
  f.owner = r.field(at.frame, 5, "interpreter_frame.owner");
  // Not published: owner values (pycore_frame.h / pycore_interpframe_structs.h) and 3.14's tagged
  // f_executable (a _PyStackRef: Py_TAG_BITS cleared).
  f.first_skipped_owner = 3;  // 3.13 FRAME_OWNED_BY_CSTACK, 3.14+ FRAME_OWNED_BY_INTERPRETER (and CSTACK)
  f.code_pointer_mask = version.minor >= 14 ? ~uint64_t{3} : ~uint64_t{0};
  f.read_size = std::max({f.previous.end(), f.code.end(), f.instr + 8, f.owner->end()});
  f.read_size = (f.read_size + 7) & ~7u;
  return f;
}

CodeLayout code_from_debug_block(const BlockReader& r, const StackBlockPositions& at) {
  CodeLayout c;
  c.filename = r.field(at.code, 1, "code_object.filename");
  c.name = r.field(at.code, 2, "code_object.name");
  c.qualname = r.field(at.code, 3, "code_object.qualname");
  c.linetable = r.field(at.code, 4, "code_object.linetable");
  c.firstlineno = r.field(at.code, 5, "code_object.firstlineno");
  c.code_adaptive = r.field(at.code, 9, "code_object.co_code_adaptive");
  c.line_table = LineTableKind::kLocationTable;
  c.read_size =
      std::max({c.filename.end(), c.name.end(), c.qualname->end(), c.linetable.end(), c.firstlineno.end()});
  return c;
}

// Objects, types, dicts, ints, bytes and strings: what is published, and what sits where it has for
// versions.
void objects_from_debug_block(const BlockReader& r, const StackBlockPositions& at, StackLayout& s) {
  s.object.ob_type = r.field(at.object, 1, "pyobject.ob_type");
  s.object.tp_name = r.field(at.type, 1, "type_object.tp_name");
  s.object.tp_flags = r.field(at.type, 3, "type_object.tp_flags");
  s.object.ob_size = r.field(at.bytes, 1, "bytes_object.ob_size");  // PyVarObject.ob_size
  // Not published: tp_basicsize and tp_dictoffset sit where they have since 3.0; PyHeapTypeObject's
  // ht_cached_keys follows the type and its five method tables and ht_name, ht_slots, ht_qualname:
  // sizeof(PyTypeObject) + 464 in 3.10-3.15 (880 in 3.13, 888 in 3.15, whose type object grew by 8).
  s.object.tp_basicsize = 32;
  s.object.tp_dictoffset = 288;
  s.object.ht_cached_keys = r.size(at.type) + 464;
  s.dict.ma_keys = r.field(at.dict, 1, "dict_object.ma_keys");
  s.dict.ma_values = r.field(at.dict, 2, "dict_object.ma_values");
  s.dict.log2_keys = true;  // PyDictKeysObject as 3.11-3.13 (pycore_dict.h), not published
  s.dict.values_items = 8;  // PyDictValues: capacity, size, embedded, valid, then values[] (3.13+)
  s.long_int.tagged = true;
  s.long_int.size_or_tag = r.field(at.long_, 1, "long_object.lv_tag");
  s.long_int.digits = r.field(at.long_, 2, "long_object.ob_digit");
  s.bytes.size = r.field(at.bytes, 1, "bytes_object.ob_size");
  s.bytes.data = r.field(at.bytes, 2, "bytes_object.ob_sval");
  s.unicode.state = r.field(at.unicode, 1, "unicode_object.state");
  s.unicode.length = r.field(at.unicode, 2, "unicode_object.length");
  s.unicode.ascii_data = static_cast<SOff>(r.word(at.unicode + 24));  // asciiobject_size: a size
  if (s.unicode.ascii_data == 0 || s.unicode.ascii_data > r.size(at.unicode)) {
    throw Error(ErrorKind::kLayoutMismatch,
                "the interpreter's _Py_DebugOffsets give an implausible "
                "asciiobject_size of " +
                    std::to_string(s.unicode.ascii_data));
  }
  // PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+; not published).
  s.unicode.compact_data = s.unicode.ascii_data + 16;
}

// 3.13: the table decides; the block must agree with it wherever both say something.
StackLayout table_checked_against_block_3_13(const StackLayout& s) {
  const StackLayout t = *stack_layout_table(13);
  expect_same("thread_state.current_frame", t.frame.tstate_frame, s.frame.tstate_frame);
  expect_same("interpreter_frame.previous", t.frame.previous, s.frame.previous);
  expect_same("interpreter_frame.executable", t.frame.code, s.frame.code);
  expect_same("interpreter_frame.instr_ptr", t.frame.instr, s.frame.instr);
  expect_same("interpreter_frame.owner", *t.frame.owner, *s.frame.owner);
  expect_same("code_object.filename", t.code.filename, s.code.filename);
  expect_same("code_object.name", t.code.name, s.code.name);
  expect_same("code_object.qualname", *t.code.qualname, *s.code.qualname);
  expect_same("code_object.linetable", t.code.linetable, s.code.linetable);
  expect_same("code_object.firstlineno", t.code.firstlineno, s.code.firstlineno);
  expect_same("code_object.co_code_adaptive", *t.code.code_adaptive, *s.code.code_adaptive);
  expect_same("pyobject.ob_type", t.object.ob_type, s.object.ob_type);
  expect_same("type_object.tp_name", t.object.tp_name, s.object.tp_name);
  expect_same("type_object.tp_flags", t.object.tp_flags, s.object.tp_flags);
  expect_same("heap type ht_cached_keys", t.object.ht_cached_keys, s.object.ht_cached_keys);
  expect_same("dict_object.ma_keys", t.dict.ma_keys, s.dict.ma_keys);
  expect_same("dict_object.ma_values", t.dict.ma_values, s.dict.ma_values);
  expect_same("long_object.ob_digit", t.long_int.digits, s.long_int.digits);
  expect_same("bytes_object.ob_sval", t.bytes.data, s.bytes.data);
  expect_same("unicode_object.state", t.unicode.state, s.unicode.state);
  expect_same("unicode_object.asciiobject_size", t.unicode.ascii_data, s.unicode.ascii_data);
  expect_same("interpreter_state.imports_modules", t.interp_modules, s.interp_modules);
  StackLayout checked = t;
  checked.source = "DWARF of the pyenv build, cross-checked against _Py_DebugOffsets at attach";
  return checked;
}

}  // namespace

StackLayout stack_layout_from_debug_offsets(const elf::PyVersion& version, std::span<const uint8_t> block) {
  const StackBlockPositions* at = positions_for(version.minor);
  if (version.major != 3 || at == nullptr) {
    throw Error(ErrorKind::kLayoutMismatch,
                "Python " + version.text() + " publishes no stack offsets gilspy knows");
  }
  const BlockReader r(block, *at);
  StackLayout s;
  s.known = true;
  s.source = "_Py_DebugOffsets of the running interpreter (stack_debug_offsets.cpp)";
  s.interp_modules = r.at(at->interp_size, at->interp_modules, "interpreter_state.imports_modules");
  s.frame = frame_from_debug_block(r, *at, version);
  s.code = code_from_debug_block(r, *at);
  objects_from_debug_block(r, *at, s);
  s.attributes.kind = AttributeLayout::Kind::kInlineValues;
  if (version.minor == 13) return table_checked_against_block_3_13(s);
  return s;
}

StackLayout resolve_stack_layout(const elf::PyVersion& version, std::span<const uint8_t> runtime_head) {
  if (version.major == 3 && version.minor < 13) {
    if (auto t = stack_layout_table(version.minor)) return *t;
    return StackLayout{};
  }
  return stack_layout_from_debug_offsets(version, runtime_head);
}

}  // namespace gilspy::layouts
