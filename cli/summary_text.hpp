#pragma once
// Small formatting pieces that every part of record's terminal summary shares, so that its tables line up
// and say durations and shares the same way.
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace gilspy::cli {

// The NAME column of the summary's thread tables (hold/wait, CPU).
inline constexpr std::size_t kNameColumns = 30;

// "12.3 ms".
inline std::string ms_text(int64_t ns) {
  return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
}

// "850 us", "12.3 ms", "2.94 s": a time in the unit that reads best.
inline std::string duration_text(int64_t ns) {
  if (ns < 1'000'000) return fmt::format("{} us", (ns + 500) / 1000);
  if (ns < 1'000'000'000) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
  return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
}

// part / whole in percent; 0 when there is no whole.
inline double percent_of(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

}  // namespace gilspy::cli
