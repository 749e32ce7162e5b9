#include "cli/top/cpu_account.hpp"

#include <algorithm>

namespace gilspy::top {

namespace {

template <class T>
T part_of(T v, int64_t part, int64_t whole) {
  if (part >= whole) return v;
  return static_cast<T>(static_cast<double>(v) * static_cast<double>(part) / static_cast<double>(whole));
}

void add_piece(CpuPiece& into, const CpuPiece& p) {
  into.time_ns += p.time_ns;
  into.cpu_ns += p.cpu_ns;
  into.run_delay_ns += p.run_delay_ns;
  into.slices += p.slices;
  into.counted = into.counted || p.counted;
  into.cycles += p.cycles;
  into.instructions += p.instructions;
  into.misses_counted = into.misses_counted || p.misses_counted;
  into.cache_misses += p.cache_misses;
  into.branch_misses += p.branch_misses;
}

}  // namespace

CpuPiece CpuFigures::total() const {
  CpuPiece t;
  for (const CpuPiece& r : roles) add_piece(t, r);
  return t;
}

void add_share(CpuPiece& into, const CpuPiece& piece, int64_t part, int64_t whole) {
  if (part <= 0 && whole > 0) return;
  CpuPiece p = piece;
  if (whole > 0 && part < whole) {
    p.time_ns = part_of(p.time_ns, part, whole);
    p.cpu_ns = part_of(p.cpu_ns, part, whole);
    p.run_delay_ns = part_of(p.run_delay_ns, part, whole);
    p.slices = part_of(p.slices, part, whole);
    p.cycles = part_of(p.cycles, part, whole);
    p.instructions = part_of(p.instructions, part, whole);
    p.cache_misses = part_of(p.cache_misses, part, whole);
    p.branch_misses = part_of(p.branch_misses, part, whole);
  }
  add_piece(into, p);
}

void CpuAccount::add(Role role, int64_t start_ns, int64_t dur_ns, const CpuPiece& piece, const Bounds& b) {
  const int64_t end = start_ns + std::max<int64_t>(0, dur_ns);
  const auto inside = [&](int64_t from) { return end - std::max(start_ns, from); };
  const size_t r = static_cast<size_t>(role);
  if (end > b.window_start_ns || dur_ns == 0) {
    add_share(window_.roles[r], piece, inside(b.window_start_ns), dur_ns);
    window_.any = true;
  }
  if (end > b.totals_start_ns || dur_ns == 0) {
    add_share(total_.roles[r], piece, inside(b.totals_start_ns), dur_ns);
    total_.any = true;
  }
}

void CpuAccount::close_window(CpuFigures& interval, CpuFigures& total) {
  interval = window_;
  total = total_;
  window_ = CpuFigures{};
}

}  // namespace gilspy::top
