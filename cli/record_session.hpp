#pragma once
// One `gilspy record` run: a session (cli/session.hpp: attach or launch, poll, drain) into the raw-file sink and
// the status line, the per-target summary at the end, and the exit policy.
#include <sys/types.h>

#include <string>
#include <vector>

namespace gilspy::cli {

struct RecordOptions {
  std::vector<int> pids;
  std::vector<std::string> command;  // launch mode
  double duration_s = 0;
  double rate_hz = 10000;  // adaptive: the peak rate; fixed: the rate
  bool adaptive = true;    // false when -r or --busy asked for a fixed rate
  double cpu_budget_pct = 4;  // adaptive: the poll thread's CPU budget, % of one core (0: none)
  std::string output_dir;
  bool no_trace = false;
  bool busy = false;
  bool realtime = true;
  bool placement = true;  // keep the poll thread off the GIL holders' CPUs
  bool quiet = false;
  bool status = true;  // live status line when stderr is a terminal
  double attach_timeout_s = 10;
};

// Returns the exit code (see `gilspy record --help`).
int run_record(const RecordOptions& options);

}  // namespace gilspy::cli
