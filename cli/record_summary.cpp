#include "cli/record_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <fmt/format.h>

#include "base/terminal_text.hpp"
#include "cli/counter_table.hpp"
#include "cli/gc_summary_lines.hpp"
#include "cli/stack_summary_text.hpp"
#include "cli/summary_table.hpp"
#include "cli/summary_text.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::cli {

namespace {

// Past this share of late wake-ups, the intervals' edges are blurred often enough to say so.
constexpr double kLateShareForAdvice = 0.10;
constexpr uint64_t kMinTicksForAdvice = 100;  // a handful of wake-ups says nothing about the machine
// "84 us", "2.1 ms", "1.20 s": a lateness at the scale it has.
std::string span(int64_t ns) {
  if (ns < 1'000'000) return fmt::format("{} us", (ns + 500) / 1000);
  if (ns < 1'000'000'000) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
  return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
}

// How often the polls came: adaptive (on average, around hand-offs, what the CPU budget slowed) or fixed.
void poll_rate_line(std::string& out, const SummaryInput& in, const SummaryOptions& o) {
  const raw::LoopFigures& loop = in.loop;
  const double seconds = static_cast<double>(in.summary.duration_ns()) / 1e9;
  const uint64_t polls = in.summary.polls();
  const double mean_rate = seconds > 0 ? static_cast<double>(polls) / seconds : 0.0;
  // Dense, budget-limited and low-coverage polls are the poll loop's, shared by every target: a share of its
  // wake-ups, not of this target's polls (a child recorded for part of the session has fewer).
  const double loop_polls = static_cast<double>(std::max<uint64_t>(1, loop.ticks > 0 ? loop.ticks : polls));
  if (loop.poll_mode == "adaptive") {
    fmt::format_to(
        std::back_inserter(out),
        "  polls: {} in {:.2f} s, adaptive: {:.0f} Hz on average, {:.0f} Hz around hand-offs for {:.0f} % "
        "of them{}; poll thread {}\n",
        polls, seconds, mean_rate, o.rate_asked,
        percent_of(static_cast<double>(loop.dense_polls), loop_polls),
        loop.budget_limited > 0
            ? fmt::format(" (the CPU budget slowed {:.0f} %{})",
                          percent_of(static_cast<double>(loop.budget_limited), loop_polls),
                          loop.low_coverage > 0
                              ? fmt::format(", {:.0f} % at half the budget, up to 16 ms apart: most "
                                            "hand-offs were too short to see",
                                            percent_of(static_cast<double>(loop.low_coverage), loop_polls))
                              : "")
            : "",
        loop.poller_scheduling);
  } else {
    fmt::format_to(std::back_inserter(out),
                   "  polls: {} in {:.2f} s at {:.0f} Hz ({} rate {:.0f} asked); poll thread {}\n", polls,
                   seconds, mean_rate, loop.poll_mode.empty() ? "unknown" : loop.poll_mode, o.rate_asked,
                   loop.poller_scheduling);
  }
}

// What gilspy itself took, against --cpu-budget: a budget the polls cannot keep to at their slowest (many
// threads on a slow machine) is said, with what else costs.
void gilspy_cpu_line(std::string& out, const raw::LoopFigures& loop) {
  if (loop.gilspy_cpu_share <= 0) return;
  const bool over = loop.cpu_budget > 0 && loop.gilspy_cpu_share > 1.1 * loop.cpu_budget;
  fmt::format_to(std::back_inserter(out), "  gilspy's CPU: {:.1f} % of a core while recording{}\n",
                 100 * loop.gilspy_cpu_share,
                 loop.cpu_budget <= 0 ? ""
                 : over ? fmt::format(" (--cpu-budget {:.3g} %: over it; polls at their slowest and stack "
                                      "reads cost more on this target; --no-stacks saves up to 2 %)",
                                      100 * loop.cpu_budget)
                        : fmt::format(" (--cpu-budget {:.3g} %)", 100 * loop.cpu_budget));
}

// Late polls are the poll loop's: its wake-ups (ticks) are their denominator, not this target's polls (a
// target that exits or joins late has fewer). Advice when too many came late.
void late_polls_lines(std::string& out, const SummaryInput& in, const SummaryOptions& o) {
  const raw::LoopFigures& loop = in.loop;
  const uint64_t ticks = loop.ticks > 0 ? loop.ticks : in.summary.polls();
  const double late_share = ticks > 0 ? static_cast<double>(loop.late) / static_cast<double>(ticks) : 0.0;
  fmt::format_to(
      std::back_inserter(out),
      "  late polls: {} of {} wake-ups ({:.1f} %), late = more than a fifth of a step after the deadline\n"
      "    lateness p99 {}, max {}; {} deadlines missed (a poll ran over a whole step)\n",
      loop.late, ticks, 100 * late_share, span(loop.p99_lateness_ns), span(loop.max_lateness_ns),
      loop.missed);
  if (ticks < kMinTicksForAdvice || late_share < kLateShareForAdvice) return;
  std::string advice;
  if (loop.poll_mode == "busy") {
    advice = "--busy needs a CPU of its own: leave one idle, or poll without --busy";
  } else if (loop.poller_scheduling != "SCHED_FIFO") {
    advice = "run gilspy as root or with CAP_SYS_NICE so the poll thread gets SCHED_FIFO, or free a CPU";
  } else if (loop.poll_mode == "fixed") {
    advice = fmt::format("ask for a lower rate (-r {:.0f}) or free a CPU", std::max(100.0, o.rate_asked / 4));
  } else {
    advice = "free a CPU (fewer busy threads or processes than CPUs)";
  }
  fmt::format_to(
      std::back_inserter(out),
      "  note: this machine did not keep the poll rate (interval edges off by up to the p99 lateness):\n"
      "    {}\n",
      advice);
}

void polls_lines(std::string& out, const SummaryInput& in, const SummaryOptions& o) {
  poll_rate_line(out, in, o);
  gilspy_cpu_line(out, in.loop);
  // With many threads the list is re-read less often, to keep the budget: what that costs the timeline.
  if (in.loop.walk_period_ns > sampler::SamplerOptions{}.walk_period_ns) {
    fmt::format_to(
        std::back_inserter(out),
        "  many threads: the thread list was re-read every {} (one {} per {} threads), so a thread "
        "that never takes the GIL is seen to start and end up to that late\n",
        span(in.loop.walk_period_ns), span(sampler::SamplerOptions{}.walk_period_ns),
        sampler::ProcessSampler::kThreadsPerWalkPeriod);
  }
  late_polls_lines(out, in, o);
}

// --exact: what the probes saw, what they missed, and what they cost the target.
void exact_lines(std::string& out, const SummaryInput& in) {
  const raw::ExactFigures& x = in.loop.exact;
  const double seconds = static_cast<double>(in.summary.duration_ns()) / 1e9;
  const double takes_per_s = seconds > 0 ? static_cast<double>(x.takes) / seconds : 0;
  fmt::format_to(std::back_inserter(out),
                 "  exact: every take and drop of the GIL from uprobes on take_gil / drop_gil: {} takes "
                 "({:.0f} a second), {} hand-offs between threads\n",
                 x.takes, takes_per_s, x.handoffs);
  if (x.take_cost_ns > 0) {
    const double per = x.take_cost_ns + x.drop_cost_ns;
    fmt::format_to(std::back_inserter(out),
                   "    their price: {:.1f} us per take and drop on this machine (measured at start), about "
                   "{:.1f} % of a core in the target at this rate (its slowdown where the GIL bounds it)\n",
                   per / 1000, 100 * takes_per_s * per / 1e9);
  } else {
    out += "    their price: not measured (gilspy's own symbols are missing)\n";
  }
  if (x.lost > 0 || x.throttled > 0 || x.undecoded > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  WARNING: {} probe hits lost (full ring buffers), {} throttling notices (kernel.perf_event_"
        "max_sample_rate), {} not decoded: holds and waits around them may be off\n",
        x.lost, x.throttled, x.undecoded);
  }
}

// What the table holds: its rows against every thread, and the threads kept only in groups.
void thread_table_head(std::string& out, const SummaryInput& in, const SummaryTable& table) {
  if (table.rest_threads > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  threads, busiest (hold + wait) first: {} rows for {} threads (--threads all for every thread)\n",
        table.rows.size(), table.total_threads);
  } else {
    out += "  threads, busiest (hold + wait) first:\n";
  }
  if (in.summary.folded_threads() > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  ({} threads that ended after the first {} seen are kept only in groups by name pattern, "
        "here and in the raw file's summary)\n",
        in.summary.folded_threads(), raw::SummaryBuilder::kKeptThreads);
  }
  fmt::format_to(std::back_inserter(out), "  {:>8}  {:<{}} {:>7} {:>9} {:>7} {:>6} {:>7} {:>13} {:>13}\n",
                 "TID", "THREAD", kNameColumns, "HOLD %", "HELD", "WAIT %", "±95%", "HOLDS", "LONGEST HOLD",
                 "LONGEST WAIT");
}

// A line per row; returns the row whose shares are least sure (nullptr with --exact: they are sure).
const SummaryRow* thread_table_rows(std::string& out, const SummaryInput& in, const SummaryTable& table) {
  const SummaryRow* widest = nullptr;
  for (const SummaryRow& r : table.rows) {
    const std::string label = r.threads > 1 ? fmt::format("[{}] {}", r.threads, escape_for_terminal(r.name))
                                            : escape_for_terminal(r.name);
    const std::string name = fit_with_marker(label, kNameColumns);
    const std::string pad(kNameColumns - std::min(kNameColumns, display_width(name)), ' ');
    const double ci = r.share_ci95();
    if (!in.loop.exact.on && ci >= 0 && (widest == nullptr || ci > widest->share_ci95())) widest = &r;
    fmt::format_to(std::back_inserter(out),
                   "  {:>8}  {}{} {:>7.1f} {:>9} {:>7.1f} {:>6} {:>7} {:>13} {:>13}\n",
                   r.threads > 1 ? std::string("-") : std::to_string(r.tid), name, pad, 100 * r.hold_share(),
                   duration_text(r.hold_ns), 100 * r.wait_share(),
                   in.loop.exact.on ? std::string("exact")
                   : ci < 0         ? std::string("?")
                                    : fmt::format("{:.1f}", 100 * ci),
                   r.holds, ms_text(r.longest_hold_ns), ms_text(r.longest_wait_ns));
  }
  return widest;
}

// The threads left out, what the columns mean, and whether the shares are sure enough.
void thread_table_notes(std::string& out, const SummaryInput& in, const SummaryTable& table,
                        const SummaryRow* widest) {
  if (table.rest_threads > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  + {} more thread{}: {:.1f} % hold, {:.1f} % wait (of their lifetimes taken together)\n",
        table.rest_threads, table.rest_threads == 1 ? "" : "s",
        percent_of(static_cast<double>(table.rest_hold_ns), static_cast<double>(table.rest_life_ns)),
        percent_of(static_cast<double>(table.rest_wait_ns), static_cast<double>(table.rest_life_ns)));
  }
  if (table.grouped) {
    out +=
        "  [N] NAME: N threads that each lived less than half the recording, with names alike (* = any "
        "number)\n";
  }
  out += table.grouped
             ? "  HOLD % and WAIT %: shares of each thread's own lifetime in the recording (a group: of its "
               "threads' lifetimes); HELD: its time holding the GIL\n"
             : "  HOLD % and WAIT %: shares of each thread's own lifetime in the recording; HELD: its time "
               "holding "
               "the GIL\n";
  out +=
      in.loop.exact.on
          ? "  ±95%: none, every take and drop was traced (--exact)\n"
          : "  ±95%: the shares are estimates from polls; each lies within this many points of the truth, 19 "
            "times in 20\n";
  if (widest != nullptr && widest->share_ci95() > 0.01) {
    fmt::format_to(
        std::back_inserter(out),
        "  note: the shares of {} are only known to ±{:.1f} points (over 1): record longer or raise "
        "the rate (-r)\n",
        widest->threads > 1
            ? fmt::format("the [{}] {} threads", widest->threads, escape_for_terminal(widest->name))
            : "thread " + std::to_string(widest->tid),
        100 * widest->share_ci95());
  }
}

