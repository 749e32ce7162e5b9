// The end of a session: the poll loop's and each sampler's figures for the sinks (SessionEnd), every sink
// finished, and how the session ended for the exit policy (SessionOutcome).
#include <sys/wait.h>

#include <fmt/format.h>

#include "base/proc_files.hpp"
#include "base/terminal_text.hpp"
#include "cli/session_impl.hpp"
#include "sampler/exact/exact_tracer.hpp"

namespace gilspy::cli {

namespace {

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

const char* poll_mode_name(const sampler::PollLoopOptions& loop) {
  return loop.busy ? "busy" : loop.adaptive ? "adaptive" : "fixed";
}

}  // namespace

SessionEnd Session::Impl::session_end(const sampler::LoopCounters& lc, const std::string& stop_reason) const {
  SessionEnd end;
  end.stop_reason = stop_reason;
  end.end_ns = std::max<int64_t>(0, lc.last_ns.load() - anchor_mono);
  for (const auto& t : targets) end.figures[t->info.id] = loop_figures(lc, *t, end.stop_reason);
  return end;
}

// One target's figures: the poll loop's, shared by every target, and its own sampler's.
raw::LoopFigures Session::Impl::loop_figures(const sampler::LoopCounters& lc, const RunningTarget& t,
                                             const std::string& stop_reason) const {
  raw::LoopFigures fig;
  fig.ticks = lc.polls.load();
  fig.late = lc.late.load();
  fig.missed = lc.missed.load();
  fig.max_lateness_ns = lc.max_lateness_ns.load();
  fig.p99_lateness_ns = lc.lateness.quantile_ns(0.99);
  fig.poller_scheduling = sampler::to_string(lc.scheduling.load());
  fig.poll_mode = poll_mode_name(options.loop);
  fig.dense_polls = lc.dense_polls.load();
  fig.placement_moves = lc.placement_moves.load();
  fig.budget_limited = lc.budget_limited.load();
  fig.low_coverage = lc.low_coverage.load();
  const int64_t loop_ns = lc.last_ns.load() - lc.start_ns.load();
  fig.gilspy_cpu_share =
      loop_ns > 0 ? static_cast<double>(lc.cpu_ns.load()) / static_cast<double>(loop_ns) : 0;
  fig.cpu_budget = options.loop.cpu_budget_in_force();
  fig.dropped_events = queue.dropped();
  fig.unknown_holder_polls = t.sampler->counters().unknown_holder_polls.load();
  fig.impossible_switch_moves = t.sampler->counters().impossible_switch_moves.load();
  fig.walk_period_ns = t.sampler->counters().walk_period_ns.load();
  fig.task_reads = t.sampler->counters().task_reads.load();
  if (t.counters.threads) {  // read after the poll thread was joined
    fig.counter_reads = t.counters.threads->reads();
    fig.switch_reads = t.counters.threads->switch_reads();
  }
  fig.threads_truncated = t.sampler->truncated_threads();
  if (const auto* x = t.sampler->exact()) fig.exact = exact_figures(*x, probe_cost);
  // A target that ended by itself says how (exited, exec'd); the others share the session's reason.
  const sampler::TargetEnd cause = t.sampler->end_cause();
  fig.stop_reason = cause == sampler::TargetEnd::kRunning ? stop_reason : sampler::to_string(cause);
  return fig;
}

// Every sink is finished even when an earlier one fails (a status line on a closed terminal must not leave
// the raw files unfinished); the first failure is kept in `first_error` unless it holds one already.
void Session::Impl::finish_sinks(const SessionEnd& end, std::exception_ptr& first_error) {
  for (Sink* s : sinks) {
    try {
      s->finish(end);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
}

// After a run that did not fail: targets whose recording ended while they live on, and the launched
// program's wait status (waited for here when it has not ended yet).
SessionOutcome Session::Impl::outcome(sampler::StopReason reason, const SessionEnd& end) {
  SessionOutcome out;
  out.reason = reason;
  out.stop_signal = stop_signal;
  out.launched = launch_mode();
  out.elapsed_s = static_cast<double>(end.end_ns) / 1e9;
  for (const auto& t : targets) {
    const sampler::TargetEnd cause = t->sampler->end_cause();
    if (cause == sampler::TargetEnd::kRunning || cause == sampler::TargetEnd::kExited) continue;
    out.early_ends.push_back(fmt::format(
        "pid {} {}", t->info.pid,
        cause == sampler::TargetEnd::kExeced
            ? "exec'd another program (" + escape_for_terminal(process_executable(t->info.pid)) + ")"
            : "lives on, but its interpreter is gone (finalized)"));
  }
  if (launch_mode()) {
    int status = 0;
    if (!child_status && ::waitpid(child, &status, 0) == child) child_status = status;
  }
  out.child_status = child_status;
  return out;
}

}  // namespace gilspy::cli
