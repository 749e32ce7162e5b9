#pragma once
// Keeps the poll thread's own CPU use within a budget (a share of one core) by raising the shortest step the
// adaptive schedule may take. Each wake-up costs the machine ~15-20 us here whatever gilspy reads (timer,
// context switch; more in a VM), so a target that keeps the schedule dense (threads that release the GIL all
// the time, a server starting a thread per request) would otherwise cost gilspy a fifth of a core and the
// target what that core was doing. Measured on the poll thread's CPU clock over 100 ms windows; the floor
// moves by a quarter per window, up when over budget and down when well under it.
#include <cstdint>

namespace gilspy::sampler {

class CpuBudget {
 public:
  // share <= 0: no budget (floor stays at dense_ns).
  CpuBudget(double share, int64_t dense_ns, int64_t max_floor_ns = 2'000'000);
  // Called by the poll thread after each tick. Returns the shortest step allowed from now on.
  int64_t update(int64_t now);
  int64_t floor() const { return floor_; }
  // Fed by update() from the thread's CPU clock; public for tests.
  void observe(int64_t wall_ns, int64_t cpu_ns);

  static constexpr int64_t kWindowNs = 100'000'000;

 private:
  double share_;
  int64_t dense_ns_;
  int64_t max_floor_ns_;
  int64_t floor_;
  int64_t window_start_ = -1;
  int64_t cpu_start_ = 0;
};

int64_t thread_cpu_ns();  // the calling thread's CPU time

}  // namespace gilspy::sampler