void thread_table(std::string& out, const SummaryInput& in, const SummaryOptions& o) {
  const SummaryTable table =
      build_summary_table(in.summary.threads(), in.summary.duration_ns(), o.max_threads, in.summary.folded());
  thread_table_head(out, in, table);
  const SummaryRow* widest = thread_table_rows(out, in, table);
  thread_table_notes(out, in, table, widest);
}

// Where the files went, or why they could not be written and what the raw file lacks.
void files_lines(std::string& out, const SummaryInput& in) {
  if (in.raw_problem.empty()) {
    fmt::format_to(std::back_inserter(out), "  raw data: {}\n", escape_for_terminal(in.raw_path));
  } else {
    fmt::format_to(
        std::back_inserter(out),
        "  raw data: INCOMPLETE, {} holds {} of the {} events recorded ({} lost) and no summary: {}\n",
        escape_for_terminal(in.raw_path), in.events_in_file, in.events,
        in.events - std::min(in.events, in.events_in_file), escape_for_terminal(in.raw_problem));
  }
  if (!in.trace_path.empty()) {
    fmt::format_to(std::back_inserter(out),
                   "  trace:    {}  (Chrome DevTools > Performance > Load profile, ui.perfetto.dev, "
                   "MindStudio Insight)\n",
                   escape_for_terminal(in.trace_path));
  } else if (!in.trace_problem.empty()) {
    fmt::format_to(
        std::back_inserter(out), "  trace:    not written: {}{}\n", escape_for_terminal(in.trace_problem),
        in.raw_problem.empty()
            ? fmt::format(" (once there is room: gilspy convert -i {})", escape_for_terminal(in.raw_path))
            : "");
  }
}

}  // namespace

