#pragma once
// Process-wide figures of `gilspy top` that are not sums over threads: the number of GIL waiters (a step
// function, averaged over time) and the sampler's cumulative poll counters (turned into rates per period).
#include <cstdint>
#include <optional>
#include <string>

#include "cli/top/thread_account.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

// Waiters is a step function: each count holds from its timestamp to the next. The mean is weighted by time,
// so one poll that saw 7 waiters does not weigh as much as a second with 1.
class WaiterGauge {
 public:
  void set(int64_t ts_ns, int n, const Bounds& b);
  // Integrates up to `until_ns` (now, or the process's end), fills mean/max of both periods, starts the next
  // window.
  void close_window(int64_t until_ns, const Bounds& b, ProcessFigures& interval, ProcessFigures& total);
  void reset_totals();

 private:
  struct Acc {
    double weighted = 0;  // waiters x ns
    int64_t covered_ns = 0;
    int max = 0;
    bool any = false;
  };
  void integrate(int64_t to_ns, const Bounds& b);
  static void fill(const Acc& a, int current, ProcessFigures& f);

  bool known_ = false;
  int value_ = 0;
  int64_t since_ns_ = 0;
  Acc window_, total_;
};

// The sampler reports cumulative counters (polls, late, missed, hand-offs seen and happened) about once a
// second. A period's figures are the difference between the latest tick and the latest tick before the period
// began, divided by the time between those two ticks (not by the window: ticks and snapshots are not
// aligned).
class PollTracker {
 public:
  void start(int64_t start_ns);  // counters are zero at start_ns
  void tick(int64_t ts_ns, const PollCounters& c);
  // `warning` is set when the sampler falls behind (late/missed polls) or its statistics stopped coming.
  void close_window(int64_t now_ns, bool ended, ProcessFigures& interval, ProcessFigures& total,
                    std::string& warning);
  void reset_totals();

 private:
  struct Tick {
    int64_t ts_ns = 0;
    PollCounters c;
  };
  static void fill(const std::optional<Tick>& base, const std::optional<Tick>& latest, ProcessFigures& f);

  std::optional<Tick> latest_, window_base_, total_base_;
};

}  // namespace gilspy::top
