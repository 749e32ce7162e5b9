#pragma once
// The subcommands. Each adds its options to the CLI11 app and runs; only main() turns errors into text and
// exit codes.
#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "base/error.hpp"
#include "base/output_file.hpp"

namespace gilspy::cli {

// Adds the subcommand and returns the function that runs it once parsing succeeded (its exit code).
using Runner = std::function<int()>;
Runner add_info_command(CLI::App& app);
Runner add_dump_command(CLI::App& app);
Runner add_record_command(CLI::App& app);
Runner add_convert_command(CLI::App& app);
Runner add_top_command(CLI::App& app);
Runner add_check_command(CLI::App& app);

// "1234" or "1234,1235" -> pids; throws Error(kUsage).
std::vector<int> parse_pid_list(const std::string& text);
// Throws Error(kUsage) when `pid` is a thread id of another process (/proc/TID exists for threads too, so the
// process would otherwise be read as if it were that thread's), naming the process to give instead.
void require_process_id(int pid);

// Option checks whose messages name the rule, not CLI11's numeric range ("not in range 0 to 1.79769e+308",
// written out in full as 300 digits).
CLI::Validator positive_number();
CLI::Validator non_negative_number();
CLI::Validator number_between(double low, double high);  // inclusive; no text of its own in --help

// --threads of record: "all" -> 0 (every thread), "N" -> N > 0; throws Error(kUsage).
size_t parse_thread_rows(const std::string& text);

// --file-mode "0644" -> 0644; throws Error(kUsage).
inline mode_t parse_file_mode_option(const std::string& text) {
  const auto mode = parse_file_mode(text);
  if (!mode)
    throw Error(ErrorKind::kUsage,
                "--file-mode wants an octal mode such as 0600 or 0644, not '" + text + "'");
  return *mode;
}

}  // namespace gilspy::cli
