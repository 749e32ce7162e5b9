#include "cli/record_session.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // boost 1.74 asio uses std::exchange without including it
#include <boost/asio.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/record_summary.hpp"
#include "convert/chrome_trace.hpp"
#include "elfutils/error.hpp"
#include "elfutils/proc_maps.hpp"
#include "gilspy_version.hpp"
#include "sampler/attach.hpp"
#include "sampler/poll_loop.hpp"
#include "sampler/process_sampler.hpp"
#include "sampler/raw_format.hpp"
#include "sampler/summary.hpp"

namespace gilspy::cli {
namespace {

namespace asio = boost::asio;
using sampler::Event;
using sampler::EventType;

std::string read_small_file(const std::string& path) { return elf::read_proc_file(path).value_or(""); }

int64_t rank_of(pid_t pid) {
  const std::string env = read_small_file("/proc/" + std::to_string(pid) + "/environ");
  size_t pos = 0;
  while (pos < env.size()) {
    const size_t end = env.find('\0', pos);
    const std::string var = env.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (var.rfind("RANK=", 0) == 0) {
      try {
        return std::stoll(var.substr(5));
      } catch (const std::exception&) {
        return 0;
      }
    }
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return 0;
}

std::string command_line_of(pid_t pid) {
  std::string s = read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

std::string comm_of(pid_t pid, int64_t tid) {
  std::string s = read_small_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

struct Target {
  pid_t pid = 0;
  int64_t rank = 0;
  std::unique_ptr<sampler::RemoteMemoryReader> reader;
  sampler::Interpreter interp;
  std::unique_ptr<sampler::ProcTaskStateSource> tasks;
  std::unique_ptr<sampler::ProcessSampler> sampler;
  std::unique_ptr<raw::Writer> writer;
  raw::SummaryBuilder summary;
  std::string process_comm;
  std::string raw_path, trace_path;
};

// Launch mode: start the program; report an exec failure through a close-on-exec pipe.
pid_t launch(const std::vector<std::string>& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(ErrorKind::kIo, std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw Error(ErrorKind::kIo, std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    const int err = errno;
    (void)!::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  int err = 0;
  const ssize_t n = ::read(fds[0], &err, sizeof err);
  ::close(fds[0]);
  if (n == sizeof err) {
    ::waitpid(child, nullptr, 0);
    throw Error(ErrorKind::kUsage, "cannot run " + command[0] + ": " + std::strerror(err));
  }
  return child;
}

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

sampler::Interpreter attach_launched(pid_t child, sampler::RemoteMemoryReader& reader, double timeout_s,
                                     const std::string& program, std::optional<int>* child_status) {
  const int64_t deadline = sampler::monotonic_ns() + static_cast<int64_t>(timeout_s * 1e9);
  while (true) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      *child_status = status;
      throw Error(ErrorKind::kNoSuchProcess, program + " exited (status " + std::to_string(exit_status_of(status)) +
                                                 ") before its Python interpreter could be found");
    }
    try {
      return sampler::attach(child, reader, {.timeout_s = 0.05, .retry_interval_s = 0.0005, .wait_for_python = true});
    } catch (const Error& e) {
      const bool retry = e.kind() == ErrorKind::kNotPython || e.kind() == ErrorKind::kNotReady ||
                         e.kind() == ErrorKind::kNoSuchProcess || e.kind() == ErrorKind::kBadAddress;
      if (!retry) throw;
      if (sampler::monotonic_ns() >= deadline) {
        throw Error(e.kind(), program + " (pid " + std::to_string(child) + ") did not start a Python interpreter within " +
                                  fmt::format("{:g}", timeout_s) + " s: " + e.what());
      }
    }
  }
}

raw::Record to_record(const Event& e, int64_t anchor) {
  raw::Record r;
  r.tid = e.tid;
  r.ts = e.ts_ns - anchor;
  switch (e.type) {
    case EventType::kThreadStart: r.kind = raw::RecordKind::kThread; r.n = e.a; break;
    case EventType::kThreadEnd: r.kind = raw::RecordKind::kThreadEnd; break;
    case EventType::kHold: r.kind = raw::RecordKind::kHold; r.dur = e.dur_ns; break;
    case EventType::kWait: r.kind = raw::RecordKind::kWait; r.dur = e.dur_ns; break;
    case EventType::kWaiters: r.kind = raw::RecordKind::kWaiters; r.n = e.a; break;
    case EventType::kStats:
      r.kind = raw::RecordKind::kStats;
      r.polls = e.a;
      r.late = e.b;
      r.missed = static_cast<uint64_t>(e.dur_ns);
      r.seen = e.c;
      r.total = e.d;
      break;
  }
  return r;
}

}  // namespace

int run_record(const RecordOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(o.output_dir, ec);
  if (ec || ::access(o.output_dir.c_str(), W_OK | X_OK) != 0) {
    throw Error(ErrorKind::kIo, "cannot write to the output directory " + o.output_dir +
                                    (ec ? ": " + ec.message() : ": permission denied"));
  }
  const bool launch_mode = !o.command.empty();
  // Signals are taken over before anything is written, so no SIGINT/SIGTERM can leave a half-written file;
  // they are acted on once the loop below runs.
  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  pid_t child = 0;
  std::optional<int> child_status;
  std::vector<std::unique_ptr<Target>> targets;

  if (launch_mode) {
    child = launch(o.command);
    auto t = std::make_unique<Target>();
    t->pid = child;
    t->reader = std::make_unique<sampler::RemoteMemoryReader>(child);
    try {
      t->interp = attach_launched(child, *t->reader, o.attach_timeout_s, o.command[0], &child_status);
    } catch (...) {
      if (!child_status) {
        ::kill(child, SIGTERM);
        ::waitpid(child, nullptr, 0);
      }
      throw;
    }
    targets.push_back(std::move(t));
  } else {
    for (const int pid : o.pids) {
      auto t = std::make_unique<Target>();
      t->pid = pid;
      t->reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
      t->interp = sampler::attach(pid, *t->reader, {.timeout_s = 2.0, .retry_interval_s = 0.01});
      targets.push_back(std::move(t));
    }
  }

  // Clock anchors: CLOCK_REALTIME between two CLOCK_MONOTONIC reads.
  const int64_t m0 = sampler::monotonic_ns();
  const int64_t real = sampler::realtime_ns();
  const int64_t anchor = m0 + (sampler::monotonic_ns() - m0) / 2;

  sampler::EventQueue queue(1 << 18);
  std::vector<sampler::ProcessSampler*> samplers;
  char hostname[256] = {};
  ::gethostname(hostname, sizeof hostname - 1);
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = *targets[i];
    t.rank = rank_of(t.pid);
    t.process_comm = comm_of(t.pid, t.pid);
    const std::string base = fmt::format("{}/GIL_{}_rank_{}", o.output_dir, t.pid, t.rank);
    t.raw_path = base + ".json";
    t.trace_path = base + ".trace.json";
    raw::Meta meta;
    meta.gilspy_version = kGilspyVersion;
    meta.pid = t.pid;
    meta.rank = t.rank;
    meta.python_version = t.interp.binary.version.text();
    meta.python_binary = t.interp.binary.path;
    meta.build = t.interp.binary.shared_library ? "shared" : "static";
    meta.free_threaded = t.interp.layout.free_threaded;
    meta.command = launch_mode ? "" : command_line_of(t.pid);
    if (launch_mode) {
      for (const auto& a : o.command) meta.command += (meta.command.empty() ? "" : " ") + a;
    }
    meta.hostname = hostname;
    meta.monotonic_ns = anchor;
    meta.realtime_ns = real;
    meta.rate_hz = o.rate_hz;
    meta.switch_interval_us = t.interp.first_gil.interval_us;
    meta.gil_addr = t.interp.gil_addr;
    t.writer = std::make_unique<raw::Writer>(t.raw_path, meta);
    t.tasks = std::make_unique<sampler::ProcTaskStateSource>(t.pid, t.interp.gil_addr, t.interp.layout.gil);
    t.sampler = std::make_unique<sampler::ProcessSampler>(t.interp, *t.reader, *t.tasks, queue,
                                                          static_cast<uint16_t>(i));
    samplers.push_back(t.sampler.get());
  }

  if (!o.busy && o.rate_hz > 20000) {
    fmt::print(stderr, "gilspy: note: a {:.0f} Hz poll period ({:.0f} us) is shorter than a sleeping timer keeps on "
                       "most machines: expect late polls, or use --busy to spin\n",
               o.rate_hz, 1e6 / o.rate_hz);
  }
  // The poll loop on its own thread; everything else on this one.
  sampler::PollLoop loop(
      {.rate_hz = o.rate_hz, .adaptive = o.adaptive && !o.busy, .placement = o.placement, .duration_s = o.duration_s, .busy = o.busy,
       .realtime = o.realtime},
      queue);
  std::atomic<bool> stop{false};
  std::atomic<bool> loop_done{false};
  sampler::StopReason reason = sampler::StopReason::kStopped;
  std::exception_ptr loop_error;
  std::thread poller([&] {
    try {
      reason = loop.run(samplers, stop);
    } catch (...) {
      loop_error = std::current_exception();
    }
    loop_done = true;
  });

  int stop_signal = 0;
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                               int sig) {
    if (ec) return;
    stop_signal = sig;
    stop = true;
    // A terminal's Ctrl+C already reached the launched program (same process group); pass on the rest.
    if (launch_mode && !child_status && (sig != SIGINT || !::isatty(STDIN_FILENO))) ::kill(child, sig);
    signals.async_wait(on_signal);  // a second Ctrl+C must not kill us half-way through writing
  };
  signals.async_wait(on_signal);

  const bool show_status = o.status && ::isatty(STDERR_FILENO);
  auto drain = [&] {
    Event e;
    while (queue.pop(&e)) {
      Target& t = *targets[e.process];
      raw::Record r = to_record(e, anchor);
      if (r.kind == raw::RecordKind::kThread) r.name = thread_display_name(t.pid, r.tid, comm_of(t.pid, r.tid), t.process_comm);
      t.summary.add(r);
      t.writer->write(r);
    }
    for (auto& t : targets) t->writer->flush();
  };
  asio::steady_timer timer(io);
  int ticks = 0;
  std::function<void(const boost::system::error_code&)> on_timer = [&](const boost::system::error_code&) {
    drain();
    if (show_status && ++ticks % 5 == 0) print_status_line(loop.counters(), samplers);
    if (loop_done) {
      signals.cancel();
      return;
    }
    timer.expires_after(std::chrono::milliseconds(50));
    timer.async_wait(on_timer);
  };
  timer.expires_after(std::chrono::milliseconds(50));
  timer.async_wait(on_timer);
  // Whatever goes wrong on this side, the poll thread is stopped and joined and every file is finished.
  std::exception_ptr main_error;
  try {
    io.run();
  } catch (...) {
    main_error = std::current_exception();
    stop = true;
  }
  poller.join();
  drain();
  if (show_status) clear_status_line();

  // Finish every file, even when the loop failed: what was recorded stays readable.
  const auto& lc = loop.counters();
  for (auto& t : targets) {
    raw::LoopFigures fig;
    fig.ticks = lc.polls.load();
    fig.late = lc.late.load();
    fig.missed = lc.missed.load();
    fig.max_lateness_ns = lc.max_lateness_ns.load();
    fig.poller_scheduling = sampler::to_string(lc.scheduling.load());
    fig.poll_mode = o.busy ? "busy" : o.adaptive ? "adaptive" : "fixed";
    fig.dense_polls = lc.dense_polls.load();
    fig.placement_moves = lc.placement_moves.load();
    fig.dropped_events = queue.dropped();
    fig.unknown_holder_polls = t->sampler->counters().unknown_holder_polls.load();
    fig.task_reads = t->sampler->counters().task_reads.load();
    fig.threads_truncated = t->sampler->truncated_threads();
    fig.stop_reason = main_error  ? "error"
                      : stop_signal ? (stop_signal == SIGINT ? "SIGINT" : "SIGTERM")
                      : reason == sampler::StopReason::kDuration ? "duration"
                      : reason == sampler::StopReason::kTargetsGone ? "target exited"
                                                                     : "stopped";
    t->summary.set_end(lc.last_ns.load() - anchor);
    t->writer->finish(t->summary.to_json(o.rate_hz, fig));
    if (!o.no_trace) convert::convert_to_chrome_trace({t->raw_path}, t->trace_path);
    print_target_summary(*t->writer, t->pid, t->rank, t->interp.binary.version.text(), t->raw_path,
                         o.no_trace ? "" : t->trace_path, t->summary, fig, o.rate_hz, o.quiet);
  }
  if (main_error) std::rethrow_exception(main_error);
  if (loop_error) std::rethrow_exception(loop_error);

  if (launch_mode) {
    int status = 0;
    if (!child_status && ::waitpid(child, &status, 0) == child) child_status = status;
    return child_status ? exit_status_of(*child_status) : 1;
  }
  if (stop_signal != 0) {
    if (o.duration_s > 0) {
      fmt::print(stderr, "gilspy: recording cut short by {} before the {:g} s asked; the files are complete\n",
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM", o.duration_s);
      return 128 + stop_signal;
    }
    return 0;
  }
  if (reason == sampler::StopReason::kTargetsGone && o.duration_s > 0) {
    fmt::print(stderr, "gilspy: the target exited after {:.2f} s, before the {:g} s asked; the files hold everything "
                       "until then\n",
               static_cast<double>(lc.last_ns.load() - anchor) / 1e9, o.duration_s);
    return 1;
  }
  return 0;
}

}  // namespace gilspy::cli
