#pragma once
// A session: the targets (attached, or one launched program), a sampler per target, the poll loop on its own
// thread, and on the calling thread a Boost.Asio loop (terminating signals, the drain timer) that moves
// records from the poll thread's queue to the sinks. `record` = session + raw-file sink + status line + end
// summary; `top` = session + screen sink.
//
//   Session session(options);            // takes over the terminating signals, attaches (or launches)
//   session.add_sink(raw_files);         // any number, called in the order added
//   SessionOutcome out = session.run();  // until the duration, a signal, or every target is gone
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/session_options.hpp"
#include "cli/sink.hpp"
#include "sampler/loop/poll_loop.hpp"

namespace boost::asio {
class io_context;
}

namespace gilspy::cli {

// "SIGHUP" for SIGHUP: how stop reasons and messages name a signal.
std::string signal_name(int sig);

// A process that was to be recorded and is not: a pid of several named (-p) that cannot be read (gone, not
// Python, no permission), or one found by the session (refused once). The reason is printable (escaped).
struct SkippedTarget {
  pid_t pid = 0;
  std::string reason;
  bool named = false;  // given with -p (else found)
};

// How a session ended, for the exit policy.
struct SessionOutcome {
  sampler::StopReason reason = sampler::StopReason::kStopped;
  int stop_signal = 0;  // the signal that stopped it (INT, TERM, HUP, QUIT, USR1, USR2, ALRM), else 0
  bool launched = false;
  std::optional<int> child_status;  // launch mode: the program's wait status, once it has been reaped
  double elapsed_s = 0;             // recorded time
  // Targets whose recording ended while the process lives on, one phrase each ("pid 12 exec'd another
  // program (/usr/bin/x)"), printable.
  std::vector<std::string> early_ends;
};

class Session {
 public:
  // Throws Error (no such process, not Python, permission, a program that cannot be run) before anything
  // is recorded. A launched program that never showed an interpreter is terminated.
  explicit Session(SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void add_sink(Sink& sink);  // before run(); the sink outlives the session's run()
  std::vector<const SessionTarget*> targets() const;
  // What was not recorded, in the order it was met (grows while run() finds processes).
  const std::vector<SkippedTarget>& skipped() const;

  // Polls until the duration passes, a terminating signal, request_stop(), or every target is gone; delivers
  // every record; calls every sink's finish() even when polling failed, then rethrows what failed (the drain
  // side's error first).
  SessionOutcome run();

  // The session's Asio loop, for a front end's own handlers (`top`: keys, SIGWINCH). They run on the
  // session's thread between drains. They need not end by themselves: once polling has ended and every record
  // is delivered, run() stops the loop; handlers still pending then never run. Whatever they use must outlive
  // run(); the io_context itself lives as long as the session. An exception from a handler ends the session
  // like a sink's (every sink finished, then rethrown by run()).
  boost::asio::io_context& io_context();
  // From the session's thread while run() runs (a key handler, a sink): stop polling; run() then ends as if
  // stopped (SessionOutcome::reason kStopped, stop_reason "stopped") once the last records are delivered.
  void request_stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gilspy::cli
