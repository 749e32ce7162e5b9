#pragma once
// The plain data of `gilspy top`: what the recording core feeds the model (through a thin adapter, so this
// header knows nothing of the sampler or the raw format), and the snapshot the model hands the renderers.
// Times are nanoseconds on one clock (the sampler's); durations are nanoseconds; shares are fractions 0..1.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gilspy::top {

// ---- input
// -------------------------------------------------------------------------------------------------

enum class Role : uint8_t { kHolding, kWaiting, kReleased };

struct ProcessInfo {
  uint32_t id = 0;  // the caller's handle for the target; events name it
  int64_t pid = 0;
  std::string command;  // target-controlled: escaped by the renderers, not here
  std::string python_version;
  int64_t rank = 0;
  // When recording this target began: the zero point of its cumulative poll counters. -1 when unknown; the
  // first stats tick is then the baseline, and "since start" rates start from it.
  int64_t start_ns = -1;
  bool exact = false;  // --exact: holds and waits from the probes, not estimates
};

// Cumulative counters of one target's sampler, as of a stats tick.
struct PollCounters {
  uint64_t polls = 0, late = 0, missed = 0, handoffs_seen = 0, handoffs_total = 0;
};

// A named number shown in a process header: what later features (GC, CPU) add without changing the model.
// The model shows the latest value it was given, unchanged.
struct Figure {
  std::string label;
  double value = 0;
  std::string unit;  // printed after the value ("ms", "%"); may be empty
};

// What the CPU did for one thread over a stretch in one role (the sampler's per-role counters): fed with
// TopModel::cpu(), summed per period into CpuFigures.
struct CpuPiece {
  int64_t time_ns = 0;       // covered by scheduler figures
  int64_t cpu_ns = 0;        // on a CPU
  int64_t run_delay_ns = 0;  // runnable, waiting for a CPU
  uint64_t slices = 0;       // times switched onto a CPU
  bool counted = false;      // cycles and instructions were counted (perf)
  uint64_t cycles = 0, instructions = 0;
  bool misses_counted = false;  // cache-misses and branch-misses were counted
  uint64_t cache_misses = 0, branch_misses = 0;
};

// ---- snapshot
// ----------------------------------------------------------------------------------------------

// One thread's CPU over one period, per role (indexed by Role: holding, waiting, released).
struct CpuFigures {
  std::array<CpuPiece, 3> roles{};
  bool any = false;  // some figure reached the period
  const CpuPiece& role(Role r) const { return roles[static_cast<std::size_t>(r)]; }
  CpuPiece total() const;
};

// One thread over one period: the last interval, or everything since start / the last reset.
struct ThreadFigures {
  int64_t lifetime_ns = 0;  // the thread's life inside the period: the denominator of the shares
  double hold_share = 0, wait_share = 0, released_share = 0;
  uint64_t holds = 0;        // holds that completed in the period
  double holds_per_s = 0;    // per second of the thread's lifetime in the period
  int64_t mean_hold_ns = 0;  // over the holds that completed in the period (0 when none)
  int64_t longest_hold_ns = 0, longest_wait_ns = 0;  // completed ones, and the one still open
  double share_ci95 = -1;  // the 95 % interval's half-width of hold_share and wait_share; -1: not known
};

struct ThreadRow {
  int64_t tid = 0;
  std::string name;
  std::string function;  // "qualname (file:line)" of its last stack sample; empty without one
  bool ended = false;
  ThreadFigures interval, total;
  CpuFigures cpu_interval, cpu_total;  // the CPU columns (key c)
};

// The garbage collector over one period (issue 9; cli/top/gc_account.hpp): a collection counts in the period
// it ended in.
struct GcFigures {
  uint64_t collections[3] = {0, 0, 0};   // per generation, timed or counted between two polls
  uint64_t timed = 0;                    // of them, seen running
  int64_t pause_ns = 0, longest_ns = 0;  // the timed ones
  double time_share = 0;                 // pause_ns / the period
  std::optional<double> wait_share;      // GIL waiting during collections / all GIL waiting; empty: none
  bool enabled = true;                   // gc.isenabled() as last read
};

// One process over one period. Figures from poll statistics are empty when no stats tick fell in the period.
struct ProcessFigures {
  int64_t duration_ns = 0;  // the process's life inside the period
  double gil_busy_share = 0;
  std::optional<double> mean_waiters;  // time-weighted; empty before the first waiter count
  std::optional<int> max_waiters;
  std::optional<double> handoffs_per_s;
  std::optional<double> coverage;  // hand-offs seen / happened; 1 when none happened
  std::optional<double> poll_rate_hz;
  uint64_t late_polls = 0, missed_polls = 0;
  std::optional<GcFigures> gc;  // empty until the GC state was read (a version gilspy reads it for)
};

struct ProcessRow {
  uint32_t id = 0;
  int64_t pid = 0;
  std::string command, python_version;
  int64_t rank = 0;
  bool exact = false;
  bool ended = false;
  ProcessFigures interval, total;
  std::string warning;  // empty, or why the figures are not to be trusted right now
  std::vector<Figure> extra;
  std::vector<ThreadRow> threads;  // in order of first appearance; the renderer sorts
};

// One Python function over one period (the function view, key f): the time threads spent in it, per GIL role
// (indexed by Role), from the stack samples of holds, waits and, with --all-threads, stretches without the
// GIL. `own`: it was the innermost frame; `total`: it was on the stack (once however often).
struct FunctionFigures {
  std::array<int64_t, 3> own_ns{}, total_ns{};
  int64_t own(Role r) const { return own_ns[static_cast<std::size_t>(r)]; }
  int64_t total(Role r) const { return total_ns[static_cast<std::size_t>(r)]; }
  bool any() const;
};

struct FunctionRow {
  std::string function;  // "qualname (file:first line)", target text: escaped by the renderers
  FunctionFigures interval, total;
};

struct TopSnapshot {
  int64_t now_ns = 0;
  int64_t interval_start_ns = 0;       // the last interval is [interval_start_ns, now_ns]
  int64_t totals_start_ns = 0;         // totals cover [totals_start_ns, now_ns]: start, or the last reset
  std::vector<ProcessRow> processes;   // in order of add_process
  std::vector<FunctionRow> functions;  // every target's together, in no order: the renderer sorts
};

}  // namespace gilspy::top
