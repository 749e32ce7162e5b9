#pragma once
// The garbage collector's figures of `gilspy top` (issue 9): collections per generation, pauses, their share
// of the time and of all GIL waiting, per window and since start / the last reset. A collection counts in
// the window it ends in (its records come when it has ended).
#include <cstdint>

#include "cli/top/top_types.hpp"

namespace gilspy::top {

class GcAccount {
 public:
  void collection(int32_t generation, int64_t dur_ns, int64_t wait_ns);
  void untimed(int32_t generation, uint64_t n);
  void settings(bool enabled);  // the GC state was read: the row shows from now on
  // Fills row.interval.gc and row.total.gc (once the GC was seen at all), the waiting shares against the
  // threads' waits in the row; starts the next window.
  void close_window(ProcessRow& row);
  void reset_totals();

 private:
  struct Acc {
    uint64_t collections[3] = {0, 0, 0};
    uint64_t timed = 0;
    int64_t pause_ns = 0, longest_ns = 0, wait_ns = 0;
    void add(const Acc& o);
  };
  static GcFigures figures(const Acc& a, const ProcessFigures& f, const std::vector<ThreadRow>& threads,
                           bool totals);
  bool seen_ = false;
  bool enabled_ = true;
  Acc window_, total_;
};

}  // namespace gilspy::top
