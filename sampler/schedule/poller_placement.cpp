#include "sampler/schedule/poller_placement.hpp"

namespace gilspy::sampler {

PollerPlacement::PollerPlacement(bool enabled, int64_t min_interval_ns)
    : enabled_(enabled), min_interval_ns_(min_interval_ns) {
  CPU_ZERO(&allowed_);
  if (enabled_ && sched_getaffinity(0, sizeof allowed_, &allowed_) != 0) enabled_ = false;
  if (CPU_COUNT(&allowed_) < 2) enabled_ = false;  // nowhere else to go
  current_ = allowed_;
}

void PollerPlacement::update(std::span<const int> holder_cpus, int64_t now) {
  if (!due(now)) return;
  last_ns_ = now;
  cpu_set_t want = allowed_;
  bool known = false;
  for (const int cpu : holder_cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) {
      CPU_CLR(cpu, &want);
      known = true;
    }
  }
  // No holder worth avoiding (none, or only short-lived ones): stay where we are rather than move back and
  // forth (a move costs a migration, ~50 us here).
  if (!known) return;
  if (CPU_COUNT(&want) == 0) want = allowed_;  // every allowed CPU runs a holder: nothing to avoid
  if (CPU_EQUAL(&want, &current_)) return;
  if (sched_setaffinity(0, sizeof want, &want) == 0) {
    current_ = want;
    ++moves_;
  }
}

}  // namespace gilspy::sampler
