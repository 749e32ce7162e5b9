#include "cli/record_summary.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gilspy::cli {

namespace {
std::string ms(int64_t ns) { return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6); }
}  // namespace

void print_target_summary(const FinishedTarget& done, double rate_asked, bool quiet) {
  const int pid = done.target.pid;
  const int64_t rank = done.target.rank;
  const std::string python_version = done.target.interp->binary.version.text();
  const std::string& raw_path = done.raw_path;
  const std::string& trace_path = done.trace_path;
  const raw::SummaryBuilder& summary = done.summary;
  const raw::LoopFigures& loop = done.figures;
  const double seconds = static_cast<double>(summary.duration_ns()) / 1e9;
  fmt::print("gilspy: recorded pid {} (Python {}, rank {}) for {:.2f} s, stopped by {}\n", pid, python_version, rank,
             seconds, loop.stop_reason);
  fmt::print("  raw data: {}\n", raw_path);
  if (!trace_path.empty()) {
    fmt::print("  trace:    {}  (open in https://ui.perfetto.dev, chrome://tracing or MindStudio Insight)\n",
               trace_path);
  }
  if (quiet) return;
  const double mean_rate = seconds > 0 ? static_cast<double>(summary.polls()) / seconds : 0.0;
  const double polls = static_cast<double>(std::max<uint64_t>(1, summary.polls()));
  if (loop.poll_mode == "adaptive") {
    fmt::print("  {} polls, adaptive: {:.0f} Hz on average, {:.0f} Hz around hand-offs for {:.0f} % of them{}; {} late, "
               "{} missed, poll thread {}; GIL busy {:.1f} %\n",
               summary.polls(), mean_rate, rate_asked, 100.0 * static_cast<double>(loop.dense_polls) / polls,
               loop.budget_limited > 0
                   ? fmt::format(" (the CPU budget slowed {:.0f} %)",
                                 100.0 * static_cast<double>(loop.budget_limited) / polls)
                   : "",
               loop.late, loop.missed, loop.poller_scheduling, 100 * summary.gil_busy_share());
  } else {
    fmt::print("  {} polls at {:.0f} Hz ({} {:.0f}), {} late, {} missed, poll thread {}; GIL busy {:.1f} %\n",
               summary.polls(), mean_rate, loop.poll_mode, rate_asked, loop.late, loop.missed,
               loop.poller_scheduling, 100 * summary.gil_busy_share());
  }
  fmt::print("  hand-offs between threads: {} seen, {} too short to see between two polls (coverage {:.1f} %)\n",
             summary.handoffs_seen(), summary.handoffs_total() - summary.handoffs_seen(), 100 * summary.coverage());
  if (loop.dropped_events > 0) {
    fmt::print("  WARNING: {} events were dropped because the writer fell behind\n", loop.dropped_events);
  }
  fmt::print("  {:>8}  {:<24} {:>7} {:>7} {:>7} {:>13} {:>13}\n", "TID", "THREAD", "HOLD %", "WAIT %", "HOLDS",
             "LONGEST HOLD", "LONGEST WAIT");
  for (const auto& t : summary.threads()) {
    fmt::print("  {:>8}  {:<24} {:>7.1f} {:>7.1f} {:>7} {:>13} {:>13}\n", t.tid, t.name.substr(0, 24),
               100 * t.hold_share(), 100 * t.wait_share(), t.holds, ms(t.longest_hold_ns), ms(t.longest_wait_ns));
  }
  fmt::print("  (HOLD % and WAIT % are shares of each thread's lifetime in the recording)\n");
}

}  // namespace gilspy::cli
