// A session's targets named on the command line (-p) or launched (after --), and what each target gets: its
// sink-facing description, its sampler, --exact's probes, its counters.
#include <signal.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "base/terminal_text.hpp"
#include "cli/launch.hpp"
#include "cli/process_discovery.hpp"
#include "cli/session_impl.hpp"
#include "cli/version_policy.hpp"
#include "sampler/exact/exact_tracer.hpp"
#include "sampler/proc/ns_tids.hpp"
#include "sampler/target/attach.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::cli {

namespace {

// The target's RANK, else its LOCAL_RANK (launchers that set only that one), else 0.
int64_t rank_of(pid_t pid) {
  for (const char* name : {"RANK", "LOCAL_RANK"}) {
    const auto value = process_env_var(pid, name);
    if (!value) continue;
    try {
      return std::stoll(*value);
    } catch (const std::exception&) {
      continue;  // not a number: as if unset
    }
  }
  return 0;
}

// The target's pid in its own PID namespace (the last number of NSpid), when that is not ours; else 0.
int64_t namespace_pid_of(pid_t pid) {
  const auto status = read_proc_file("/proc/" + std::to_string(pid) + "/status");
  const int32_t ns = status ? sampler::innermost_nspid(*status) : 0;
  return ns != 0 && ns != pid ? ns : 0;
}

}  // namespace

RunningTarget& Session::Impl::add_target(pid_t pid) {
  auto t = std::make_unique<RunningTarget>();
  t->info.id = next_id++;
  t->info.pid = pid;
  t->reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
  by_id[t->info.id] = t.get();
  targets.push_back(std::move(t));
  return *targets.back();
}

void Session::Impl::attach() {
  if (launch_mode()) {
    launch_and_attach();
  } else {
    attach_pids();
  }
  for (const auto& t : targets) {
    if (const auto key = process_key(t->info.pid)) settled.insert(*key);
  }
}

void Session::Impl::launch_and_attach() {
  child = launch(options.command, options.program_stdout_to_stderr);
  RunningTarget& t = add_target(child);
  try {
    t.interp = attach_launched(child, *t.reader, options.attach_timeout_s, options.command[0], &child_status);
    apply_version_policy(t.interp, options.strict_version);
  } catch (...) {
    if (!child_status) {
      ::kill(child, SIGTERM);
      ::waitpid(child, nullptr, 0);
    }
    throw;
  }
}

// One pid: its error is the session's. Of several, one that cannot be recorded (gone, not Python, no
// permission) is named once and skipped, and the others are recorded; when none can be, that is the error.
void Session::Impl::attach_pids() {
  std::vector<std::pair<int, Error>> failed;
  for (const int pid : options.pids) {
    auto reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
    sampler::Interpreter interp;
    try {
      check_target_owner(pid, options.any_user);
      interp = sampler::attach(pid, *reader, {.timeout_s = 2.0, .retry_interval_s = 0.01});
      apply_version_policy(interp, options.strict_version);
    } catch (const Error& e) {
      if (options.pids.size() == 1) throw;
      failed.emplace_back(pid, e);
      continue;
    }
    RunningTarget& t = add_target(pid);
    t.reader = std::move(reader);
    t.interp = std::move(interp);
  }
  if (!failed.empty() && targets.empty()) {
    std::string why;
    for (const auto& [pid, e] : failed)
      why += fmt::format("{}pid {}: {}", why.empty() ? "" : "; ", pid, e.what());
    throw Error(failed.front().second.kind(), "none of the pids given can be recorded: " + why);
  }
  for (const auto& [pid, e] : failed) {
    skipped.push_back({pid, escape_for_terminal(e.what()), true});
    note(fmt::format("pid {} is not recorded: {}; the others are", pid, escape_for_terminal(e.what())));
  }
}

// Everything a sink is told about a target, and its sampler.
void Session::Impl::prepare_target(RunningTarget& t) {
  SessionTarget& i = t.info;
  i.rank = rank_of(i.pid);
  i.ns_pid = namespace_pid_of(i.pid);
  i.process_comm = thread_comm(i.pid, i.pid);
  if (launch_mode() && i.pid == child) {
    for (const auto& a : options.command) i.command += (i.command.empty() ? "" : " ") + a;
  } else {
    i.command = process_command_line(i.pid);
  }
  i.interp = &t.interp;
  i.monotonic_ns = anchor_mono;
  i.realtime_ns = anchor_real;
  i.rate_hz = options.loop.rate_hz;
  i.hostname = hostname;
  t.tasks = std::make_unique<sampler::ProcTaskStateSource>(i.pid, t.interp.gil_addr, t.interp.layout.gil);
  sampler::SamplerOptions sampler_options;
  sampler_options.read_gc = options.loop.read_gc;
  sampler_options.stacks = options.loop.stacks;
  if (sampler_options.stacks.enabled && !t.interp.stack_layout.known) {
    note(fmt::format("pid {}: Python stacks and thread names are not read: {}", i.pid,
                     escape_for_terminal(t.interp.stack_problem)));
  }
  const uint64_t interval_us = t.interp.first_gil.interval_us;
  if (interval_us == 0 || interval_us > 100'000'000) {
    note(fmt::format("pid {}: the GIL's switch interval is {} µs (sys.setswitchinterval): {}", i.pid,
                     interval_us,
                     interval_us == 0 ? "below 1 µs, a waiting thread asks the holder to let go at once"
                                      : "a waiting thread asks the holder to let go only that often"));
  }
  t.sampler =
      std::make_unique<sampler::ProcessSampler>(t.interp, *t.reader, *t.tasks, queue, i.id, sampler_options);
  i.sampler = t.sampler.get();
  if (options.loop.exact) attach_exact(t);
  counters.attach(t.counters, *t.sampler, i.pid, queue, i.id);
}

// --exact where it can work; where it cannot (a stripped interpreter, no permission, no uprobe PMU), one line
// and the sampler records this target as without it.
void Session::Impl::attach_exact(RunningTarget& t) {
  try {
    // Measured before the probes go in: until the poll loop runs, nobody reads their rings.
    if (!probe_cost) probe_cost = sampler::exact::measure_probe_cost(sampler::exact::find_tracefs());
    auto tracer = std::make_unique<sampler::exact::ExactTracer>(t.info.pid, t.interp.binary,
                                                                sampler::ThreadWalker::kMaxThreads);
    // Its holds and waits begin when the probes were in: so does its recording (placing them takes a while).
    t.info.attached_ns = std::max(t.info.attached_ns, std::max<int64_t>(0, tracer->start_ns() - anchor_mono));
    t.sampler->set_exact(std::move(tracer), options.loop.exact_shadow);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnavailable) throw;
    if (options.loop.exact_shadow) {  // gilspy check has nothing to check against
      throw Error(
          ErrorKind::kUnavailable,
          fmt::format("pid {}: cannot check the sampler: --exact is not possible: {}", t.info.pid, e.what()));
    }
    note(fmt::format("pid {}: --exact is not possible: {}; recording it by sampling instead", t.info.pid,
                     escape_for_terminal(e.what())));
  }
}

}  // namespace gilspy::cli
