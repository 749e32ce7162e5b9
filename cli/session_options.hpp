#pragma once
// What a session records and how: the processes (pids, a program to launch, or those it finds), how to poll
// them (the poll loop's own options, passed to it as they are) and how to attach. Filled once from the
// command line (target_options.hpp); `record`, `top` and `check` hold it as it is.
#include <functional>
#include <string>
#include <vector>

#include "raw/counter_kinds.hpp"
#include "sampler/loop/poll_loop.hpp"

namespace gilspy::cli {

// Which processes a session finds by itself, beyond the pids given or the program launched.
enum class Discover {
  kNone,
  kAllPython,    // no pids, no program: every Python process this user may read (gilspy's own excluded)
  kDescendants,  // --subprocesses: the targets' descendants that run Python, as they appear
};

struct SessionOptions {
  std::vector<int> pids;
  std::vector<std::string> command;  // launch mode: start this and record it (instead of pids)
  sampler::PollLoopOptions loop;     // rate, duration, busy, realtime, stats tick
  double attach_timeout_s = 10;      // launch mode: how long the program may take to start its interpreter
  bool strict_version = false;       // refuse a Python newer than gilspy knows (else warn and record)
  bool any_user = false;             // not run as root: also other users' processes (check_target_owner())
  Discover discover = Discover::kNone;
  bool follow = true;             // kAllPython: also processes that start later (kDescendants always follows)
  bool accelerator_only = false;  // found processes: only those holding an accelerator device open
  // One line for the user (printable: target text escaped): which processes were found, which were skipped
  // and why. Default: "gilspy: LINE" on stderr.
  std::function<void(const std::string&)> note;
  // perf counters on every thread (`--counters`; empty: the scheduler figures only, which are always read).
  // Those this machine cannot count are named once through `note`; the recording goes on with the rest.
  std::vector<raw::CounterKind> counters;
  // Launch mode: the program's stdout goes to gilspy's stderr, so that what it prints cannot interleave with
  // gilspy's own stdout when that is a stream of JSON lines (--json).
  bool program_stdout_to_stderr = false;
};

}  // namespace gilspy::cli
