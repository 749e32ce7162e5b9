#pragma once
// Where CPython keeps what a Python stack and a thread's name are made of: frames, code objects, strings,
// bytes, ints, dicts, types and instance attributes. One `StackLayout` per minor version (x86-64, default
// builds), the only place gilspy knows these structures. 3.8-3.13: tables from the pyenv builds' DWARF
// (stack_tables.cpp, checked by tests/unit/test_stack_layouts_dwarf.cpp); 3.13+: the frame, code, object,
// string, long, bytes and dict offsets come from the interpreter's _Py_DebugOffsets (stack_debug_offsets.cpp,
// checked against the table for 3.13), the rest (owner values, tag bits, string state bits, dict keys, type
// slots, attribute storage) from the version's headers, as _Py_DebugOffsets does not publish them.
#include <cstdint>
#include <optional>
#include <span>

#include "base/byte_fields.hpp"
#include "elfutils/python_binary.hpp"

namespace gilspy::layouts {

// A position (where a struct, an array or data starts, or a size); the fields a reader takes out of the bytes
// are typed (Field<T>) so that each is read at its own width.
using SOff = uint32_t;

// How the innermost frame hangs off a thread state, and what one frame holds.
struct FrameLayout {
  enum class Kind : uint8_t {
    kFrameObject,       // 3.8-3.10: PyFrameObject chain, f_lasti an int
    kInterpreterFrame,  // 3.11+: _PyInterpreterFrame chain, an instruction pointer
  };
  Kind kind = Kind::kInterpreterFrame;
  // tstate->frame (3.8-3.10), tstate->cframe (3.11-3.12), tstate->current_frame (3.13+)
  Field<uint64_t> tstate_frame = 0;
  // 3.11-3.12: tstate_frame points at a _PyCFrame whose current_frame is here; nullopt: tstate_frame is the
  // frame.
  OptField<uint64_t> cframe_current;
  Field<uint64_t> previous = 0;  // f_back / previous
  Field<uint64_t> code = 0;      // f_code / f_executable
  // f_lasti, an int (kFrameObject) / prev_instr (3.11-3.12) or instr_ptr (3.13+), a pointer: its width
  // follows `kind`, so it is a position the walker reads by kind, not one typed field.
  SOff instr = 0;
  // 3.8-3.10: f_lasti counts bytes (3.8-3.9) or code units (3.10); -1 before the first instruction.
  int lasti_bytes_per_unit = 1;
  OptField<uint8_t> owner;  // 3.11+: char owner
  // Frames whose owner is at least this are not Python frames (3.12+: C-stack shims; 3.14+ also the
  // interpreter's sentinel frames) and are skipped. 256: none (3.11 has no shim frames).
  int first_skipped_owner = 256;
  uint64_t code_pointer_mask = ~uint64_t{0};  // 3.14+: f_executable is a _PyStackRef; tag bits cleared
  // 3.8-3.10: ob_refcnt. A frame object kept for reuse (its code's zombie frame, or the free list, whose
  // f_back pointers link the free list and whose f_code is not cleared) has 0: a thread that returned under
  // a read leaves a chain of such frames that reads like a stack. nullopt: frames are not objects (3.11+).
  OptField<int64_t> refcount;
  SOff read_size = 0;  // bytes read per frame, from its start: covers every field above
};

enum class LineTableKind : uint8_t {
  kLnotab,         // 3.8-3.9: co_lnotab, (address delta, line delta) byte pairs
  kLinetable310,   // 3.10: co_linetable, (range length, line delta) byte pairs, -128 = no line
  kLocationTable,  // 3.11+: co_linetable, the location table of Objects/locations.md
};

struct CodeLayout {
  Field<int32_t> firstlineno = 0;  // int
  Field<uint64_t> filename = 0, name = 0;
  OptField<uint64_t> qualname;    // 3.11+
  Field<uint64_t> linetable = 0;  // bytes object
  LineTableKind line_table = LineTableKind::kLocationTable;
  // 3.11+: the instructions start here inside the code object; their number of code units is Py_SIZE(code).
  std::optional<SOff> code_adaptive;
  // 3.8-3.10: co_code, a bytes object holding the instructions.
  OptField<uint64_t> co_code;
  SOff read_size = 0;  // bytes read for one code object, from its start: covers every field above
};

// PyObject / PyVarObject / PyTypeObject fields every version shares.
struct ObjectLayout {
  Field<uint64_t> ob_type = 8;
  Field<int64_t> ob_size = 16;   // PyVarObject
  Field<uint64_t> tp_name = 24;  // const char* in the type object
  Field<int64_t> tp_basicsize = 32;
  Field<uint64_t> tp_flags = 168;
  Field<int64_t> tp_dictoffset = 288;
  // PyHeapTypeObject: the shared keys of its instances' split dicts / values
  Field<uint64_t> ht_cached_keys = 0;
};

// A str object (PyASCIIObject and PyCompactUnicodeObject).
struct UnicodeLayout {
  Field<int64_t> length = 16;
  Field<uint32_t> state = 32;  // the state bit fields: only the low byte is meaningful
  SOff ascii_data = 48;        // sizeof(PyASCIIObject): data of a compact ASCII string
  SOff compact_data = 72;      // sizeof(PyCompactUnicodeObject): data of a compact non-ASCII string
  int kind_shift = 2, kind_bits = 3, compact_bit = 5, ascii_bit = 6;
};

struct BytesLayout {
  Field<int64_t> size = 16;  // ob_size
  SOff data = 32;            // ob_sval
};

// An int: the sign and digit count, then 30-bit digits.
struct LongLayout {
  bool tagged =
      false;  // 3.12+: lv_tag = (ndigits << 3) | sign (0 positive, 1 zero, 2 negative); else ob_size
  Field<int64_t> size_or_tag = 16;
  SOff digits = 24;
  int digit_bits = 30;
};

// A dict and its keys object.
struct DictLayout {
  Field<uint64_t> ma_keys = 32;
  Field<uint64_t> ma_values = 40;  // split dicts (instance attributes): the values, by entry index
  // Keys object, 3.8-3.10: Py_ssize_t dk_size, dk_nentries; indices of 1/2/4/8 bytes by dk_size.
  // 3.11+: uint8 dk_log2_size, dk_log2_index_bytes, dk_kind (0 general: 24-byte entries with the hash; 1
  // unicode, 2 split: 16-byte entries), Py_ssize_t dk_nentries.
  bool log2_keys = true;
  Field<int64_t> dk_size = 8;                                              // 3.8-3.10
  Field<uint8_t> dk_log2_size = 8, dk_log2_index_bytes = 9, dk_kind = 10;  // 3.11+
  Field<int64_t> dk_nentries = 24;
  SOff dk_indices = 32;
  SOff values_items =
      0;  // PyDictValues: where values[] starts (3.13+: after capacity, size, embedded, valid)
};

// Where an instance keeps its attributes (a threading.Thread's _name).
struct AttributeLayout {
  enum class Kind : uint8_t {
    kDictOffset,     // 3.8-3.10: the dict at obj + tp_dictoffset
    kValuesPointer,  // 3.11: Py_TPFLAGS_MANAGED_DICT: values at *(obj - 32) (keys: ht_cached_keys), else the
                     //       dict at *(obj - 24)
    kDictOrValues,   // 3.12: one word at obj - 24: values + 1 (low bit set; keys: ht_cached_keys) or the dict
    kInlineValues,   // 3.13+: Py_TPFLAGS_INLINE_VALUES: values at obj + tp_basicsize while `valid`, else the
                     //        managed dict at *(obj - 24)
  };
  Kind kind = Kind::kDictOffset;
  uint64_t managed_dict_flag = uint64_t{1} << 4;   // Py_TPFLAGS_MANAGED_DICT (3.11+)
  uint64_t inline_values_flag = uint64_t{1} << 2;  // Py_TPFLAGS_INLINE_VALUES (3.13+)
  Field<uint8_t> inline_valid = 3;                 // PyDictValues.valid (3.13+)
};

struct StackLayout {
  bool known = false;  // false: this version's stacks and thread names are not read
  FrameLayout frame;
  CodeLayout code;
  ObjectLayout object;
  UnicodeLayout unicode;
  BytesLayout bytes;
  LongLayout long_int;
  DictLayout dict;
  AttributeLayout attributes;
  // PyInterpreterState: sys.modules (interp->modules, 3.12+ interp->imports.modules)
  Field<uint64_t> interp_modules = 0;
  Field<uint64_t> module_dict = 16;  // PyModuleObject.md_dict
  const char* source = "";           // where the numbers came from
};

// The table for 3.8-3.13 (nullopt for another minor version).
std::optional<StackLayout> stack_layout_table(int minor);

// For a version that starts _PyRuntime with _Py_DebugOffsets (3.13+): the layout from the block (the first
// bytes of _PyRuntime), every published offset checked against the size the block publishes for its
// structure. 3.13: the table, after checking it against the block. Throws Error(kLayoutMismatch) naming the
// field for a block that does not hold together, or for a 3.13 table that disagrees with it.
StackLayout stack_layout_from_debug_offsets(const elf::PyVersion& version, std::span<const uint8_t> block);

// The layout for a process: the table (3.8-3.12) or from the debug offsets (3.13+). A version without one
// gets `known == false` (stacks and names are then not read; the GIL is recorded as before).
StackLayout resolve_stack_layout(const elf::PyVersion& version, std::span<const uint8_t> runtime_head);

}  // namespace gilspy::layouts
