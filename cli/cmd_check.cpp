// `gilspy check`: how right the sampler is on the user's own workload. The same window recorded both ways at
// once: the default sampler as `record` runs it, and --exact's probes added up beside it (check_report.hpp).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>

#include "cli/check_cpu_watch.hpp"
#include "cli/commands.hpp"
#include "cli/record_session.hpp"
#include "cli/target_options.hpp"

namespace gilspy::cli {

namespace {
// Long enough for a steady workload's CPU use to settle to a tenth of a percent (50 ms reads, ns counters)
// while check still ends within -d + 2 s.
constexpr double kUntracedSeconds = 0.8;

// `gilspy check --help` after the options: examples and what the command does (exit status, files).
constexpr const char* kCheckFooter =
    "Examples:\n"
    "  gilspy check -p 1234               10 s of a running process\n"
    "  gilspy check -p 1234 -d 30 --json  the same as one JSON object per process\n"
    "  gilspy check -- python3 train.py   launch a program and check until it exits\n"
    "Per thread: hold and wait shares from the polls and from the probes, their difference in percentage\n"
    "points, the sampler's 95 % interval (±95%) and whether the probes' shares lie inside it (HELD). About "
    "19\n"
    "threads in 20 should. The probes cost the target time at every take and drop, so the workload runs\n"
    "a little slower than under the sampler alone: the report estimates it from the probes' hits and\n"
    "measures it in the target (its threads' user-mode CPU time, its progress, against 0.8 s untraced\n"
    "before gilspy attaches: a check of a running process takes -d + about 1 s). Needs what --exact\n"
    "needs (root, tracefs, an interpreter with symbols); without it, an error says what is missing.\n"
    "Sampler options (-r, --cpu-budget, --busy) choose the sampler that is checked. -o DIR keeps the\n"
    "sampler's raw file; by default nothing is written.";

// The recording, with the target's CPU watched around it (check_cpu_watch.hpp).
int run_check(RecordOptions& o) {
  // Nothing written unless asked: the raw file goes to a private folder, removed at the end.
  std::string scratch;
  if (o.output_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "gilspy-check-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error(ErrorKind::kIo, "cannot make a folder in /tmp for check");
    scratch = o.output_dir = pattern;
    o.no_trace = true;
  }
  // The target's CPU, read from an untraced stretch before attaching to past the window (a launched
  // program has none: not measured). The stretch is part of check's time: -d + about 1 s.
  std::optional<CheckCpuWatch> cpu;
  // A pid that is not there gets its one-line error at once, not after the untraced stretch.
  const bool all_there = std::all_of(o.session.pids.begin(), o.session.pids.end(),
                                     [](int pid) { return ::kill(pid, 0) == 0 || errno == EPERM; });
  if (!o.session.pids.empty() && all_there) {
    cpu.emplace(std::vector<pid_t>(o.session.pids.begin(), o.session.pids.end()), kUntracedSeconds);
    o.check_cpu = &*cpu;
  }
  const int code = run_record(o);
  if (!scratch.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch, ignored);
  }
  return code;
}

}  // namespace

Runner add_check_command(CLI::App& app) {
  auto opts = std::make_shared<RecordOptions>();
  auto targets = std::make_shared<TargetArgs>();
  auto* cmd = app.add_subcommand(
      "check",
      "Measure how right the sampler is on your own workload: record a window with the sampler and with "
      "--exact's probes at once, and compare them thread by thread");
  cmd->footer(kCheckFooter);
  add_target_options(*cmd, *targets, "check");
  auto duration_s = std::make_shared<double>(10);
  cmd->add_option("-d,--duration", *duration_s,
                  "Seconds to check (default 10; a launched program: until it exits)")
      ->check(positive_number())
      ->type_name("SECONDS");
  cmd->add_option("-o,--output-dir", opts->output_dir,
                  "Keep the sampler's raw file (and trace) in this folder")
      ->type_name("DIR");
  auto thread_rows = std::make_shared<std::string>("20");
  cmd->add_option("--threads", *thread_rows, "Threads in the table: the N busiest, or 'all' (default: 20)")
      ->option_text("N|all");
  cmd->add_flag("--json", opts->json, "One JSON object per process on stdout instead of the table");
  return [opts, targets, duration_s, thread_rows] {
    opts->check = true;
    opts->summary_threads = parse_thread_rows(*thread_rows);
    if (!targets->names_targets()) {
      throw Error(ErrorKind::kUsage,
                  "check needs -p PID or a program to launch (gilspy check -- python3 app.py)");
    }
    opts->session = targets->session_options(opts->json);
    opts->session.loop.duration_s = opts->session.command.empty() ? *duration_s : 0;
    opts->session.loop.exact = true;
    opts->session.loop.exact_shadow = true;
    opts->status = false;
    opts->quiet = true;
    return run_check(*opts);
  };
}

}  // namespace gilspy::cli
