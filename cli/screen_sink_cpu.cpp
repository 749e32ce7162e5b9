// ScreenSink's CPU columns: the sampler's per-role counter records into the top model's CPU pieces.
#include "cli/screen_sink.hpp"

namespace gilspy::cli {

namespace {

top::Role top_role(raw::GilRole r) {
  switch (r) {
    case raw::GilRole::kHolding:
      return top::Role::kHolding;
    case raw::GilRole::kWaiting:
      return top::Role::kWaiting;
    case raw::GilRole::kReleased:
      return top::Role::kReleased;
  }
  return top::Role::kReleased;
}

}  // namespace

void ScreenSink::counter_setup(raw::TargetId id, const raw::CounterSetup& s) {
  CounterIndex& ix = counter_index_[id];
  ix = CounterIndex{};
  for (uint8_t i = 0; i < s.count && i < raw::kMaxCounterValues; ++i) {
    switch (s.kinds[i]) {
      case raw::CounterKind::kCycles:
        ix.cycles = i;
        break;
      case raw::CounterKind::kInstructions:
        ix.instructions = i;
        break;
      case raw::CounterKind::kCacheMisses:
        ix.cache_misses = i;
        break;
      case raw::CounterKind::kBranchMisses:
        ix.branch_misses = i;
        break;
      default:
        break;
    }
  }
}

void ScreenSink::counter_sample(raw::TargetId id, const raw::CounterSample& s) {
  const CounterIndex ix = counter_index_[id];
  auto value = [&](int i) { return i >= 0 && i < s.count ? s.values[static_cast<size_t>(i)] : 0; };
  top::CpuPiece p;
  p.time_ns = s.time_ns;
  p.cpu_ns = s.cpu_ns;
  p.run_delay_ns = s.run_delay_ns;
  p.slices = s.slices;
  p.counted = ix.cycles >= 0 && ix.instructions >= 0 && ix.cycles < s.count && ix.instructions < s.count;
  p.cycles = value(ix.cycles);
  p.instructions = value(ix.instructions);
  p.misses_counted = p.counted && ix.cache_misses >= 0 && ix.branch_misses >= 0 &&
                     ix.cache_misses < s.count && ix.branch_misses < s.count;
  p.cache_misses = value(ix.cache_misses);
  p.branch_misses = value(ix.branch_misses);
  model_.cpu(id, s.tid, top_role(s.role), s.ts, s.dur, p);  // spread over its window
}

}  // namespace gilspy::cli
