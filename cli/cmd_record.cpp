// `gilspy record`: every thread's hold / wait / release timeline into GIL_<pid>_rank_<rank>.json (+ trace).
#include <cstdlib>

#include "base/output_file.hpp"
#include "cli/commands.hpp"
#include "cli/record_session.hpp"
#include "cli/target_options.hpp"

namespace gilspy::cli {

namespace {

// `gilspy record --help` after the options: examples and what the command does (exit status, files).
constexpr const char* kRecordFooter =
    "Examples:\n"
    "  gilspy record -p 1234 -d 10            record a running process for 10 s\n"
    "  gilspy record -p 1234,1240             several processes (e.g. ranks) until Ctrl+C or they exit\n"
    "  gilspy record -- python3 train.py      launch a program and record it until it exits\n"
    "Writes GIL_<pid>_rank_<rank>.json (raw data; rank from the target's RANK, else LOCAL_RANK) and\n"
    "GIL_<pid>_rank_<rank>.trace.json (open in Chrome DevTools: Performance, Load profile; or\n"
    "https://ui.perfetto.dev; or MindStudio Insight) per process. The summary at the end lists the 20\n"
    "busiest threads (--threads N|all).\n"
    "Exit status: 0 when the recording ended as asked (duration reached; Ctrl+C, SIGTERM or the target's\n"
    "exit when no duration was given); in launch mode the program's own exit status; 1 on errors, when "
    "a\n"
    "target exited before the duration and when a pid of -p could not be recorded (the others are); 128+N "
    "when signal N cut a timed recording short; 2 for wrong\n"
    "arguments. The files are complete and valid in every case: SIGHUP (a closed terminal or ssh "
    "session),\n"
    "SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM end a recording like SIGTERM; a closed stdout (| head) only "
    "ends\n"
    "the printing; a disk that fills up is reported at once, events wait in memory (up to 64 MiB) until\n"
    "they can be written, and the summary says how many were lost (still full at the end: exit 1, the\n"
    "summary printed all the same, the .partial holds what fit). Only SIGKILL and a full disk leave\n"
    ".partial files, which 'gilspy convert' still reads.\n"
    "Files are written as GIL_<pid>_rank_<rank>.json.partial, renamed when complete, mode 0600 "
    "(--file-mode).\n"
    "In a folder other users can write to (/tmp), gilspy never writes through or replaces a link, another\n"
    "user's file or a leftover .partial at those names: it says so and stops. A second gilspy recording "
    "the\n"
    "same pid into the same folder is refused.";

}  // namespace

Runner add_record_command(CLI::App& app) {
  auto opts = std::make_shared<RecordOptions>();
  auto targets = std::make_shared<TargetArgs>();
  auto* cmd =
      app.add_subcommand("record",
                         "Record who holds and who waits for the GIL, thread by thread, to a raw file and a "
                         "Chrome trace");
  cmd->footer(kRecordFooter);
  add_target_options(*cmd, *targets, "record");
  auto duration_s = std::make_shared<double>(0);
  cmd->add_option("-d,--duration", *duration_s,
                  "Seconds to record (default: until Ctrl+C or every target has exited)")
      ->check(positive_number())
      ->type_name("SECONDS");
  cmd->add_option("-o,--output-dir", opts->output_dir,
                  "Directory for the output files (default: $GILSPY_OUTPUT_DIR, else the current directory)")
      ->type_name("DIR");
  auto file_mode = std::make_shared<std::string>("0600");
  cmd->add_option(
         "--file-mode", *file_mode,
         "Permissions of the files written, octal (default 0600: they hold the target's command line)")
      ->type_name("MODE");
  cmd->add_flag("--no-trace", opts->no_trace, "Write only the raw file, not the Chrome trace");
  cmd->add_flag("-q,--quiet", opts->quiet, "Print only where the files went, no summary table");
  auto thread_rows = std::make_shared<std::string>("20");
  cmd->add_option("--threads", *thread_rows,
                  "Threads in the end summary's table: the N busiest (hold + wait), or 'all' (default: 20)")
      ->option_text("N|all");
  cmd->add_option("--gc-threshold-ms", opts->gc_threshold_ms,
                  "List the garbage collections that paused N ms or longer in the summary, with their time "
                  "offset and generation (the raw file's summary has them too)")
      ->check(non_negative_number())
      ->type_name("N");
  auto no_status = std::make_shared<bool>(false);
  cmd->add_flag("--no-status", *no_status, "No live status line on the terminal");
  cmd->add_flag("--json", opts->json,
                "Results for programs instead of the summary: JSON lines on stdout, one when recording has "
                "started, one per process found later, and at the end the files and summary per process. A "
                "program gilspy launches writes its own stdout to stderr then, so that stdout stays JSON");
  return [opts, targets, duration_s, no_status, file_mode, thread_rows] {
    opts->file_mode = parse_file_mode_option(*file_mode);
    opts->summary_threads = parse_thread_rows(*thread_rows);
    opts->session = targets->session_options(opts->json);
    opts->session.loop.duration_s = *duration_s;
    opts->status = !*no_status;
    if (opts->output_dir.empty()) {
      const char* env = std::getenv("GILSPY_OUTPUT_DIR");
      opts->output_dir = env != nullptr && *env != '\0' ? env : ".";
    }
    return run_record(*opts);
  };
}

}  // namespace gilspy::cli
