#pragma once
// Keeps gilspy's CPU use (all its threads: polling, and writing what the polls found) within a budget (a
// share of one core) by raising the shortest step the adaptive schedule may take. Each wake-up costs the
// machine ~15-20 us here whatever gilspy reads (timer, context switch; more in a VM), so a target that keeps
// the schedule dense (threads that release the GIL all the time, a server starting a thread per request)
// would otherwise cost gilspy a fifth of a core and the target what that core was doing. Measured on the
// process's CPU clock over 50 ms windows; the floor rises by a quarter to double per window when over budget,
// and falls by a fifth when well under it.
#include <algorithm>
#include <cstdint>

namespace gilspy::sampler {

class CpuBudget {
 public:
  // share <= 0: no budget (floor stays at dense_ns).
  CpuBudget(double share, int64_t dense_ns, int64_t max_floor_ns = 2'000'000);
  // Called by the poll thread after each tick. Returns the shortest step allowed from now on.
  int64_t update(int64_t now);
  int64_t floor() const { return floor_; }
  // The highest floor allowed from now on (the poll loop raises it while polls see few hand-offs anyway).
  void set_max_floor(int64_t ns) {
    max_floor_ns_ = std::max(dense_ns_, ns);
    floor_ = std::min(floor_, max_floor_ns_);
  }
  int64_t max_floor() const { return max_floor_ns_; }
  // Over budget with the floor already at its highest: the polls exempt from the floor (around forced
  // switches) must give way too.
  bool saturated() const { return saturated_; }
  // Fed by update() from the thread's CPU clock; public for tests.
  void observe(int64_t wall_ns, int64_t cpu_ns);
  // CPU time spent on work with a budget of its own (stack reads between polls): not counted against this
  // one, so reading stacks does not slow the polls.
  void exclude(int64_t cpu_ns) { excluded_ns_ += cpu_ns; }

  static constexpr int64_t kWindowNs = 50'000'000;

 private:
  double share_;
  int64_t dense_ns_;
  int64_t max_floor_ns_;
  int64_t floor_;
  bool saturated_ = false;
  int64_t window_start_ = -1;
  int64_t cpu_start_ = 0;
  int64_t excluded_ns_ = 0;  // since the window began
};

int64_t process_cpu_ns();  // gilspy's CPU time, all its threads

}  // namespace gilspy::sampler
