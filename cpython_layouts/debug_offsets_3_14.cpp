// Decoder for CPython 3.14's _Py_DebugOffsets. Placeholder until the 3.14 struct is transcribed from its
// header: a 3.14 interpreter is refused rather than read with guessed offsets.
#include "cpython_layouts/debug_offsets.hpp"
#include "elfutils/error.hpp"

namespace gilspy::layouts {

DebugOffsets decode_debug_offsets_3_14(std::span<const uint8_t>) {
  throw Error(ErrorKind::kUnsupportedVersion, "Python 3.14 is not supported yet");
}

}  // namespace gilspy::layouts
