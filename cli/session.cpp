// A session's life: the constructor attaches (or launches) and prepares every target; run() puts the poll
// loop on its own thread and runs the Asio loop on this one (terminating signals, the drain timer) until
// polling has ended and every record is delivered, then finishes the sinks (session_end.cpp).
#include "cli/session.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <thread>

#include "base/clock.hpp"
#include "cli/session_impl.hpp"

namespace gilspy::cli {

namespace asio = boost::asio;

namespace {

constexpr auto kDrainPeriod = std::chrono::milliseconds(50);
// Found processes are looked for every 10 drains (0.5 s): a /proc scan reads a few small files per process.

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};

// Each watched thread may keep two /proc files open (sampler/task_file.hpp): a process with a thousand
// threads needs more than the usual soft limit of 1024 descriptors, and the hard limit is ours to take.
void raise_open_file_limit() {
  if (struct rlimit files; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
}

std::string stop_reason_text(bool failed, int stop_signal, sampler::StopReason reason) {
  return failed                                        ? "error"
         : stop_signal                                 ? signal_name(stop_signal)
         : reason == sampler::StopReason::kDuration    ? "duration"
         : reason == sampler::StopReason::kTargetsGone ? "target exited"
                                                       : "stopped";
}

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

Session::Session(SessionOptions options) : impl_(std::make_unique<Impl>()) {
  for (const int sig : kStopSignals) impl_->signals.add(sig);
  impl_->options = std::move(options);
  Impl& m = *impl_;
  m.anchor_clocks();
  // Subscribed before anything starts: a launched program's first children fork while it is attached to.
  if (m.options.discover == Discover::kDescendants) m.proc_events.open();
  m.attach();
  // Raised only now, so that a launched program starts with the limits it would have had without gilspy.
  raise_open_file_limit();
  m.counters.start(m.options.counters, [&m](const std::string& line) { m.note(line); });
  for (auto& t : m.targets) m.prepare_target(*t);
  if (m.options.discover != Discover::kNone) m.discover_at_start();
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
  for (const auto& t : m.targets) m.start_in_sinks(*t);
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
  m.wait_for_stop_signal();
  asio::steady_timer timer(m.io);
  m.drain_after_period(timer, loop, loop_done);
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
  m.note_children_missed();
  const SessionEnd end =
      m.session_end(loop.counters(), stop_reason_text(main_error != nullptr, m.stop_signal, reason));
  m.finish_sinks(end, main_error);  // the first failure is rethrown after
  if (main_error) std::rethrow_exception(main_error);
  if (loop_error) std::rethrow_exception(loop_error);
  return m.outcome(reason, end);
}

// Clock anchors (CLOCK_REALTIME between two CLOCK_MONOTONIC reads) and the host name, for every target.
void Session::Impl::anchor_clocks() {
  const int64_t m0 = gilspy::monotonic_ns();
  anchor_real = gilspy::realtime_ns();
  anchor_mono = m0 + (gilspy::monotonic_ns() - m0) / 2;
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  hostname = name;
}

void Session::Impl::start_in_sinks(const RunningTarget& t) {
  for (Sink* s : sinks) s->start(t.info);
  for (Sink* s : sinks) s->record(t.info, counters.setup_record());
}

void Session::Impl::wait_for_stop_signal() {
  signals.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    stop_signal = sig;
    stop = true;
    // A terminal's Ctrl+C or Ctrl+\ already reached the launched program (same process group); pass on the
    // rest.
    const bool from_terminal = (sig == SIGINT || sig == SIGQUIT) && ::isatty(STDIN_FILENO);
    if (launch_mode() && !child_status && !from_terminal) ::kill(child, sig);
    wait_for_stop_signal();  // a second Ctrl+C must not kill us half-way through writing
  });
}

void Session::Impl::drain_after_period(asio::steady_timer& timer, sampler::PollLoop& loop,
                                       const std::atomic<bool>& loop_done) {
  timer.expires_after(kDrainPeriod);
  timer.async_wait([this, &timer, &loop, &loop_done](const boost::system::error_code&) {
    const bool done = loop_done;  // read before draining: when set, this drain delivers the last records
    drain();
    // Processes found while running: the sinks hear of them first, then the poll loop takes them.
    if (!done && !stop && discovering()) {
      for (RunningTarget* t : discover_while_running()) {
        start_in_sinks(*t);
        loop.add(*t->sampler);
      }
    }
    const LiveStats live{loop.counters(), queue.dropped(), done};
    for (Sink* s : sinks) s->stats(live);
    if (done) {
      signals.cancel();
      io.stop();  // a front end's handlers (keys, SIGWINCH) would keep the loop running
      return;
    }
    drain_after_period(timer, loop, loop_done);
  });
}

}  // namespace gilspy::cli
