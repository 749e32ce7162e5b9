#include "cli/target_options.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "base/error.hpp"
#include "cli/commands.hpp"
#include "sampler/counters/perf_counters.hpp"

namespace gilspy::cli {

void add_target_options(CLI::App& cmd, TargetArgs& a, const std::string& verb) {
  cmd.add_option("-p,--pid", a.pid_text, "Process id(s) to " + verb + ", comma-separated")
      ->type_name("PID[,PID...]");
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
  cmd.add_option(
         "--counters", a.counters_text,
         "Also count these perf events on every thread, split by GIL role (comma-separated, perf's names: "
         "cycles, instructions, cache-misses, branch-misses, ...; 'all' for everything this machine has). "
         "The software events (task-clock, context-switches, cpu-migrations, page-faults) are always "
         "included; CPU time, run-queue delay and switches are recorded without this option too")
      ->type_name("LIST");
  cmd.add_option("command", a.command,
                 "Program to launch and " + verb +
                     " (after --). With neither this nor -p: every Python process "
                     "this user may read");
  cmd.positionals_at_end(true);
}

std::vector<int> TargetArgs::pids() const {
  std::vector<int> out;
  if (!pid_text.empty()) out = parse_pid_list(pid_text);
  for (const int pid : out) require_process_id(pid);
  if (!out.empty() && !command.empty()) {
    throw Error(ErrorKind::kUsage, "give either -p PID[,PID...] or a program to launch after --, not both");
  }
  return out;
}

Discover TargetArgs::discover() const {
  const bool named = !pid_text.empty() || !command.empty();
  if (named && no_follow) {
    throw Error(ErrorKind::kUsage, "--no-follow is for recording every Python process (no -p, no program)");
  }
  if (!named && subprocesses) {
    throw Error(
        ErrorKind::kUsage,
        "--subprocesses follows the children of -p PID or of a launched program; without either, every "
        "Python process is recorded already");
  }
  if (named && accelerator && !subprocesses) {
    throw Error(
        ErrorKind::kUsage,
        "--accelerator chooses among the processes gilspy finds (no -p, or --subprocesses), not among "
        "those named");
  }
  if (!named) return Discover::kAllPython;
  return subprocesses ? Discover::kDescendants : Discover::kNone;
}

sampler::PollLoopOptions TargetArgs::loop() const {
  return {.rate_hz = rate_hz,
          .adaptive = rate_option->count() == 0 && !busy,
          .cpu_budget = cpu_budget_pct / 100,
          .placement = !anywhere,
          .busy = busy,
          .realtime = !no_realtime,
          .read_gc = !no_gc,
          .exact = exact,
          .stacks = {.enabled = !no_stacks, .max_depth = stack_depth}};
}

std::vector<raw::CounterKind> TargetArgs::counters() const {
  if (counters_text.empty()) return {};
  return sampler::parse_counter_list(counters_text);
}

void warn_if_rate_too_high(double rate_hz, bool busy) {
  if (!busy && rate_hz > 20000) {
    fmt::print(stderr,
               "gilspy: note: a {:.0f} Hz poll period ({:.0f} us) is shorter than a sleeping timer keeps on "
               "most machines: expect late polls, or use --busy to spin\n",
               rate_hz, 1e6 / rate_hz);
  }
}

}  // namespace gilspy::cli
