#include "cli/version_policy.hpp"

#include <fmt/core.h>

#include <cstdio>

#include "base/error.hpp"
#include "cpython_layouts/debug_offsets.hpp"

namespace gilspy::cli {

void apply_version_policy(const sampler::Interpreter& interp, bool strict) {
  // Built from Py_Version's digits: printable.
  const std::string note = layouts::newer_than_known_note(interp.binary.version, interp.layout);
  if (note.empty()) return;
  if (strict) {
    throw Error(ErrorKind::kUnsupportedVersion,
                "process " + std::to_string(interp.pid) + ": " + note + "; --strict-version refuses it");
  }
  fmt::print(stderr, "gilspy: warning: process {}: {}; recording it anyway (--strict-version refuses)\n",
             interp.pid, note);
}

}  // namespace gilspy::cli
