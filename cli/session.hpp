#pragma once
// A session: the targets (attached, or one launched program), a sampler per target, the poll loop on its own
// thread, and on the calling thread a Boost.Asio loop (terminating signals, the drain timer) that moves
// records from the poll thread's queue to the sinks. `record` = session + raw-file sink + status line + end
// summary; `top` = session + screen sink.
//
//   Session session(options);        // takes over the terminating signals, attaches (or launches and
//   attaches) session.add_sink(raw_files);     // any number, called in the order added SessionOutcome out =
//   session.run();  // until the duration, a signal, or every target is gone
#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/sink.hpp"
#include "raw/counter_kinds.hpp"
#include "sampler/loop/poll_loop.hpp"

namespace boost::asio {
class io_context;
}

namespace gilspy::cli {

// "SIGHUP" for SIGHUP: how stop reasons and messages name a signal.
std::string signal_name(int sig);

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

// The session's options from a command's (record's, top's), which name the same fields the same way; the
// note callback is left to the command.
template <class CommandOptions>
SessionOptions session_options_of(const CommandOptions& o) {
  return {.pids = o.pids,
          .command = o.command,
          .loop = o.loop,
          .attach_timeout_s = o.attach_timeout_s,
          .strict_version = o.strict_version,
          .any_user = o.any_user,
          .discover = o.discover,
          .follow = o.follow,
          .accelerator_only = o.accelerator_only,
          .note = {},
          .counters = o.counters,
          .program_stdout_to_stderr = o.json};
}

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
