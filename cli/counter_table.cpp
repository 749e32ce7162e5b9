#include "cli/counter_table.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "base/terminal_text.hpp"
#include "cli/summary_table.hpp"
#include "cli/summary_text.hpp"

namespace gilspy::cli {

namespace {

constexpr size_t kCpuRows = 8;  // threads in the CPU table (--threads all: every one)

std::string pct(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:.1f}", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : "-";
}

std::string per_kilo(uint64_t n, uint64_t instructions) {
  return instructions > 0
             ? fmt::format("{:.2f}", 1000.0 * static_cast<double>(n) / static_cast<double>(instructions))
             : "-";
}

// "cycles, instructions: not supported: ...; ref-cycles: does not fit ...": the counters left out, by reason.
std::string unavailable_text(const raw::CounterSetup& s) {
  std::vector<std::pair<std::string, std::string>> by_reason;
  for (const auto& [name, why] : s.unavailable) {
    auto it =
        std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& r) { return r.second == why; });
    if (it == by_reason.end()) {
      by_reason.emplace_back(name, why);
    } else {
      it->first += ", " + name;
    }
  }
  std::string out;
  for (const auto& [names, why] : by_reason) out += (out.empty() ? "" : "; ") + names + ": " + why;
  return out;
}

// Which of the optional columns this recording has counters for (indexes into RoleCounters::values).
struct CounterColumns {
  std::optional<size_t> cycles, instructions, cache_misses, branch_misses;
  bool ipc = false, misses = false;
};

CounterColumns counter_columns(const raw::CounterSummary& c) {
  CounterColumns k{.cycles = c.index_of(raw::CounterKind::kCycles),
                   .instructions = c.index_of(raw::CounterKind::kInstructions),
                   .cache_misses = c.index_of(raw::CounterKind::kCacheMisses),
                   .branch_misses = c.index_of(raw::CounterKind::kBranchMisses)};
  k.ipc = k.cycles && k.instructions;
  k.misses = k.instructions && (k.cache_misses || k.branch_misses);
  return k;
}

// What was counted, what could not be, and the column heads.
void counter_table_head(std::string& out, const raw::CounterSetup& setup, const CounterColumns& k) {
  std::string counted;
  for (size_t i = 0; i < setup.count && i < raw::kMaxCounterValues; ++i) {
    counted += std::string(counted.empty() ? "" : ", ") + raw::counter_name(setup.kinds[i]);
  }
  out += "  what the CPU did, per thread and GIL role (time on a CPU and run-queue delay from schedstat";
  out += counted.empty() ? ")\n" : "; perf: " + counted + ")\n";
  if (!setup.unavailable.empty()) {
    fmt::format_to(std::back_inserter(out), "    not counted: {}\n",
                   escape_for_terminal(unavailable_text(setup)));
  }
  fmt::format_to(std::back_inserter(out), "  {:>8}  {:<{}} {:>10} {:>10} {:>6} {:>10} {:>6} {:>8}", "TID",
                 "ROLE", kNameColumns, "TIME", "ON CPU", "CPU %", "RUN-QUEUE", "RUNQ %", "SLICES");
  if (k.ipc) fmt::format_to(std::back_inserter(out), " {:>6}", "IPC");
  if (k.misses) fmt::format_to(std::back_inserter(out), " {:>9} {:>9}", "CMISS/KI", "BMISS/KI");
  out += "\n";
}

