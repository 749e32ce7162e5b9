// `gilspy record`: every thread's hold / wait / release timeline into GIL_<pid>_rank_<rank>.json (+ trace).
#include <cstdlib>

#include "cli/commands.hpp"
#include "cli/record_session.hpp"
#include "base/error.hpp"

namespace gilspy::cli {

Runner add_record_command(CLI::App& app) {
  auto opts = std::make_shared<RecordOptions>();
  auto pid_text = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("record",
                                 "Record who holds and who waits for the GIL, thread by thread, to a raw file and a "
                                 "Chrome trace");
  cmd->footer(
      "Examples:\n"
      "  gilspy record -p 1234 -d 10            record a running process for 10 s\n"
      "  gilspy record -p 1234,1240             several processes (e.g. ranks) until Ctrl+C or they exit\n"
      "  gilspy record -- python3 train.py      launch a program and record it until it exits\n"
      "Writes GIL_<pid>_rank_<rank>.json (raw data; rank from the target's RANK variable) and\n"
      "GIL_<pid>_rank_<rank>.trace.json (open in https://ui.perfetto.dev or chrome://tracing) per process.\n"
      "Exit status: 0 when the recording ended as asked (duration reached; Ctrl+C, SIGTERM or the target's\n"
      "exit when no duration was given); in launch mode the program's own exit status; 1 on errors and when a\n"
      "target exited before the duration; 128+N when signal N cut a timed recording short; 2 for wrong\n"
      "arguments. The files are complete and valid in every case.");
  cmd->add_option("-p,--pid", *pid_text, "Process id(s) to record, comma-separated");
  cmd->add_option("-d,--duration", opts->duration_s,
                  "Seconds to record (default: until Ctrl+C or every target has exited)")
      ->check(CLI::PositiveNumber);
  auto* rate = cmd->add_option("-r,--rate", opts->rate_hz,
                               "Poll at this fixed rate (polls per second). Without it gilspy polls adaptively: "
                               "10000 Hz around hand-offs and forced switches, down to 500 Hz while the GIL's "
                               "state is steady")
                   ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--cpu-budget", opts->cpu_budget_pct,
                  "Adaptive polling: the most CPU gilspy may use, in % of one core; when a target keeps "
                  "it busy (a server, threads releasing the GIL all the time) it polls less often around hand-offs "
                  "instead. 0: no limit")
      ->default_val(4.0)
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("-o,--output-dir", opts->output_dir,
                  "Directory for the output files (default: $GILSPY_OUTPUT_DIR, else the current directory)");
  cmd->add_flag("--no-trace", opts->no_trace, "Write only the raw file, not the Chrome trace");
  cmd->add_flag("--busy", opts->busy,
                "Spin instead of sleeping between polls: the highest rates (100 kHz and more), one core busy");
  auto no_realtime = std::make_shared<bool>(false);
  cmd->add_flag("--no-realtime", *no_realtime,
                "Do not run the poll thread at real-time priority (SCHED_FIFO, lowest level). Without it, a busy "
                "machine makes polls late, right after hand-offs most of all, and the intervals less exact");
  auto anywhere = std::make_shared<bool>(false);
  cmd->add_flag("--poller-anywhere", *anywhere,
                "Let the poll thread run on any CPU, the GIL holder's too (for measuring what placement saves)")
      ->group("");  // hidden: a benchmark knob, not a user setting
  cmd->add_flag("-q,--quiet", opts->quiet, "Print only where the files went, no summary table");
  auto no_status = std::make_shared<bool>(false);
  cmd->add_flag("--no-status", *no_status, "No live status line on the terminal");
  cmd->add_option("--attach-timeout", opts->attach_timeout_s,
                  "Seconds to wait for a launched program's interpreter to start")
      ->default_val(10.0)
      ->check(CLI::PositiveNumber);
  cmd->add_option("command", opts->command, "Program to launch and record (after --)");
  cmd->positionals_at_end(true);
  return [opts, pid_text, no_status, no_realtime, rate, anywhere] {
    opts->placement = !*anywhere;
    opts->adaptive = rate->count() == 0 && !opts->busy;
    opts->status = !*no_status;
    opts->realtime = !*no_realtime;
    if (!pid_text->empty()) opts->pids = parse_pid_list(*pid_text);
    if (opts->pids.empty() == opts->command.empty()) {
      throw Error(ErrorKind::kUsage, "give either -p PID[,PID...] or a program to launch after --, not both or "
                                     "neither");
    }
    if (opts->output_dir.empty()) {
      const char* env = std::getenv("GILSPY_OUTPUT_DIR");
      opts->output_dir = env != nullptr && *env != '\0' ? env : ".";
    }
    return run_record(*opts);
  };
}

}  // namespace gilspy::cli
