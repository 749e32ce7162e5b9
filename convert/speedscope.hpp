#pragma once
// Raw recordings to a speedscope file (https://www.speedscope.app, its documented file-format schema:
// https://www.speedscope.app/file-format-schema.json): one sampled profile per view of the GIL, each a
// stack's weight in microseconds, the same integers as --format collapsed writes for that view:
// - "held while others waited" (collapsed's contention), "held" (hold), "waited" (wait), and with
//   record --all-threads "without the GIL" (released).
// Frames are shared between the profiles: name (the function's qualified name), file, line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/output_file.hpp"

namespace gilspy::convert {

struct SpeedscopeOptions {
  mode_t mode = kDefaultOutputMode;
  bool salvage = false;
};

struct SpeedscopeReport {
  std::vector<std::string> profiles;    // their names, in order
  std::vector<uint64_t> totals_us;      // each profile's weights summed
  size_t frames = 0;                    // distinct frames
  size_t stack_samples = 0;             // in the inputs
  std::vector<std::string> incomplete;  // inputs cut short or salvaged
};

// Throws as convert_to_collapsed(); nothing is left behind on failure.
SpeedscopeReport convert_to_speedscope(const std::vector<std::string>& inputs, const std::string& output,
                                       const SpeedscopeOptions& options = {});

// "X.json" -> "X.speedscope.json" (and ".partial" dropped).
std::string default_speedscope_path(const std::string& input);

}  // namespace gilspy::convert