std::string format_target_summary(const SummaryInput& in, const SummaryOptions& o) {
  std::string out;
  const raw::SummaryBuilder& summary = in.summary;
  const double seconds = static_cast<double>(summary.duration_ns()) / 1e9;
  fmt::format_to(std::back_inserter(out),
                 "gilspy: recorded pid {} (Python {}, rank {}) for {:.2f} s, stopped by {}\n", in.pid,
                 escape_for_terminal(in.python_version), in.rank, seconds,
                 escape_for_terminal(in.loop.stop_reason));  // may name a program the target exec'd
  files_lines(out, in);
  if (o.quiet) return out;
  polls_lines(out, in, o);
  fmt::format_to(std::back_inserter(out), "  GIL held {:.1f} % of the recording (all threads together)\n",
                 100 * summary.gil_busy_share());
  if (in.loop.exact.on) {
    exact_lines(out, in);
  } else {
    fmt::format_to(
        std::back_inserter(out),
        "  hand-offs between threads: {} seen, {} too short to see between two polls (coverage {:.1f} %);\n"
        "    a thread that drops the GIL and takes it back with no one in between makes no hand-off: "
        "not counted, not seen\n",
        summary.handoffs_seen(), summary.handoffs_total() - summary.handoffs_seen(),
        100 * summary.coverage());
  }
  if (in.loop.impossible_switch_moves > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  WARNING: the GIL's hand-off counter moved impossibly {} time{} (backwards, or faster than "
        "one take per {} ns): not counted; something writes into the target's memory\n",
        in.loop.impossible_switch_moves, in.loop.impossible_switch_moves == 1 ? "" : "s",
        sampler::ProcessSampler::kMinTakeNs);
  }
  if (summary.stops() > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  the process was stopped (SIGSTOP, a debugger) {} time{} for {:.2f} s in all: no thread ran "
        "then (marked process_stopped in the trace)\n",
        summary.stops(), summary.stops() == 1 ? "" : "s", static_cast<double>(summary.stopped_ns()) / 1e9);
  }
  if (in.loop.dropped_events > 0) {
    fmt::format_to(
        std::back_inserter(out),
        "  WARNING: {} events are missing from the file (the writer fell behind, or the disk refused "
        "writes for too long)\n",
        in.loop.dropped_events);
  }
  if (in.loop.threads_truncated) {
    fmt::format_to(
        std::back_inserter(out),
        "  WARNING: the process had more threads than gilspy follows ({}); the rest are not in the "
        "recording\n",
        sampler::ThreadWalker::kMaxThreads);
  }
  gc_summary_lines(out, summary, in.gc_why_off);
  thread_table(out, in, o);
  stack_summary_lines(out, summary.stacks(), summary.duration_ns(), summary.end_ns());
  append_counter_table(out, summary, o.max_threads);
  return out;
}

void print_target_summary(const FinishedTarget& done, const SummaryOptions& o) {
  const std::string gc_off = done.target.sampler != nullptr ? done.target.sampler->gc().why_off() : "";
  const SummaryInput in{.pid = done.target.pid,
                        .rank = done.target.rank,
                        .python_version = done.target.interp->binary.version.text(),
                        .raw_path = done.raw_path,
                        .trace_path = done.trace_path,
                        .summary = done.summary,
                        .loop = done.figures,
                        .gc_why_off = gc_off,
                        .raw_problem = done.raw_problem,
                        .trace_problem = done.trace_problem,
                        .events = done.events,
                        .events_in_file = done.events_in_file};
  std::fputs(format_target_summary(in, o).c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace gilspy::cli
