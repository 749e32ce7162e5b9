#pragma once
// One thread's GIL time over the current window and over the totals period, from completed intervals (which
// arrive when they end, so they may begin in a window that is already closed) and the open interval reported
// with each stats tick (so a hold that lasts minutes shows in every window it spans, not only at its end).
//
// The rule that keeps every nanosecond counted once: the open interval is credited window by window up to
// each snapshot, and the credited stretch is remembered; when the completed interval arrives, only what was
// not credited counts. Windows take the part of it inside the current window (earlier windows are closed and
// shown); totals take everything inside the totals period, so they equal the sum of the completed intervals.
#include <cstdint>
#include <optional>
#include <vector>

#include "cli/top/top_types.hpp"

namespace gilspy::top {

// Where the current window and the totals begin. Pieces of an interval before them belong to closed periods.
struct Bounds {
  int64_t window_start_ns = 0;
  int64_t totals_start_ns = 0;
};

// Hold time a call credited to the window and to the totals, so that the process sums GIL busy time as it
// goes instead of walking its threads.
struct Credited {
  int64_t window_ns = 0, total_ns = 0;
};

class ThreadAccount {
 public:
  // Lifetime: the earliest moment the thread was seen (start, an interval, an open state) to its end or now.
  void seen(int64_t ts_ns);
  void ended(int64_t ts_ns, int64_t state_se_ns = -1);  // state_se_ns: its life's standard error, or -1
  bool is_ended() const { return ended_ns_ >= 0; }

  Credited completed(Role role, int64_t start_ns, int64_t dur_ns, const Bounds& b);
  // The interval open at `at_ns` (when the sampler last looked) began at `since_ns`.
  // `state_var_ns2`: the sampler's variance of its time in each state so far (-1: not known).
  void open(Role role, int64_t since_ns, int64_t at_ns, double state_var_ns2 = -1);

  // Credits the open interval up to `now_ns` (it is still open as far as anyone knows; the error is at most
  // the time a completed interval takes to reach the model), fills the figures of the window and the totals,
  // and starts the next window.
  Credited close_window(int64_t now_ns, const Bounds& b, ThreadFigures& interval, ThreadFigures& total);

  void reset_totals();  // the caller moves Bounds; what lies before them is clipped away from then on

 private:
  struct Tally {
    int64_t hold_ns = 0, wait_ns = 0;
    uint64_t holds = 0;
    int64_t completed_hold_ns = 0;  // full lengths of the holds completed in the period, for the mean
    int64_t longest_hold_ns = 0, longest_wait_ns = 0;
  };
  struct Open {
    Role role;
    int64_t since_ns;
  };
  // The stretch [from, until] of the interval (role, since) already credited through its open state.
  struct Credit {
    Role role;
    int64_t since_ns;
    int64_t from_ns = -1, until_ns = -1;  // -1: nothing credited yet
  };

  Credited add_piece(Role role, int64_t a, int64_t e, const Bounds& b);
  ThreadFigures figures(const Tally& t, int64_t period_start_ns, int64_t now_ns) const;
  double ci95(double var_start, int64_t lifetime_ns) const;
  void note_variance(double state_var_ns2);  // the sampler's running variance of its life, so far  // of a
                                             // period whose variance began at var_start

  int64_t first_ns_ = -1, ended_ns_ = -1;
  int64_t last_completed_end_ns_ = -1;
  std::optional<Open> open_;
  // Credits of intervals whose completion has not arrived yet: usually one, two when the next interval's open
  // state overtakes the previous completion. Bounded, oldest dropped.
  std::vector<Credit> credits_;
  Credit* credit_for(Role role, int64_t since_ns);
  Tally window_, total_;
  // The sampler's running variance, now and where the window and the totals began: a period's own is the
  // difference (the polls' errors are independent). -1: not known yet.
  double var_now_ = -1, var_window_start_ = -1, var_totals_start_ = -1;
};

}  // namespace gilspy::top
