#include "cli/target_options.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "base/error.hpp"
#include "cli/commands.hpp"
#include "sampler/counters/perf_counters.hpp"

namespace gilspy::cli {

namespace {

// -r, --cpu-budget, --busy, --exact, --no-realtime and the hidden benchmark knobs: how the poll loop runs.
void add_polling_options(CLI::App& cmd, TargetArgs& a, const std::string& verb) {
  a.rate_option =
      cmd.add_option("-r,--rate", a.rate_hz,
                     "Poll at this fixed rate (polls per second). Without it gilspy polls adaptively: "
                     "10000 Hz around hand-offs and forced switches, down to 500 Hz while the GIL's "
                     "state is steady, within --cpu-budget. 1 to 1000000")
          ->check(number_between(1, 1e6))
          ->type_name("HZ");
  cmd.add_option(
         "--cpu-budget", a.cpu_budget_pct,
         "Adaptive polling: the most CPU gilspy may use, in % of one core; when a target keeps it busy (a "
         "server, threads releasing the GIL all the time) it polls less often around hand-offs instead, "
         "down to one poll every 2 ms (below that 5 ms hand-offs are no longer timed to 1 pp, and gilspy "
         "takes more than the budget); while the polls see under 8 % of the hand-offs (microsecond ones, as "
         "a "
         "server's) it keeps to half the budget, down to one poll every 16 ms. Stack reads count in it: they "
         "may take up to 2 % (half the "
         "budget at most) and what they leave goes to the polls. 0: no limit (stack reads keep 2 %)")
      ->default_val(5.0)
      ->check(number_between(0, 100))
      ->type_name("PERCENT");
  cmd.add_flag("--busy", a.busy,
               "Spin instead of sleeping between polls: the highest rates (100 kHz and more), one core busy");
  auto* exact = cmd.add_flag(
      "--exact", a.exact,
      "Every take and drop of the GIL, exactly: uprobes on the interpreter's take_gil and drop_gil, defined "
      "in "
      "tracefs and read through perf events (no BPF, no toolchain; root, tracefs mounted). Each take and "
      "drop "
      "then costs the target microseconds (~40 on a VM), which the summary measures and states. Needs the "
      "functions' symbols (pyenv and most source builds have them); for a stripped interpreter (Debian's) "
      "gilspy says so and samples instead. The polls go on for threads, stacks and the GC");
  if (verb == "check") exact->group("");  // check always probes: not an option there
  cmd.add_flag(
      "--no-realtime", a.no_realtime,
      "Do not run the poll thread at real-time priority (SCHED_FIFO, lowest level). Without it, a busy "
      "machine makes polls late, right after hand-offs most of all, and the intervals less exact");
  cmd.add_flag(
         "--poller-anywhere", a.anywhere,
         "Let the poll thread run on any CPU, the GIL holder's too (for measuring what placement saves)")
      ->group("");  // hidden: a benchmark knob, not a user setting
  cmd.add_flag("--no-gc", a.no_gc,
               "Do not read the garbage collector's state (for measuring what reading it costs)")
      ->group("");  // hidden: a benchmark knob (bench/cost.py --gc-cost)
}

// --attach-timeout, --strict-version, --any-user and which processes beyond those named.
void add_attach_options(CLI::App& cmd, TargetArgs& a, const std::string& verb) {
  cmd.add_option("--attach-timeout", a.attach_timeout_s,
                 "Seconds to wait for a launched program's interpreter to start")
      ->default_val(10.0)
      ->check(positive_number())
      ->type_name("SECONDS");
  cmd.add_flag(
      "--strict-version", a.strict_version,
      "Refuse a Python newer than gilspy knows, even when its _Py_DebugOffsets read as the newest known");
  cmd.add_flag("--any-user", a.any_user,
               "Not run as root (file capabilities): also " + verb +
                   " other users' processes; without it, only those of gilspy's own user");
  cmd.add_flag("--subprocesses", a.subprocesses,
               "Also " + verb +
                   " the Python processes the targets start, as they appear (multiprocessing and "
                   "DataLoader workers, subprocess)");
  cmd.add_flag(
      "--no-follow", a.no_follow,
      "Without -p or a program: only the Python processes running at the start, not those that start "
      "later");
  cmd.add_flag(
      "--accelerator", a.accelerator,
      "Of the processes found (without -p, or --subprocesses): only those holding an accelerator device "
      "open (/dev/nvidia*, /dev/davinci*, /dev/kfd, /dev/accel/*)");
}

// What is read besides the GIL: stacks and thread names, perf counters.
void add_reading_options(CLI::App& cmd, TargetArgs& a) {
  cmd.add_option(
         "--stack-depth", a.stack_depth,
         "Python frames kept per stack sample, innermost first (default 64); a deeper stack is cut and "
         "marked truncated. 1 to 1024")
      ->check(number_between(1, 1024))
      ->type_name("N");
  cmd.add_flag(
      "--no-stacks", a.no_stacks,
      "Do not read Python stacks or thread names (the holder's stack at each hold, each waiter's when it "
      "starts waiting; threading.Thread.name)");
  cmd.add_flag(
      "--all-threads", a.all_threads,
      "Also read the stacks of threads that neither hold nor wait for the GIL (in C, in I/O, asleep): "
      "each when it lets go and every 100 ms while it stays so, from what the stack budget has left "
      "after holders and waiters. The summary and a trace then show where every thread spends its "
      "time, not only its GIL time");
  cmd.add_option(
         "--counters", a.counters_text,
         "Also count these perf events on every thread, split by GIL role (comma-separated, perf's names: "
         "cycles, instructions, cache-misses, branch-misses, ...; 'all' for everything this machine has). "
         "The software events (task-clock, context-switches, cpu-migrations, page-faults) are always "
         "included; CPU time, run-queue delay and switches are recorded without this option too")
      ->type_name("LIST");
}

std::vector<int> pids_of(const TargetArgs& a) {
  std::vector<int> out;
  if (!a.pid_text.empty()) out = parse_pid_list(a.pid_text);
  for (const int pid : out) require_process_id(pid);
  if (!out.empty() && !a.command.empty()) {
    throw Error(ErrorKind::kUsage, "give either -p PID[,PID...] or a program to launch after --, not both");
  }
  return out;
}

// Which processes the session finds by itself; throws Error(kUsage) for flags that do not fit the targets.
Discover discover_of(const TargetArgs& a) {
  const bool named = a.names_targets();
  if (named && a.no_follow) {
    throw Error(ErrorKind::kUsage, "--no-follow is for recording every Python process (no -p, no program)");
  }
  if (!named && a.subprocesses) {
    throw Error(
        ErrorKind::kUsage,
        "--subprocesses follows the children of -p PID or of a launched program; without either, every "
        "Python process is recorded already");
  }
  if (named && a.accelerator && !a.subprocesses) {
    throw Error(
        ErrorKind::kUsage,
        "--accelerator chooses among the processes gilspy finds (no -p, or --subprocesses), not among "
        "those named");
  }
  if (!named) return Discover::kAllPython;
  return a.subprocesses ? Discover::kDescendants : Discover::kNone;
}

// Adaptive unless -r or --busy; the budget from % of a core to a share.
sampler::PollLoopOptions poll_loop_options_of(const TargetArgs& a) {
  if (a.all_threads && a.no_stacks) {
    throw Error(ErrorKind::kUsage, "--all-threads reads more stacks; it does not go with --no-stacks");
  }
  return {.rate_hz = a.rate_hz,
          .adaptive = a.rate_option->count() == 0 && !a.busy,
          .cpu_budget = a.cpu_budget_pct / 100,
          .placement = !a.anywhere,
          .busy = a.busy,
          .realtime = !a.no_realtime,
          .read_gc = !a.no_gc,
          .exact = a.exact,
          .stacks = {.enabled = !a.no_stacks, .max_depth = a.stack_depth, .all_threads = a.all_threads}};
}

// --counters: the perf counters to count on every thread (empty without the option). Throws Error(kUsage)
// for a name it does not know, listing the valid ones.
std::vector<raw::CounterKind> counters_of(const TargetArgs& a) {
  if (a.counters_text.empty()) return {};
  return sampler::parse_counter_list(a.counters_text);
}

}  // namespace

// A flat list of option definitions, in the order --help shows them, split by group.
void add_target_options(CLI::App& cmd, TargetArgs& a, const std::string& verb) {
  cmd.add_option("-p,--pid", a.pid_text, "Process id(s) to " + verb + ", comma-separated")
      ->type_name("PID[,PID...]");
  add_polling_options(cmd, a, verb);
  add_attach_options(cmd, a, verb);
  add_reading_options(cmd, a);
  cmd.add_option("command", a.command,
                 "Program to launch and " + verb +
                     " (after --). With neither this nor -p: every Python process "
                     "this user may read");
  cmd.positionals_at_end(true);
}

SessionOptions TargetArgs::session_options(bool json_on_stdout) const {
  // In this order, so that of several wrong options the same one is named first as ever: -p, then the
  // flags that do not fit the targets, then --counters.
  SessionOptions o{.pids = pids_of(*this),
                   .command = command,
                   .loop = poll_loop_options_of(*this),
                   .attach_timeout_s = attach_timeout_s,
                   .strict_version = strict_version,
                   .any_user = any_user,
                   .discover = discover_of(*this),
                   .follow = !no_follow,
                   .accelerator_only = accelerator,
                   .note = {},
                   .counters = counters_of(*this),
                   .program_stdout_to_stderr = json_on_stdout};
  // Looking for every Python process, the poll loop keeps going when none is left: another may start.
  o.loop.stop_when_targets_gone = !(o.discover == Discover::kAllPython && o.follow);
  return o;
}

void warn_if_rate_too_high(const sampler::PollLoopOptions& loop) {
  if (!loop.busy && loop.rate_hz > 20000) {
    fmt::print(stderr,
               "gilspy: note: a {:.0f} Hz poll period ({:.0f} us) is shorter than a sleeping timer keeps on "
               "most machines: expect late polls, or use --busy to spin\n",
               loop.rate_hz, 1e6 / loop.rate_hz);
  }
}

}  // namespace gilspy::cli
