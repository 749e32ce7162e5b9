#pragma once
// One `gilspy record` run: a session (cli/session.hpp: attach or launch, poll, drain) into the raw-file sink
// and the status line, the per-target summary at the end, and the exit policy.
#include <sys/types.h>

#include <string>
#include <vector>

#include "cli/session_options.hpp"

namespace gilspy::cli {

class CheckCpuWatch;

struct RecordOptions {
  SessionOptions
      session;  // which processes, how to poll them (target_options.hpp), for how long (duration_s)
  std::string output_dir;
  mode_t file_mode = 0600;  // of the files written (base/output_file.hpp)
  bool no_trace = false;
  bool quiet = false;
  size_t summary_threads = 20;  // rows of the end summary's thread table; 0: every thread
  bool status = true;           // live status line when stderr is a terminal
  bool json = false;            // machine-readable results on stdout (record_json.hpp) instead of the summary
  double gc_threshold_ms = -1;  // --gc-threshold-ms: list GC collections at least this long (< 0: none)
  bool check = false;           // gilspy check: the check report (check_report.hpp) instead of the summary
  CheckCpuWatch* check_cpu = nullptr;  // check: the target's CPU measured around the window (or none)
};

// Returns the exit code (see `gilspy record --help`).
int run_record(const RecordOptions& options);

}  // namespace gilspy::cli
