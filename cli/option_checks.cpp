// Checks of numeric options, with messages a user can act on.
#include <charconv>
#include <cmath>

#include "base/error.hpp"
#include "cli/commands.hpp"

namespace gilspy::cli {

namespace {

CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double value = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool number = ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(value);
        if (number && (value > 0 || (zero_allowed && value == 0))) return "";
        return "'" + text + "' is not a " + (zero_allowed ? "non-negative" : "positive") + " number";
      },
      zero_allowed ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check(false);
}
CLI::Validator non_negative_number() {
  return number_check(true);
}

size_t parse_thread_rows(const std::string& text) {
  if (text == "all") return 0;
  size_t rows = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), rows);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || rows == 0) {
    throw Error(ErrorKind::kUsage, "--threads takes a positive number of rows or 'all', not '" + text + "'");
  }
  return rows;
}

}  // namespace gilspy::cli
