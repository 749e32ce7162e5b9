#pragma once
// One `gilspy top` run: a session (cli/session.hpp) with its stats tick at the refresh interval, the screen
// sink (cli/screen_sink.hpp), and either the live screen on a terminal (keys, resizing, the terminal always
// put back) or batch snapshots, text or JSON, on stdout.
#include <string>
#include <vector>

#include "cli/session_options.hpp"

namespace gilspy::cli {

struct TopOptions {
  SessionOptions session;   // which processes and how to poll them, as `record` (target_options.hpp)
  double interval_s = 1.0;  // refresh; the poll loop's stats tick is set from it
  int count = 0;            // stop after this many snapshots; 0: until q, a signal or the targets exit
  bool batch = false;       // plain snapshots on stdout (also when stdin or stdout is not a terminal)
  bool json = false;        // one JSON object per snapshot per line (batch)
  bool functions = false;   // start in the function view (key f); batch: the function table after the threads
  std::string output_dir;   // "" for none; else the raw files and traces go there too
};

// Returns the exit code (see `gilspy top --help`).
int run_top(const TopOptions& options);

}  // namespace gilspy::cli
