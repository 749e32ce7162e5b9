#include "cli/session.hpp"

#include "cli/version_policy.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sys/stat.h>
#include <atomic>
#include <boost/asio.hpp>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>  // boost 1.74 asio uses std::exchange without including it

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "base/terminal_text.hpp"
#include "cli/counter_setup.hpp"
#include "cli/launch.hpp"
#include "cli/process_discovery.hpp"
#include "sampler/attach.hpp"
#include "sampler/exact/exact_tracer.hpp"
#include "sampler/exact/probe_cost.hpp"
#include "sampler/ns_tids.hpp"
#include "sampler/task_syscall.hpp"

namespace gilspy::cli {

namespace asio = boost::asio;

// What the session keeps per target: what the sinks see, and what polls it. (Outside the anonymous namespace:
// Session::Impl holds it.)
struct RunningTarget {
  SessionTarget info;
  std::unique_ptr<sampler::RemoteMemoryReader> reader;
  sampler::Interpreter interp;
  std::unique_ptr<sampler::ProcTaskStateSource> tasks;
  std::unique_ptr<sampler::ProcessSampler> sampler;
  TargetCounters counters;  // scheduler figures and perf counters per thread (counter_setup.hpp)
};

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

// "MainThread" for the main thread, "thread <tid>" (+ " (<comm>)" when the OS name says more) otherwise.
std::string thread_display_name(int pid, int64_t tid, const std::string& comm,
                                const std::string& process_comm) {
  if (tid == pid) return "MainThread";
  std::string name = "thread " + std::to_string(tid);
  if (!comm.empty() && comm != process_comm) name += " (" + comm + ")";
  return name;
}

raw::ExactFigures exact_figures(const sampler::exact::ExactTracer& x,
                                const std::optional<sampler::exact::ProbeCost>& cost) {
  const auto& c = x.counters();
  return {.on = true,
          .hits = c.hits.load(),
          .lost = c.lost.load(),
          .throttled = c.throttled.load(),
          .takes = c.takes.load(),
          .handoffs = c.handoffs.load(),
          .undecoded = c.undecoded.load(),
          .probe_events = x.probe_events(),
          .probe_points = x.probe_points(),
          .threads_at_start = x.threads_at_start(),
          .take_cost_ns = cost && cost->measured ? cost->take_ns : 0,
          .drop_cost_ns = cost && cost->measured ? cost->drop_ns : 0};
}

constexpr auto kDrainPeriod = std::chrono::milliseconds(50);
// Found processes are looked for every 10 drains (0.5 s): a /proc scan reads a few small files per process.
constexpr int kDiscoverEveryDrains = 10;
// A found process whose interpreter is not ready yet (just started) is tried again at each scan for this
// long.
constexpr int64_t kNotReadyPatienceNs = 10'000'000'000;

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

struct Session::Impl {
  SessionOptions options;
  // Every catchable signal whose default action ends the process is taken over before anything is written,
  // so none can leave a half-written file (closing the terminal or the ssh session sends SIGHUP; `timeout`
  // sends SIGTERM, job schedulers USR1/USR2 or ALRM); they are acted on once run() runs. SIGPIPE is ignored
  // in main(): a closed stdout only ends the printing.
  asio::io_context io;
  asio::signal_set signals{io};
  pid_t child = 0;
  std::optional<int> child_status;
  std::vector<std::unique_ptr<RunningTarget>> targets;
  std::unordered_map<raw::TargetId, RunningTarget*> by_id;
  raw::TargetId next_id = 0;
  std::vector<Sink*> sinks;
  sampler::RecordQueue queue{1 << 18};
  // drain()'s chunk and the index of each thread's last end in it (kept: their capacity is reused).
  std::vector<raw::TargetRecord> drain_batch;
  std::unordered_map<uint64_t, size_t> drain_last_end;
  std::atomic<bool> stop{false};  // read by the poll loop at every tick

  // The session's clock anchors and host, shared by every target, also those found later.
  int64_t anchor_mono = 0, anchor_real = 0;
  std::string hostname;
  // Found processes by process_key(): tried and settled (recorded or refused), never tried again; and those
  // whose interpreter was not ready yet, with when that was first seen.
  std::set<std::string> settled;
  std::map<std::string, int64_t> not_ready_since;
  bool discovery_full = false;  // the poll loop's target table is full: nothing more is added
  std::vector<SkippedTarget> skipped;
  // Declared after `targets`, so that its thread is stopped before the targets' perf groups are destroyed.
  SessionCounters counters;

