#include "cli/record_session.hpp"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "base/error.hpp"
#include "cli/child_watch.hpp"
#include "cli/launch.hpp"
#include "cli/raw_sink.hpp"
#include "cli/record_summary.hpp"
#include "cli/session.hpp"
#include "cli/status_sink.hpp"
#include "cli/target_options.hpp"

namespace gilspy::cli {
namespace {

struct ExitDecision {
  int code = 0;
  std::string message;  // for stderr; "" for none
};

// The exit policy of `gilspy record` (see its --help): the program's own status in launch mode; 128+N when
// signal N cut a timed recording short; 1 when a target exited before the duration; 0 otherwise.
ExitDecision exit_policy(const SessionOutcome& out, double duration_s) {
  if (out.launched) return {out.child_status ? exit_status_of(*out.child_status) : 1, ""};
  if (out.stop_signal != 0) {
    if (duration_s <= 0) return {0, ""};
    return {128 + out.stop_signal,
            fmt::format("recording cut short by {} before the {:g} s asked; the files are complete",
                        out.stop_signal == SIGINT ? "SIGINT" : "SIGTERM", duration_s)};
  }
  if (out.reason == sampler::StopReason::kTargetsGone && duration_s > 0) {
    return {
        1, fmt::format("the target exited after {:.2f} s, before the {:g} s asked; the files hold everything "
                       "until then",
                       out.elapsed_s, duration_s)};
  }
  return {0, ""};
}

}  // namespace

int run_record(const RecordOptions& o) {
  ensure_output_dir(o.output_dir);
  Session session(
      {.pids = o.pids,
       .command = o.command,
       .loop = o.loop,
       .attach_timeout_s = o.attach_timeout_s});
  RawFileSink files(o.output_dir, !o.no_trace,
                    [&](const FinishedTarget& done) {
                      print_target_summary(
                          done, {.rate_asked = o.loop.rate_hz, .quiet = o.quiet, .max_threads = o.summary_threads});
                    });
  StatusLineSink status;
  if (o.status && ::isatty(STDERR_FILENO)) session.add_sink(status);  // first: cleared before the summaries
  session.add_sink(files);
  ChildWatchSink children;
  session.add_sink(children);

  warn_if_rate_too_high(o.loop.rate_hz, o.loop.busy);
  const SessionOutcome outcome = session.run();
  std::vector<pid_t> recorded;
  for (const SessionTarget* t : session.targets()) recorded.push_back(t->pid);
  if (const std::string note = unrecorded_children_note(recorded, children.unrecorded(), outcome.launched);
      !note.empty()) {
    fmt::print(stderr, "{}\n", note);
  }
  const ExitDecision exit = exit_policy(outcome, o.loop.duration_s);
  if (!exit.message.empty()) fmt::print(stderr, "gilspy: {}\n", exit.message);
  return exit.code;
}

}  // namespace gilspy::cli
