#pragma once
// The options `record`, `top` and `check` share: which processes (-p PID[,PID...], a program after --, or
// with neither every Python process; --subprocesses, --no-follow, --accelerator) and how to poll them (-r,
// --cpu-budget, --busy, --no-realtime, the hidden --poller-anywhere, --attach-timeout). Defined once, so
// every command takes the same words and polls the same way: adaptively by default, at a fixed rate with -r.
// CLI11 fills TargetArgs; session_options() turns it into the SessionOptions the command passes on as is.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/session_options.hpp"
#include "sampler/loop/poll_loop.hpp"

namespace gilspy::cli {

struct TargetArgs {
  // Filled by CLI11 while parsing:
  std::string pid_text;
  std::vector<std::string> command;
  double rate_hz = 10000;
  double cpu_budget_pct = 5;  // adaptive: gilspy's CPU budget, stack reads included, % of a core (0: none)
  bool busy = false;
  bool exact = false;  // --exact: holds and waits from uprobes on take_gil / drop_gil
  bool no_realtime = false;
  bool anywhere = false;
  double attach_timeout_s = 10;
  bool strict_version = false;  // refuse a Python newer than gilspy knows instead of warning
  bool any_user = false;        // not run as root: other users' processes too
  bool subprocesses = false;    // also the targets' Python descendants, as they appear
  bool no_follow = false;       // every-Python-process mode: only those running at the start
  bool accelerator = false;     // found processes: only those holding an accelerator device open
  bool no_gc = false;           // hidden --no-gc: do not read the GC state (a benchmark knob)
  int stack_depth = 64;         // innermost Python frames kept per stack sample
  bool no_stacks = false;       // neither stacks nor Python thread names
  bool all_threads = false;     // also the stacks of threads that neither hold nor wait
  std::string counters_text;    // --counters LIST ("" when not given)
  CLI::Option* rate_option = nullptr;

  // After parsing: -p PID[,PID...] or a program was given (with neither: every Python process).
  bool names_targets() const { return !pid_text.empty() || !command.empty(); }
  // After parsing, the session's options: the one place that turns these words into settings (the pids, the
  // processes found, adaptive or fixed rate, the budget as a share, ...). Duration 0, stats tick 1 s: the
  // command sets its own. `json_on_stdout`: the command prints JSON lines (its --json). Throws
  // Error(kUsage) for -p with a program, flags that do not fit the targets, an unknown --counters name.
  SessionOptions session_options(bool json_on_stdout) const;
};

// Adds the shared options to `cmd`; `verb` completes the help texts ("record", "watch").
void add_target_options(CLI::App& cmd, TargetArgs& args, const std::string& verb);

// The note printed when a sleeping poll loop is asked for a rate most timers cannot keep.
void warn_if_rate_too_high(const sampler::PollLoopOptions& loop);

}  // namespace gilspy::cli
