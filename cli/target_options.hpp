#pragma once
// The options `record` and `top` share: which processes (-p PID[,PID...], a program after --, or with neither
// every Python process; --subprocesses, --no-follow, --accelerator) and how to
// poll them (-r, --cpu-budget, --busy, --no-realtime, the hidden --poller-anywhere, --attach-timeout).
// Defined once, so both commands take the same words and poll the same way: adaptively by default, at a fixed
// rate with -r.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/session.hpp"
#include "raw/counter_kinds.hpp"
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
  std::string counters_text;    // --counters LIST ("" when not given)
  CLI::Option* rate_option = nullptr;

  // After parsing. Throws Error(kUsage) when both -p and a command were given (neither: every Python
  // process).
  std::vector<int> pids() const;
  // Which processes the session finds by itself; throws Error(kUsage) for flags that do not fit the targets.
  Discover discover() const;
  // Rate, adaptive (no -r, no --busy), busy, real-time priority, placement. Duration and stats tick: 0 and 1
  // s.
  sampler::PollLoopOptions loop() const;
  // --counters: the perf counters to count on every thread (empty without the option). Throws Error(kUsage)
  // for a name it does not know, listing the valid ones.
  std::vector<raw::CounterKind> counters() const;
};

// Adds the shared options to `cmd`; `verb` completes the help texts ("record", "watch").
void add_target_options(CLI::App& cmd, TargetArgs& args, const std::string& verb);

// The note printed when a sleeping poll loop is asked for a rate most timers cannot keep.
void warn_if_rate_too_high(double rate_hz, bool busy);

}  // namespace gilspy::cli
