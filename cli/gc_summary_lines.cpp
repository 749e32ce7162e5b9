#include "cli/gc_summary_lines.hpp"
#include "cli/summary_text.hpp"

#include <iterator>

#include <fmt/format.h>

namespace gilspy::cli {
namespace {

std::string gc_ms(int64_t ns) {
  return ns < 1'000'000 ? fmt::format("{:.2f} ms", static_cast<double>(ns) / 1e6)
                        : fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
}

}  // namespace

void gc_summary_lines(std::string& out, const raw::SummaryBuilder& summary, const std::string& why_off) {
  const raw::GcSummary& gc = summary.gc();
  auto add = std::back_inserter(out);
  if (!gc.seen()) {
    if (!why_off.empty()) fmt::format_to(add, "  GC: {}\n", why_off);
    return;
  }
  const uint64_t total = gc.collections(0) + gc.collections(1) + gc.collections(2);
  const uint64_t timed = gc.timed(0) + gc.timed(1) + gc.timed(2);
  fmt::format_to(add,
                 "  GC: {} collections (gen0 {}, gen1 {}, gen2 {}); {} timed, {} too short to time between "
                 "two polls (counted, not timed){}\n",
                 total, gc.collections(0), gc.collections(1), gc.collections(2), timed, total - timed,
                 gc.unfinished() > 0 ? fmt::format("; {} still running at the end", gc.unfinished()) : "");
  const int64_t duration = summary.duration_ns();
  const int64_t waited = summary.wait_ns();
  if (const auto& longest = gc.longest()) {
    fmt::format_to(add,
                   "    paused {} in all ({:.1f} % of the recording), longest {} (gen {} at {:.3f} s); "
                   "{:.1f} % of all GIL waiting happened during collections\n",
                   gc_ms(gc.pause_ns()),
                   percent_of(static_cast<double>(gc.pause_ns()), static_cast<double>(duration)),
                   gc_ms(longest->dur), longest->generation, static_cast<double>(longest->ts) / 1e9,
                   percent_of(static_cast<double>(gc.wait_during_gc_ns()), static_cast<double>(waited)));
  }
  if (gc.disables() > 0 || !gc.enabled_at_end()) {
    fmt::format_to(
        add, "    gc.disable() in force for {:.2f} s of the recording ({} time{}); enabled at the end: {}\n",
        static_cast<double>(gc.disabled_ns(duration)) / 1e9, gc.disables(), gc.disables() == 1 ? "" : "s",
        gc.enabled_at_end() ? "yes" : "no");
  }
  if (gc.list_threshold_ns() < 0) return;
  const auto& listed = gc.listed();
  fmt::format_to(add, "  GC collections of {} or longer: {}\n", gc_ms(gc.list_threshold_ns()),
                 listed.size() + gc.not_listed());
  if (listed.empty()) return;
  fmt::format_to(add, "    {:>10}  {:>3}  {:>10}  {:>7}  {:>10}  {:>8}\n", "AT", "GEN", "PAUSE", "WAITERS",
                 "FREED", "THREAD");
  for (const raw::GcPause& p : listed) {
    fmt::format_to(add, "    {:>8.3f} s  {:>3}  {:>10}  {:>7}  {:>10}  {:>8}\n",
                   static_cast<double>(p.ts) / 1e9,
                   p.generation < 0 ? std::string("?") : std::to_string(p.generation), gc_ms(p.dur),
                   p.waiters, p.collected, p.tid == 0 ? std::string("-") : std::to_string(p.tid));
  }
  if (gc.not_listed() > 0) fmt::format_to(add, "    + {} more (not listed)\n", gc.not_listed());
}

}  // namespace gilspy::cli
