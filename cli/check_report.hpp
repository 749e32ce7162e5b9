#pragma once
// `gilspy check`: the sampler against every take and drop of the same window (--exact's probes added up on
// the side), per thread: hold and wait both ways, the difference, and whether the sampler's 95 % interval
// held. Pure functions of what a recording gathered: unit-tested on made-up figures.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/summary.hpp"

namespace gilspy::cli {

struct ExactThreadTotal {
  int64_t tid = 0;
  int64_t hold_ns = 0, wait_ns = 0;
};

struct CheckRow {
  int64_t tid = 0;
  std::string name;     // target text: escaped when printed
  int64_t life_ns = 0;  // the thread's time in the recording (the shares' denominator, both ways)
  double sampled_hold = 0, sampled_wait = 0;
  double exact_hold = 0, exact_wait = 0;
  double ci95 = -1;  // the sampler's half-width; -1: not known
  bool seen_by_sampler = true;
  // |Δ| of both shares within ci95; unknown (no interval) counts as not judged
  bool judged() const { return ci95 >= 0 && seen_by_sampler; }
  bool held() const;
  double hold_diff_pp() const { return 100 * (sampled_hold - exact_hold); }
  double wait_diff_pp() const { return 100 * (sampled_wait - exact_wait); }
};

// Every thread of the recording, busiest first by the probes' hold + wait. A thread the probes saw and the
// sampler never did is a row too (its life: the recording's).
std::vector<CheckRow> check_rows(const raw::SummaryBuilder& sampled,
                                 const std::vector<ExactThreadTotal>& exact);

// Measured in the target (check_cpu_watch.hpp): CPUs its threads used, in user mode (the Python work: its
// progress) and in the kernel (where the probes' traps run), in the window and in an untraced stretch just
// before gilspy attached.
struct CheckCpu {
  double untraced_s = 0, window_s = 0;
  int threads = 0;       // the most seen at once: each thread's ticks are rounded at each end
  double tick_s = 0.01;  // a clock tick: the user / kernel split's grain
  double untraced_user_cpus = 0, untraced_system_cpus = 0;
  double window_user_cpus = 0, window_system_cpus = 0;
  // The change of user-mode CPU time per second: the target's progress under the probes and the sampler
  double progress_change() const;
  // Its 95 % half-width from the ticks' rounding alone (it does not know how steady the workload is)
  double progress_change_ci95() const;
  double extra_system_cpus() const { return window_system_cpus - untraced_system_cpus; }
};

struct CheckHeader {
  int64_t pid = 0;
  std::string python_version;
  double seconds = 0;
  const raw::LoopFigures* figures = nullptr;
  std::optional<CheckCpu> cpu = std::nullopt;  // nullopt: not measured
  bool cpu_watched = false;                    // false: a launched program (no untraced stretch before it)
};

// The answer first: how many intervals held and the worst differences; then the table (at most
// `max_rows` rows, 0: all) and what each side cost.
std::string format_check(const CheckHeader& h, const std::vector<CheckRow>& rows, size_t max_rows);
nlohmann::json check_json(const CheckHeader& h, const std::vector<CheckRow>& rows);

}  // namespace gilspy::cli
