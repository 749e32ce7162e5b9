#include "cli/top/gc_account.hpp"

#include <algorithm>

namespace gilspy::top {

void GcAccount::Acc::add(const Acc& o) {
  for (int g = 0; g < 3; ++g) collections[g] += o.collections[g];
  timed += o.timed;
  pause_ns += o.pause_ns;
  longest_ns = std::max(longest_ns, o.longest_ns);
  wait_ns += o.wait_ns;
}

void GcAccount::collection(int32_t generation, int64_t dur_ns, int64_t wait_ns) {
  seen_ = true;
  if (generation >= 0 && generation <= 2) ++window_.collections[generation];
  ++window_.timed;
  window_.pause_ns += dur_ns;
  window_.longest_ns = std::max(window_.longest_ns, dur_ns);
  window_.wait_ns += wait_ns;
}

void GcAccount::settings(bool enabled) {
  seen_ = true;
  enabled_ = enabled;
}

void GcAccount::untimed(int32_t generation, uint64_t n) {
  seen_ = true;
  if (generation >= 0 && generation <= 2) window_.collections[generation] += n;
}

GcFigures GcAccount::figures(const Acc& a, const ProcessFigures& f, const std::vector<ThreadRow>& threads,
                             bool totals) {
  GcFigures g;
  for (int i = 0; i < 3; ++i) g.collections[i] = a.collections[i];
  g.timed = a.timed;
  g.pause_ns = a.pause_ns;
  g.longest_ns = a.longest_ns;
  if (f.duration_ns > 0) {
    g.time_share = std::min(1.0, static_cast<double>(a.pause_ns) / static_cast<double>(f.duration_ns));
  }
  double waited = 0;  // thread-ns of GIL waiting in the period
  for (const ThreadRow& t : threads) {
    const ThreadFigures& tf = totals ? t.total : t.interval;
    waited += tf.wait_share * static_cast<double>(tf.lifetime_ns);
  }
  if (waited > 0) g.wait_share = std::min(1.0, static_cast<double>(a.wait_ns) / waited);
  return g;
}

void GcAccount::close_window(ProcessRow& row) {
  total_.add(window_);
  if (seen_) {
    row.interval.gc = figures(window_, row.interval, row.threads, false);
    row.total.gc = figures(total_, row.total, row.threads, true);
    row.interval.gc->enabled = row.total.gc->enabled = enabled_;
  }
  window_ = Acc{};
}

void GcAccount::reset_totals() {
  total_ = Acc{};
}

}  // namespace gilspy::top
