#pragma once
// One `gilspy top` run: a session (cli/session.hpp) with its stats tick at the refresh interval, the screen
// sink (cli/screen_sink.hpp), and either the live screen on a terminal (keys, resizing, the terminal always
// put back) or batch snapshots, text or JSON, on stdout.
#include <string>
#include <vector>

#include "sampler/loop/poll_loop.hpp"

#include "cli/session.hpp"

namespace gilspy::cli {

struct TopOptions {
  std::vector<int> pids;
  std::vector<std::string> command;  // launch mode
  sampler::PollLoopOptions loop;     // rate and mode as `record`; the stats tick is set from interval_s
  double attach_timeout_s = 10;
  bool strict_version = false;
  bool any_user = false;
  Discover discover = Discover::kNone;  // processes the session finds by itself (session.hpp)
  bool follow = true;
  bool accelerator_only = false;
  double interval_s = 1.0;  // refresh
  int count = 0;            // stop after this many snapshots; 0: until q, a signal or the targets exit
  bool batch = false;       // plain snapshots on stdout (also when stdin or stdout is not a terminal)
  bool json = false;        // one JSON object per snapshot per line (batch)
  std::string output_dir;   // "" for none; else the raw files and traces go there too
  std::vector<raw::CounterKind> counters;  // --counters (session.hpp); batch output then adds the CPU table
};

// Returns the exit code (see `gilspy top --help`).
int run_top(const TopOptions& options);

}  // namespace gilspy::cli
