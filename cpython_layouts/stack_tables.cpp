// Stack and thread-name layouts per CPython minor version (x86-64, default builds). 3.8-3.13 from the DWARF
// of the pyenv builds on the project machine (gdb ptype/o; tests/unit/test_stack_layouts_dwarf.cpp keeps them
// honest against every installed build), the enum values and flag bits from each version's headers
// (Include/internal/pycore_frame.h, pycore_dict.h, pycore_object.h, object.h). 3.13 is also checked against
// the interpreter's _Py_DebugOffsets at attach; 3.14+ are built from them (stack_debug_offsets.cpp).
#include "cpython_layouts/stack_layout.hpp"

namespace gilspy::layouts {
namespace {

// 3.8-3.10: PyFrameObject (f_back +24, f_code +32), code objects without co_qualname, the lnotab (3.8-3.9) or
// 3.10's linetable, dicts with Py_ssize_t dk_size, instance dicts at tp_dictoffset, str objects with wstr.
StackLayout frame_object_era(int minor) {
  StackLayout s;
  s.known = true;
  s.source = "DWARF of the pyenv build (stack_tables.cpp)";
  s.frame.kind = FrameLayout::Kind::kFrameObject;
  s.frame.tstate_frame = 24;               // PyThreadState.frame
  s.frame.previous = 24;                   // f_back
  s.frame.code = 32;                       // f_code
  s.frame.instr = minor == 10 ? 96 : 104;  // int f_lasti
  s.frame.lasti_bytes_per_unit = minor == 10 ? 2 : 1;
  s.frame.refcount = 0;  // ob_refcnt
  s.frame.read_size = s.frame.instr + 4;
  s.code.firstlineno = 40;
  s.code.co_code = 48;
  s.code.filename = 104;
  s.code.name = 112;
  s.code.linetable = 120;  // co_lnotab (3.8-3.9) / co_linetable (3.10)
  s.code.line_table = minor == 10 ? LineTableKind::kLinetable310 : LineTableKind::kLnotab;
  s.code.read_size = 128;
  s.object.ht_cached_keys = minor == 9 ? 864 : 872;
  s.unicode.ascii_data = 48;
  s.unicode.compact_data = 72;
  s.long_int.tagged = false;
  s.dict.log2_keys = false;
  s.dict.dk_size = 8;
  s.dict.dk_nentries = 32;
  s.dict.dk_indices = 40;
  s.dict.values_items = 0;  // ma_values is a PyObject**
  s.attributes.kind = AttributeLayout::Kind::kDictOffset;
  s.interp_modules = minor == 8 ? 56 : 856;
  return s;
}

// 3.11+: _PyInterpreterFrame, co_qualname, the location table, log2-sized dict keys, managed dicts.
StackLayout interpreter_frame_era(int minor) {
  StackLayout s;
  s.known = true;
  s.source = "DWARF of the pyenv build (stack_tables.cpp)";
  s.frame.kind = FrameLayout::Kind::kInterpreterFrame;
  if (minor == 11) {
    s.frame.tstate_frame = 56;   // PyThreadState.cframe
    s.frame.cframe_current = 8;  // _PyCFrame.current_frame (after uint8_t use_tracing)
    s.frame.code = 32;           // f_code
    s.frame.previous = 48;
    s.frame.instr = 56;  // prev_instr
    s.frame.owner = 69;
    s.frame.first_skipped_owner = 256;  // no shim frames in 3.11 (is_entry marks C entry points)
  } else {
    s.frame.tstate_frame = minor == 12 ? 56 : 72;  // cframe (3.12) / current_frame (3.13)
    if (minor == 12) s.frame.cframe_current = 0;
    s.frame.code = 0;  // f_code (3.12) / f_executable (3.13)
    s.frame.previous = 8;
    s.frame.instr = 56;  // prev_instr (3.12) / instr_ptr (3.13)
    s.frame.owner = 70;
    s.frame.first_skipped_owner = 3;  // FRAME_OWNED_BY_CSTACK
  }
  s.frame.read_size = 72;
  s.code.firstlineno = minor == 11 ? 72 : 68;
  s.code.filename = 112;
  s.code.name = 120;
  s.code.qualname = 128;
  s.code.linetable = 136;
  s.code.line_table = LineTableKind::kLocationTable;
  s.code.code_adaptive = minor == 11 ? 184 : minor == 12 ? 192 : 200;
  s.code.read_size = 144;
  s.object.ht_cached_keys = minor == 11 ? 872 : 880;
  s.unicode.ascii_data = minor == 11 ? 48 : 40;
  s.unicode.compact_data = minor == 11 ? 72 : 56;
  s.long_int.tagged = minor >= 12;
  s.dict.log2_keys = true;
  s.dict.values_items = minor >= 13 ? 8 : 0;
  s.attributes.kind = minor == 11   ? AttributeLayout::Kind::kValuesPointer
                      : minor == 12 ? AttributeLayout::Kind::kDictOrValues
                                    : AttributeLayout::Kind::kInlineValues;
  s.interp_modules = minor == 11 ? 888 : minor == 12 ? 944 : 7656;
  return s;
}

}  // namespace

std::optional<StackLayout> stack_layout_table(int minor) {
  if (minor >= 8 && minor <= 10) return frame_object_era(minor);
  if (minor >= 11 && minor <= 13) return interpreter_frame_era(minor);
  return std::nullopt;
}

}  // namespace gilspy::layouts
