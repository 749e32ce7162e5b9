// `gilspy top`: a live, top-like view of who holds and who waits for the GIL, per thread, per interval.
#include "cli/commands.hpp"
#include "cli/target_options.hpp"
#include "cli/top_session.hpp"

namespace gilspy::cli {

namespace {

// `gilspy top --help` after the options: examples and what the command does (exit status, files).
constexpr const char* kTopFooter =
    "Examples:\n"
    "  gilspy top -p 1234                     watch a running process (q or Ctrl+C to quit)\n"
    "  gilspy top -p 1234,1240                several processes, one group each\n"
    "  gilspy top -- python3 train.py         launch a program and watch it until it exits\n"
    "  gilspy top -p 1234 --json -n 5         five snapshots, one JSON object per line\n"
    "  gilspy top -p 1234 --functions         which Python functions hold the GIL (py-spy's top, by role)\n"
    "Keys: h sort by HOLD%, w by WAIT%, i by TID; c CPU columns (CPU%, run-queue, IPC by GIL role) / GIL\n"
    "columns; f functions (own and total time held, waited, without the GIL) / threads; t totals since\n"
    "start / last interval; p pause; r reset the totals; q quit. On a pipe (or with --batch) it prints a\n"
    "plain snapshot every interval (with --counters, each process's CPU table too; with --functions, the\n"
    "function table).\n"
    "Exit status: 0 when it ended as asked (q, -n, Ctrl+C, SIGTERM, SIGHUP, the targets' exit); in launch "
    "mode "
    "the\n"
    "program's own exit status; 1 on errors; 2 for wrong arguments.";

}  // namespace

Runner add_top_command(CLI::App& app) {
  auto opts = std::make_shared<TopOptions>();
  auto targets = std::make_shared<TargetArgs>();
  auto* cmd = app.add_subcommand("top", "Watch who holds and who waits for the GIL, live, thread by thread");
  cmd->footer(kTopFooter);
  add_target_options(*cmd, *targets, "watch");
  cmd->add_option("--interval", opts->interval_s, "Seconds between refreshes, 0.05 to 3600 (default 1)")
      ->check(number_between(0.05, 3600))
      ->type_name("SECONDS");
  cmd->add_option("-n,--count", opts->count, "Stop after this many snapshots")
      ->check(positive_number())
      ->type_name("N");
  cmd->add_flag(
      "-b,--batch", opts->batch,
      "Print a plain snapshot every interval instead of the live screen (the default when stdout is "
      "not a terminal)");
  cmd->add_flag("--json", opts->json,
                "Batch mode, one JSON object per snapshot per line (a program gilspy launches writes its own "
                "stdout to stderr then, so that stdout stays JSON)");
  cmd->add_flag("--functions", opts->functions,
                "Start in the function view (key f toggles): time by Python function, own and total, held, "
                "waited and (--all-threads) without the GIL, as py-spy's top shows it; in batch mode the "
                "function table follows the threads");
  cmd->add_option("-o,--output-dir", opts->output_dir,
                  "Also write the raw files and Chrome traces (as `gilspy record` does) into this directory");
  return [opts, targets] {
    opts->session = targets->session_options(opts->json);
    return run_top(*opts);
  };
}

}  // namespace gilspy::cli
