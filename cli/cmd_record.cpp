// `gilspy record`: every thread's hold / wait / release timeline into GIL_<pid>_rank_<rank>.json (+ trace).
#include <cstdlib>

#include "cli/commands.hpp"
#include "cli/record_session.hpp"
#include "cli/target_options.hpp"

namespace gilspy::cli {

Runner add_record_command(CLI::App& app) {
  auto opts = std::make_shared<RecordOptions>();
  auto targets = std::make_shared<TargetArgs>();
  auto* cmd =
      app.add_subcommand("record",
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
      "exit when no duration was given); in launch mode the program's own exit status; 1 on errors and when "
      "a\n"
      "target exited before the duration; 128+N when signal N cut a timed recording short; 2 for wrong\n"
      "arguments. The files are complete and valid in every case: SIGHUP (a closed terminal or ssh session),\n"
      "SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM end a recording like SIGTERM; a closed stdout (| head) only ends\n"
      "the printing. Only SIGKILL leaves .partial files, which 'gilspy convert' still reads.");
  add_target_options(*cmd, *targets, "record");
  cmd->add_option("-d,--duration", opts->loop.duration_s,
                  "Seconds to record (default: until Ctrl+C or every target has exited)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-o,--output-dir", opts->output_dir,
                  "Directory for the output files (default: $GILSPY_OUTPUT_DIR, else the current directory)");
  cmd->add_flag("--no-trace", opts->no_trace, "Write only the raw file, not the Chrome trace");
  cmd->add_flag("-q,--quiet", opts->quiet, "Print only where the files went, no summary table");
  auto no_status = std::make_shared<bool>(false);
  cmd->add_flag("--no-status", *no_status, "No live status line on the terminal");
  return [opts, targets, no_status] {
    opts->pids = targets->pids();
    opts->command = targets->command;
    const double duration_s = opts->loop.duration_s;
    opts->loop = targets->loop();
    opts->loop.duration_s = duration_s;
    opts->attach_timeout_s = targets->attach_timeout_s;
    opts->strict_version = targets->strict_version;
    opts->status = !*no_status;
    if (opts->output_dir.empty()) {
      const char* env = std::getenv("GILSPY_OUTPUT_DIR");
      opts->output_dir = env != nullptr && *env != '\0' ? env : ".";
    }
    return run_record(*opts);
  };
}

}  // namespace gilspy::cli
