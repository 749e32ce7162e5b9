#include "sampler/schedule/cpu_budget.hpp"

#include <time.h>

#include <algorithm>

namespace gilspy::sampler {

int64_t process_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

CpuBudget::CpuBudget(double share, int64_t dense_ns, int64_t max_floor_ns, double reserved)
    : share_(share),
      reserved_(std::clamp(reserved, 0.0, std::max(0.0, share))),
      dense_ns_(dense_ns),
      max_floor_ns_(std::max(dense_ns, max_floor_ns)),
      floor_(dense_ns) {}

int64_t CpuBudget::update(int64_t now) {
  if (share_ <= 0) return floor_;
  if (window_start_ < 0) {
    window_start_ = now;
    cpu_start_ = process_cpu_ns();
    excluded_ns_ = 0;
  } else if (now - window_start_ >= kWindowNs) {
    const int64_t cpu = process_cpu_ns();
    observe(now - window_start_, std::max<int64_t>(0, cpu - cpu_start_), excluded_ns_);
    window_start_ = now;
    cpu_start_ = cpu;
    excluded_ns_ = 0;
  }
  return floor_;
}

void CpuBudget::observe(int64_t wall_ns, int64_t cpu_ns, int64_t reserved_ns) {
  if (share_ <= 0 || wall_ns <= 0) return;
  const double wall = static_cast<double>(wall_ns);
  // The reserved work is timed on the wall clock, so it may read a little more than the CPU it took.
  const double share = share_ * scale_;
  const int64_t reserved_cpu = std::clamp<int64_t>(reserved_ns, 0, cpu_ns);
  const double reserved_used = std::min(static_cast<double>(reserved_cpu) / wall, reserved_ * scale_);
  const double used = static_cast<double>(cpu_ns - reserved_cpu) / wall;
  const double allowed = std::max(share - reserved_used, 1e-3 * share);  // the polls' part: what stacks left
  // The budget is a ceiling, so the floor is steered to a little under it: held at the limit, the windows
  // over it (a burst of forced switches, which are polled at the peak rate whatever the floor) put the mean
  // above (5.2 % of a core on 16 threads at a 5 % budget, steered to 100 %).
  const double over_at = 0.95 * allowed;
  // Saturated: over at the highest floor, so the peak-rate polls (around forced switches) give way too. It
  // holds until the polls are well under (the floor's own band): left to each window, a window without the
  // peaks came in under, the next with them over, and the mean sat over the budget (16 threads at a 5 %
  // budget: 5.5 % of a core, windows from 3.5 to 7 %, the floor at 2 ms throughout).
  if (floor_ < max_floor_ns_ || used < 0.75 * allowed) {
    saturated_ = false;
  } else if (used > over_at) {
    saturated_ = true;
  }
  if (used > over_at) {
    // Far over budget (at the start, or when a target turns busy) the floor doubles at once; a little over,
    // it rises by a quarter.
    const double factor = std::clamp(used / over_at, 1.25, 2.0);
    floor_ = std::min(max_floor_ns_, static_cast<int64_t>(static_cast<double>(floor_) * factor) + 1);
  } else if (used < 0.75 * allowed) {
    floor_ = std::max(dense_ns_, floor_ - floor_ / 5);
  }
}

}  // namespace gilspy::sampler
