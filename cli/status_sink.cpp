#include "cli/status_sink.hpp"

#include <cstdio>

#include <fmt/format.h>

namespace gilspy::cli {

void StatusLineSink::stats(const LiveStats& live) {
  if (gone_ || ++calls_ % 5 != 0) return;
  const sampler::LoopCounters& loop = live.loop;
  const double elapsed = static_cast<double>(loop.last_ns.load() - loop.start_ns.load()) / 1e9;
  const uint64_t polls = loop.polls.load();
  uint64_t seen = 0, total = 0;
  for (const SessionTarget* t : targets_) {
    seen += t->sampler->counters().handoffs_seen.load();
    total += t->sampler->counters().handoffs_total.load();
  }
  put(fmt::format("\r\033[K[gilspy] {:.1f} s  polls {} ({:.0f}/s)  late {}  hand-offs seen {}/{}", elapsed,
                  polls, elapsed > 0 ? static_cast<double>(polls) / elapsed : 0.0, loop.late.load(), seen,
                  total));
}

void StatusLineSink::finish(const SessionEnd&) {
  put("\r\033[K");
}

// The terminal may go away mid-recording (a closed ssh session: EIO): then the status line stops, nothing
// else.
void StatusLineSink::put(const std::string& text) {
  if (gone_) return;
  if (std::fputs(text.c_str(), stderr) < 0 || std::fflush(stderr) != 0) gone_ = true;
}

}  // namespace gilspy::cli
