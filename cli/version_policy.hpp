#pragma once
// What to do with an interpreter newer than gilspy knows whose _Py_DebugOffsets read and validated with the
// newest decoder (cpython_layouts/debug_offsets.hpp): record it with a one-line warning, or, with
// --strict-version, refuse it.
#include "sampler/target/interpreter.hpp"

namespace gilspy::cli {

// Throws Error(kUnsupportedVersion) under `strict`; prints the warning to stderr otherwise. Nothing for a
// known version.
void apply_version_policy(const sampler::Interpreter& interp, bool strict);

}  // namespace gilspy::cli