  bool launch_mode() const { return !options.command.empty(); }
  void note(const std::string& line) const {
    if (options.note) {
      options.note(line);
    } else {
      std::fprintf(stderr, "gilspy: %s\n", line.c_str());
    }
  }
  bool discovering() const {
    return options.discover == Discover::kDescendants ||
           (options.discover == Discover::kAllPython && options.follow);
  }
  RunningTarget& add_target(pid_t pid) {
    auto t = std::make_unique<RunningTarget>();
    t->info.id = next_id++;
    t->info.pid = pid;
    t->reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
    by_id[t->info.id] = t.get();
    targets.push_back(std::move(t));
    return *targets.back();
  }
  void attach();
  void prepare_target(RunningTarget& t);
  void attach_exact(RunningTarget& t);
  // --exact: what a probe hit costs on this machine, measured once, with the first target's probes.
  std::optional<sampler::exact::ProbeCost> probe_cost;
  void drain();
  std::vector<RunningTarget*> discover(bool first_scan);
  RunningTarget* try_found(pid_t pid, const std::string& key, bool first_scan);
};

void Session::Impl::attach() {
  if (launch_mode()) {
    child = launch(options.command, options.program_stdout_to_stderr);
    RunningTarget& t = add_target(child);
    try {
      t.interp =
          attach_launched(child, *t.reader, options.attach_timeout_s, options.command[0], &child_status);
      apply_version_policy(t.interp, options.strict_version);
    } catch (...) {
      if (!child_status) {
        ::kill(child, SIGTERM);
        ::waitpid(child, nullptr, 0);
      }
      throw;
    }
  } else {
    // One pid: its error is the session's. Of several, one that cannot be recorded (gone, not Python, no
    // permission) is named once and skipped, and the others are recorded; when none can be, that is the
    // error.
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
  for (const auto& t : targets) {
    if (const auto key = process_key(t->info.pid)) settled.insert(*key);
  }
}

// One found process: attached and made a target, or refused (said once, never tried again), or left for the
// next scan while its interpreter starts.
RunningTarget* Session::Impl::try_found(pid_t pid, const std::string& key, bool first_scan) {
  auto reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
  sampler::Interpreter interp;
  try {
    check_target_owner(pid, options.any_user);
    interp = sampler::attach(pid, *reader, {.timeout_s = first_scan ? 0.5 : 0.0, .retry_interval_s = 0.01});
    apply_version_policy(interp, options.strict_version);
  } catch (const Error& e) {
    const int64_t now = gilspy::monotonic_ns();
    if (e.kind() == ErrorKind::kNoSuchProcess) {
      settled.insert(key);  // gone already
      return nullptr;
    }
    if (e.kind() == ErrorKind::kNotReady) {
      const auto [it, fresh] = not_ready_since.emplace(key, now);
      if (now - it->second < kNotReadyPatienceNs) return nullptr;
    }
    settled.insert(key);
    not_ready_since.erase(key);
    skipped.push_back({pid, escape_for_terminal(e.what()), false});
    note(fmt::format("pid {} ({}) is not recorded: {}", pid, escape_for_terminal(process_command_line(pid)),
                     escape_for_terminal(e.what())));
    return nullptr;
  }
  settled.insert(key);
  not_ready_since.erase(key);
  RunningTarget& t = add_target(pid);
  t.reader = std::move(reader);
  t.interp = std::move(interp);
  prepare_target(t);
  if (!first_scan) t.info.attached_ns = std::max<int64_t>(0, gilspy::monotonic_ns() - anchor_mono);
  return &t;
}

// Processes found by a /proc scan (every Python process, or the targets' Python descendants) that were not
// tried yet. As non-root, processes of other users are not "the user's" and are passed over without a word.
std::vector<RunningTarget*> Session::Impl::discover(bool first_scan) {
  std::vector<RunningTarget*> found;
  if (discovery_full) return found;
  std::vector<pid_t> candidates;
  if (options.discover == Discover::kAllPython) {
    candidates = python_processes(::getpid());
  } else {
    std::vector<pid_t> roots;
    for (const auto& t : targets) roots.push_back(t->info.pid);
    candidates = python_descendants(roots);
  }
  const uid_t me = ::geteuid();
  for (const pid_t pid : candidates) {
    const auto key = process_key(pid);
    if (!key || settled.contains(*key)) continue;
    if (me != 0) {
      struct stat st {};
      if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0 || st.st_uid != me) {
        settled.insert(*key);
        continue;
      }
    }
    if (options.accelerator_only && !holds_accelerator(pid)) continue;  // it may open one later
    if (targets.size() >= options.loop.max_targets) {
      discovery_full = true;
      note(
          fmt::format("{} processes are recorded, the most one session takes; pid {} and any found later are "
                      "not recorded",
                      targets.size(), pid));
      break;
    }
    if (RunningTarget* t = try_found(pid, *key, first_scan)) {
      found.push_back(t);
      if (!first_scan) {
        note(fmt::format("recording pid {} too (Python {}, found {:.2f} s in): {}", pid,
                         escape_for_terminal(t->interp.binary.version.text()),
                         static_cast<double>(gilspy::monotonic_ns() - anchor_mono) / 1e9,
                         escape_for_terminal(t->info.command)));
      }
    }
  }
  return found;
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

// Records from the poll thread to every sink, on the session's timeline, threads named.
void Session::Impl::drain() {
  // Taken in chunks, so that a thread whose end comes later in the same chunk is known to be gone: its
  // /proc comm is not there to read (a thread-per-request server's threads live a few ms, a drain comes every
  // 50 ms: 99 % of those opens failed), or it names a later thread that reuses the TID.
  constexpr size_t kChunk = 4096;
  auto key = [](raw::TargetId target, int64_t tid) {
    return static_cast<uint64_t>(target) << 32 ^ static_cast<uint32_t>(tid);
  };
  while (true) {
    drain_batch.clear();
    raw::TargetRecord tr;
    while (drain_batch.size() < kChunk && queue.pop(&tr)) drain_batch.push_back(std::move(tr));
    queue.prefault_ahead();  // the poll loop's next slots mapped here, not faulted in there
    drain_last_end.clear();
    for (size_t i = 0; i < drain_batch.size(); ++i) {
      if (const auto* end = std::get_if<raw::ThreadEnd>(&drain_batch[i].record)) {
        drain_last_end[key(drain_batch[i].target, end->tid)] = i;
      }
    }
    auto ends_later = [&](size_t i, int64_t tid) {
      const auto it = drain_last_end.find(key(drain_batch[i].target, tid));
      return it != drain_last_end.end() && it->second > i;
    };
    for (size_t i = 0; i < drain_batch.size(); ++i) {
      raw::TargetRecord& r = drain_batch[i];
      RunningTarget& t = *by_id.at(r.target);
      shift_time(r.record, -t.info.monotonic_ns);
      // The stack records' text (names, frames) is in the sampler's tables, published with the record.
      if (const auto* tables = t.sampler->stack_tables()) tables->fill(r.record);
      if (auto* named = std::get_if<raw::ThreadName>(&r.record);
          named != nullptr && !ends_later(i, named->tid)) {
        // A name the thread gave itself with prctl, which its Python name does not already say, is kept
        // beside it (3.14+ sets the OS name from the Python one, cut to 15 bytes: nothing new then).
        const std::string comm = thread_comm(t.info.pid, named->tid);
        if (!comm.empty() && comm != t.info.process_comm && named->name.rfind(comm, 0) != 0)
          named->os_name = comm;
      }
      if (auto* start = std::get_if<raw::ThreadStart>(&r.record)) {
        const std::string comm =
            ends_later(i, start->tid) ? std::string() : thread_comm(t.info.pid, start->tid);
        start->name = thread_display_name(t.info.pid, start->tid, comm, t.info.process_comm);
      }
      for (Sink* s : sinks) s->record(t.info, r.record);
    }
    if (drain_batch.size() < kChunk) return;
  }
}

Session::Session(SessionOptions options) : impl_(std::make_unique<Impl>()) {
  for (const int sig : kStopSignals) impl_->signals.add(sig);
  impl_->options = std::move(options);
  Impl& m = *impl_;
  // Clock anchors: CLOCK_REALTIME between two CLOCK_MONOTONIC reads.
  const int64_t m0 = gilspy::monotonic_ns();
  m.anchor_real = gilspy::realtime_ns();
  m.anchor_mono = m0 + (gilspy::monotonic_ns() - m0) / 2;
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  m.hostname = hostname;
  m.attach();
  // Each watched thread may keep two /proc files open (sampler/task_file.hpp): a process with a thousand
  // threads needs more than the usual soft limit of 1024 descriptors, and the hard limit is ours to take.
  // Raised only now, so that a launched program starts with the limits it would have had without gilspy.
  if (struct rlimit files; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  m.counters.start(m.options.counters, [&m](const std::string& line) { m.note(line); });
  for (auto& t : m.targets) m.prepare_target(*t);
  if (m.options.discover != Discover::kNone) {
    m.discover(true);
    if (m.options.discover == Discover::kAllPython) {
      if (m.targets.empty() && !m.options.follow) {
        throw Error(ErrorKind::kNotPython, m.options.accelerator_only
                                               ? "no Python process with an accelerator device open was found"
                                               : "no Python process that gilspy may read was found");
      }
      std::string list;
      for (const auto& t : m.targets) {
        list += fmt::format("\n  pid {} rank {}: {}", t->info.pid, t->info.rank,
                            escape_for_terminal(t->info.command));
      }
      m.note(m.targets.empty() ? "no Python process yet; waiting for one (Ctrl+C to stop)"
                               : fmt::format("recording {} Python process{}{}{}", m.targets.size(),
                                             m.targets.size() == 1 ? "" : "es",
                                             m.options.follow ? " (and those that start later)" : "", list));
    }
  }
}

Session::~Session() = default;

void Session::add_sink(Sink& sink) {
  impl_->sinks.push_back(&sink);
}

asio::io_context& Session::io_context() {
  return impl_->io;
}

void Session::request_stop() {
  impl_->stop = true;
}

const std::vector<SkippedTarget>& Session::skipped() const {
  return impl_->skipped;
}

std::vector<const SessionTarget*> Session::targets() const {
  std::vector<const SessionTarget*> out;
  for (const auto& t : impl_->targets) out.push_back(&t->info);
  return out;
}

SessionOutcome Session::run() {
  Impl& m = *impl_;
  for (const auto& t : m.targets) {
    for (Sink* s : m.sinks) s->start(t->info);
    for (Sink* s : m.sinks) s->record(t->info, m.counters.setup_record());
  }

  // The poll loop on its own thread; everything else on this one.
  sampler::PollLoop loop(m.options.loop, m.queue);
  for (const auto& t : m.targets) loop.add(*t->sampler);
  std::atomic<bool>& stop = m.stop;
  std::atomic<bool> loop_done{false};
  sampler::StopReason reason = sampler::StopReason::kStopped;
  std::exception_ptr loop_error;
  std::thread poller([&] {
    try {
      reason = loop.run(stop);
    } catch (...) {
      loop_error = std::current_exception();
    }
    loop_done = true;
  });

  int stop_signal = 0;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        stop_signal = sig;
        stop = true;
        // A terminal's Ctrl+C or Ctrl+\ already reached the launched program (same process group); pass on
        // the rest.
        const bool from_terminal = (sig == SIGINT || sig == SIGQUIT) && ::isatty(STDIN_FILENO);
        if (m.launch_mode() && !m.child_status && !from_terminal) ::kill(m.child, sig);
        m.signals.async_wait(on_signal);  // a second Ctrl+C must not kill us half-way through writing
      };
  m.signals.async_wait(on_signal);

  asio::steady_timer timer(m.io);
  int drains = 0;
  std::function<void(const boost::system::error_code&)> on_timer = [&](const boost::system::error_code&) {
    const bool done = loop_done;  // read before draining: when set, this drain delivers the last records
    m.drain();
    // Processes found while running: the sinks hear of them first, then the poll loop takes them.
    if (!done && !stop && m.discovering() && ++drains % kDiscoverEveryDrains == 0) {
      for (RunningTarget* t : m.discover(false)) {
        for (Sink* s : m.sinks) s->start(t->info);
        for (Sink* s : m.sinks) s->record(t->info, m.counters.setup_record());
        loop.add(*t->sampler);
      }
    }
    const LiveStats live{loop.counters(), m.queue.dropped(), done};
    for (Sink* s : m.sinks) s->stats(live);
    if (done) {
      m.signals.cancel();
      m.io.stop();  // a front end's handlers (keys, SIGWINCH) would keep the loop running
      return;
    }
    timer.expires_after(kDrainPeriod);
    timer.async_wait(on_timer);
  };
  timer.expires_after(kDrainPeriod);
  timer.async_wait(on_timer);
  // Whatever goes wrong on this side, the poll thread is stopped and joined and every sink is finished.
  std::exception_ptr main_error;
  try {
    m.io.run();
  } catch (...) {
    main_error = std::current_exception();
    stop = true;
  }
  poller.join();
  m.drain();
  m.counters.report([&m](const std::string& line) { m.note(line); });

  const auto& lc = loop.counters();
  SessionEnd end;
  end.stop_reason = main_error                                    ? "error"
                    : stop_signal                                 ? signal_name(stop_signal)
                    : reason == sampler::StopReason::kDuration    ? "duration"
                    : reason == sampler::StopReason::kTargetsGone ? "target exited"
                                                                  : "stopped";
  end.end_ns = std::max<int64_t>(0, lc.last_ns.load() - m.anchor_mono);
  for (const auto& t : m.targets) {
    raw::LoopFigures fig;
    fig.ticks = lc.polls.load();
    fig.late = lc.late.load();
    fig.missed = lc.missed.load();
    fig.max_lateness_ns = lc.max_lateness_ns.load();
    fig.p99_lateness_ns = lc.lateness.quantile_ns(0.99);
    fig.poller_scheduling = sampler::to_string(lc.scheduling.load());
    fig.poll_mode = m.options.loop.busy ? "busy" : m.options.loop.adaptive ? "adaptive" : "fixed";
    fig.dense_polls = lc.dense_polls.load();
    fig.placement_moves = lc.placement_moves.load();
    fig.budget_limited = lc.budget_limited.load();
    fig.low_coverage = lc.low_coverage.load();
    const int64_t loop_ns = lc.last_ns.load() - lc.start_ns.load();
    fig.gilspy_cpu_share =
        loop_ns > 0 ? static_cast<double>(lc.cpu_ns.load()) / static_cast<double>(loop_ns) : 0;
    fig.cpu_budget = m.options.loop.cpu_budget_in_force();
    fig.dropped_events = m.queue.dropped();
    fig.unknown_holder_polls = t->sampler->counters().unknown_holder_polls.load();
    fig.impossible_switch_moves = t->sampler->counters().impossible_switch_moves.load();
    fig.walk_period_ns = t->sampler->counters().walk_period_ns.load();
    fig.task_reads = t->sampler->counters().task_reads.load();
    if (t->counters.threads) {  // read after the poll thread was joined
      fig.counter_reads = t->counters.threads->reads();
      fig.switch_reads = t->counters.threads->switch_reads();
    }
    fig.threads_truncated = t->sampler->truncated_threads();
    if (const auto* x = t->sampler->exact()) fig.exact = exact_figures(*x, m.probe_cost);
    // A target that ended by itself says how (exited, exec'd); the others share the session's reason.
    const sampler::TargetEnd cause = t->sampler->end_cause();
    fig.stop_reason = cause == sampler::TargetEnd::kRunning ? end.stop_reason : sampler::to_string(cause);
    end.figures[t->info.id] = fig;
  }
  // Every sink is finished even when an earlier one fails (a status line on a closed terminal must not leave
  // the raw files unfinished); the first failure is rethrown after.
  for (Sink* s : m.sinks) {
    try {
      s->finish(end);
    } catch (...) {
      if (!main_error) main_error = std::current_exception();
    }
  }
  if (main_error) std::rethrow_exception(main_error);
  if (loop_error) std::rethrow_exception(loop_error);

  SessionOutcome out;
  out.reason = reason;
  out.stop_signal = stop_signal;
  out.launched = m.launch_mode();
  out.elapsed_s = static_cast<double>(end.end_ns) / 1e9;
  for (const auto& t : m.targets) {
    const sampler::TargetEnd cause = t->sampler->end_cause();
    if (cause == sampler::TargetEnd::kRunning || cause == sampler::TargetEnd::kExited) continue;
    out.early_ends.push_back(fmt::format(
        "pid {} {}", t->info.pid,
        cause == sampler::TargetEnd::kExeced
            ? "exec'd another program (" + escape_for_terminal(process_executable(t->info.pid)) + ")"
            : "lives on, but its interpreter is gone (finalized)"));
  }
  if (m.launch_mode()) {
    int status = 0;
    if (!m.child_status && ::waitpid(m.child, &status, 0) == m.child) m.child_status = status;
  }
  out.child_status = m.child_status;
  return out;
}

}  // namespace gilspy::cli