// One role's line of a thread: time, CPU, run-queue delay, slices, and IPC and misses where counted.
void role_counter_line(std::string& out, raw::GilRole role, const raw::RoleCounters& r,
                       const CounterColumns& k) {
  fmt::format_to(std::back_inserter(out), "  {:>8}  {:<{}} {:>10} {:>10} {:>6} {:>10} {:>6} {:>8}", "",
                 std::string("  ") + raw::to_string(role), kNameColumns, ms_text(r.time_ns),
                 ms_text(r.cpu_ns), pct(r.cpu_ns, r.time_ns), ms_text(r.run_delay_ns),
                 pct(r.run_delay_ns, r.time_ns), r.slices);
  const uint64_t instr = k.instructions ? r.values[*k.instructions] : 0;
  if (k.ipc) {
    const uint64_t cyc = r.values[*k.cycles];
    fmt::format_to(std::back_inserter(out), " {:>6}",
                   cyc > 0 && r.counted_ns > 0
                       ? fmt::format("{:.2f}", static_cast<double>(instr) / static_cast<double>(cyc))
                       : std::string("-"));
  }
  if (k.misses) {
    fmt::format_to(std::back_inserter(out), " {:>9} {:>9}",
                   k.cache_misses ? per_kilo(r.values[*k.cache_misses], instr) : "-",
                   k.branch_misses ? per_kilo(r.values[*k.branch_misses], instr) : "-");
  }
  out += "\n";
}

// A thread's name line (its switches and preempted holds beside it), then a line per role it was in.
void thread_counter_lines(std::string& out, const SummaryRow& row, const raw::ThreadCounterSummary& t,
                          const CounterColumns& k) {
  std::string about;
  if (t.has_switches) {
    about = fmt::format("switches: {} voluntary, {} involuntary", t.voluntary, t.involuntary);
  }
  if (t.preempted_holds > 0) {
    about += fmt::format("{}{} of {} holds preempted ({} waiting for a CPU while holding the GIL)",
                         about.empty() ? "" : "; ", t.preempted_holds, t.holds, ms_text(t.preempted_hold_ns));
  }
  const std::string name = fit_with_marker(escape_for_terminal(row.name), kNameColumns);
  fmt::format_to(std::back_inserter(out), "  {:>8}  {}{}\n", row.tid, name,
                 about.empty() ? "" : "  (" + about + ")");
  for (const raw::GilRole role : {raw::GilRole::kHolding, raw::GilRole::kWaiting, raw::GilRole::kReleased}) {
    const raw::RoleCounters& r = t.role(role);
    if (r.time_ns == 0 && r.counted_ns == 0) continue;
    role_counter_line(out, role, r, k);
  }
}

}  // namespace

void append_counter_table(std::string& out, const raw::SummaryBuilder& summary, size_t max_threads) {
  const raw::CounterSummary& c = summary.counters();
  if (!c.any()) return;
  const CounterColumns k = counter_columns(c);
  counter_table_head(out, c.setup(), k);
  const SummaryTable table =
      build_summary_table(summary.threads(), summary.duration_ns(), max_threads, summary.folded());
  // Three lines or four a thread: the busiest few that held or waited, unless every thread was asked for
  // (--threads all); the thread table above and the raw file have the rest.
  const size_t max_rows = max_threads == 0 ? table.rows.size() : std::min<size_t>(max_threads, kCpuRows);
  size_t shown = 0, left_out = 0;
  for (const SummaryRow& row : table.rows) {
    if (row.threads > 1)
      continue;  // a group of short-lived threads: its members' figures are in the raw file
    const auto t = c.thread(row.tid);
    if (!t) continue;
    if (max_threads != 0 && row.hold_ns == 0 && row.wait_ns == 0) continue;  // idle all along
    if (shown == max_rows) {
      ++left_out;
      continue;
    }
    ++shown;
    thread_counter_lines(out, row, *t, k);
  }
  if (shown == 0) out += "    (no thread of the table held or waited for the GIL with counter figures)\n";
  if (left_out > 0) {
    fmt::format_to(std::back_inserter(out),
                   "  + {} more thread{} that held or waited (--threads all for every thread)\n", left_out,
                   left_out == 1 ? "" : "s");
  }
  out +=
      "  CPU % and RUNQ %: of the time in that role; a waiter with a high RUNQ % is starved of CPU, not of "
      "the "
      "GIL;\n    a holder that waits for a CPU (preempted) keeps every waiter waiting: more runnable threads "
      "than cores\n";
}

}  // namespace gilspy::cli
