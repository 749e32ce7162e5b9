// Checks of numeric options, with messages a user can act on.
#include <charconv>
#include <cmath>

#include <fmt/format.h>

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
      "");  // the option's type name and help say what it takes
}

}  // namespace

CLI::Validator number_between(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        double value = 0;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc() && ptr == text.data() + text.size() && value >= low && value <= high) return "";
        // Bounds written as people write them: 1000000, not 1e+06.
        auto bound = [](double b) {
          return b == std::floor(b) ? fmt::format("{}", static_cast<int64_t>(b)) : fmt::format("{}", b);
        };
        return fmt::format("'{}' is not a number from {} to {}", text, bound(low), bound(high));
      },
      "");  // the option's type name and help say what it takes
}

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
