#include "cli/status_sink.hpp"

#include <cstdio>

#include <fmt/format.h>

namespace gilspy::cli {

void StatusLineSink::stats(const LiveStats& live) {
  if (++calls_ % 5 != 0) return;
  const sampler::LoopCounters& loop = live.loop;
  const double elapsed = static_cast<double>(loop.last_ns.load() - loop.start_ns.load()) / 1e9;
  const uint64_t polls = loop.polls.load();
  uint64_t seen = 0, total = 0;
  for (const SessionTarget* t : targets_) {
    seen += t->sampler->counters().handoffs_seen.load();
    total += t->sampler->counters().handoffs_total.load();
  }
  fmt::print(stderr, "\r\033[K[gilspy] {:.1f} s  polls {} ({:.0f}/s)  late {}  hand-offs seen {}/{}", elapsed,
             polls, elapsed > 0 ? static_cast<double>(polls) / elapsed : 0.0, loop.late.load(), seen, total);
  std::fflush(stderr);
}

void StatusLineSink::finish(const SessionEnd&) {
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace gilspy::cli
