#pragma once
// The 95 % interval of a share that the sampler estimated (docs/raw-format.md, "Shares are estimates"): one
// formula for the record summary, the raw file's summary and top.
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gilspy {

// Half-width of the 95 % interval of a share of `life_ns` whose time has variance `var_ns2` (ns²); -1 when
// either is not known.
inline double share_ci95(double var_ns2, int64_t life_ns) {
  if (var_ns2 < 0 || life_ns <= 0) return -1;
  return std::min(1.0, 1.96 * std::sqrt(var_ns2) / static_cast<double>(life_ns));
}

}  // namespace gilspy
