#include "cli/record_session.hpp"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <system_error>

#include "base/error.hpp"
#include "cli/check_cpu_watch.hpp"
#include "cli/check_report.hpp"
#include "cli/child_watch.hpp"
#include "cli/launch.hpp"
#include "cli/raw_sink.hpp"
#include "cli/record_json.hpp"
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
                        signal_name(out.stop_signal), duration_s)};
  }
  if (out.reason == sampler::StopReason::kTargetsGone && duration_s > 0) {
    std::string what = "the target exited";
    if (!out.early_ends.empty()) {
      what.clear();
      for (const auto& e : out.early_ends) what += (what.empty() ? "" : "; ") + e;
    }
    return {1,
            fmt::format("{} after {:.2f} s, before the {:g} s asked; the files hold everything until then{}",
                        what, out.elapsed_s, duration_s,
                        out.early_ends.empty() ? "" : " (to record what runs now, start gilspy again)")};
  }
  if (!out.early_ends.empty()) {
    std::string what;
    for (const auto& e : out.early_ends) what += (what.empty() ? "" : "; ") + e;
    return {0, what + ": its recording ended there (to record what runs now, start gilspy again)"};
  }
  return {0, ""};
}

// gilspy check's report for one target: the sampler's recording against the probes' totals.
void print_check(const FinishedTarget& done, bool json, size_t max_rows, CheckCpuWatch* cpu) {
  std::vector<ExactThreadTotal> exact;
  if (done.target.sampler != nullptr) {
    for (const auto& t : done.target.sampler->exact_totals()) exact.push_back({t.tid, t.hold_ns, t.wait_ns});
  }
  const std::vector<CheckRow> rows = check_rows(done.summary, exact);
  const CheckHeader header{
      .pid = done.target.pid,
      .python_version = done.target.interp->binary.version.text(),
      .seconds = static_cast<double>(done.summary.duration_ns()) / 1e9,
      .figures = &done.figures,
      .cpu = cpu == nullptr
                 ? std::nullopt
                 : cpu->figures(done.target.pid, done.target.monotonic_ns + done.summary.start_ns(),
                                done.target.monotonic_ns + done.summary.end_ns()),
      .cpu_watched = cpu != nullptr};
  const std::string text =
      json ? check_json(header, rows).dump() + "\n" : format_check(header, rows, max_rows);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int run_record(const RecordOptions& o) {
  ensure_output_dir(o.output_dir);
  Session session(o.session);
  // A closed stdout (EPIPE; SIGPIPE is ignored) or a terminal that went away (EIO) ends the printing, not the
  // recording: the files are finished either way.
  bool stdout_gone = false;
  RecordJsonSink json_lines(session);
  RawFileSink files(o.output_dir, !o.no_trace, o.file_mode, [&](const FinishedTarget& done) {
    if (o.check) return print_check(done, o.json, o.summary_threads, o.check_cpu);
    if (o.json) return json_lines.finished_target(done);
    if (stdout_gone) return;
    try {
      print_target_summary(
          done, {.rate_asked = o.session.loop.rate_hz, .quiet = o.quiet, .max_threads = o.summary_threads});
      if (std::fflush(stdout) != 0) stdout_gone = true;
    } catch (const std::system_error&) {
      stdout_gone = true;
    }
  });
  if (o.gc_threshold_ms >= 0) files.set_gc_threshold_ns(static_cast<int64_t>(o.gc_threshold_ms * 1e6));
  StatusLineSink status;
  if (o.status && ::isatty(STDERR_FILENO)) session.add_sink(status);  // first: cleared before the summaries
  session.add_sink(files);
  ChildWatchSink children;
  session.add_sink(children);
  if (o.json && !o.check) session.add_sink(json_lines);

  warn_if_rate_too_high(o.session.loop);
  const SessionOutcome outcome = session.run();
  std::vector<pid_t> recorded;
  for (const SessionTarget* t : session.targets()) recorded.push_back(t->pid);
  const std::string note = unrecorded_children_note(recorded, children.unrecorded(), outcome.launched,
                                                    o.session.discover == Discover::kDescendants);
  if (!note.empty()) std::fprintf(stderr, "%s\n", note.c_str());  // never throws
  ExitDecision exit = exit_policy(outcome, o.session.loop.duration_s);
  // A pid asked for and not recorded (named at the start) is not a recording that ended as asked.
  std::string not_recorded;
  for (const auto& s : session.skipped()) {
    if (s.named) not_recorded += fmt::format("{}pid {}", not_recorded.empty() ? "" : ", ", s.pid);
  }
  if (!not_recorded.empty() && exit.code == 0 && !outcome.launched) {
    exit = {1, fmt::format("{} could not be recorded (said above); the files hold the others", not_recorded)};
  }
  if (!exit.message.empty()) std::fprintf(stderr, "gilspy: %s\n", exit.message.c_str());  // never throws
  if (o.json && !o.check) json_lines.print_finished(exit.code, exit.message, outcome);
  return exit.code;
}

}  // namespace gilspy::cli
