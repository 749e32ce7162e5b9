#pragma once
// One thread's CPU per GIL role over the current window and the totals period, from the sampler's per-role
// counter pieces (each covers a stretch of at most 100 ms and arrives when it ends). A piece that began
// before the window (or the totals' start) counts with the share of it that falls inside, as if its figures
// were spread evenly over it.
#include <cstdint>

#include "cli/top/thread_account.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

class CpuAccount {
 public:
  void add(Role role, int64_t start_ns, int64_t dur_ns, const CpuPiece& piece, const Bounds& b);
  // The figures of the window and of the totals; the next window starts empty.
  void close_window(CpuFigures& interval, CpuFigures& total);
  void reset_totals() { total_ = CpuFigures{}; }

 private:
  CpuFigures window_, total_;
};

// `into` += `piece` x (part / whole): a piece's share of a period.
void add_share(CpuPiece& into, const CpuPiece& piece, int64_t part, int64_t whole);

}  // namespace gilspy::top
