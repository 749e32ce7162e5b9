#pragma once
// Keeps gilspy's CPU use (all its threads: polling, reading stacks, writing what the polls found) within a
// budget (a share of one core) by raising the shortest step the adaptive schedule may take. Stack reads have
// a share of their own inside it (`reserved`, a token bucket in the poll loop): what they leave unused goes
// to the polls, what they use comes out of the polls' part, down to `share - reserved`. So the total stays
// within the budget, and a target whose stacks are cheap (few holds) gets more polls. Each wake-up costs the
// machine the same whatever gilspy reads (timer, context switch; more in a VM), so a target that keeps
// the schedule dense (threads that release the GIL all the time, a server starting a thread per request)
// would otherwise cost gilspy a fifth of a core and the target what that core was doing. Measured on the
// process's CPU clock over 50 ms windows; the floor rises by a quarter to double per window when over 95 % of
// the budget, and falls by a fifth when under 75 % of it.
#include <algorithm>
#include <cstdint>

namespace gilspy::sampler {

class CpuBudget {
 public:
  // share <= 0: no budget (floor stays at dense_ns). reserved: the part of share that stack reads may take.
  CpuBudget(double share, int64_t dense_ns, int64_t max_floor_ns = 2'000'000, double reserved = 0);
  // Called by the poll thread after each tick. Returns the shortest step allowed from now on.
  int64_t update(int64_t now);
  int64_t floor() const { return floor_; }
  // The highest floor allowed from now on (the poll loop raises it while polls see few hand-offs anyway).
  void set_max_floor(int64_t ns) {
    max_floor_ns_ = std::max(dense_ns_, ns);
    floor_ = std::min(floor_, max_floor_ns_);
  }
  int64_t max_floor() const { return max_floor_ns_; }
  // The part of the budget in force, 0-1 (the poll loop halves it while its polls see few hand-offs): share
  // and reserved both scale.
  void set_scale(double scale) { scale_ = std::clamp(scale, 0.01, 1.0); }
  double scale() const { return scale_; }
  // Over budget with the floor already at its highest: the polls exempt from the floor (around forced
  // switches) must give way too, until the polls are well under the budget again.
  bool saturated() const { return saturated_; }
  // Fed by update() from the process's CPU clock; public for tests. `reserved_ns`: of cpu_ns, the part spent
  // on the reserved work (stack reads).
  void observe(int64_t wall_ns, int64_t cpu_ns, int64_t reserved_ns = 0);
  // CPU time spent on the reserved work (stack reads between polls, which have a bucket of their own): the
  // polls' part of the budget shrinks by as much, never below share - reserved.
  void exclude(int64_t cpu_ns) { excluded_ns_ += cpu_ns; }

  static constexpr int64_t kWindowNs = 50'000'000;

 private:
  double share_;
  double reserved_;
  double scale_ = 1.0;
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
