#pragma once
// The counters `--counters` can ask for, by the names `perf` uses, and what raw files call them. Only names
// and kinds live here (the sampler maps each kind to a perf_event_attr in sampler/perf_counters.cpp), so the
// raw reader and `convert` know them without the sampler.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gilspy::raw {

// The values of one "C" line after its scheduler figures: at most this many counters per thread. A thread's
// counters are one perf group, which the PMU must count all at once, so a group holds a few hardware events
// at most anyway; and every record kind is as large as the largest (raw::Record is a variant crossing a
// preallocated queue), so the values are kept to the four software events and four hardware ones.
inline constexpr size_t kMaxCounterValues = 8;

enum class CounterKind : uint8_t {
  kUnknown,  // a name this gilspy does not know (a newer writer): its values are read and left alone
  kTaskClock,
  kContextSwitches,
  kCpuMigrations,
  kPageFaults,
  kCycles,
  kInstructions,
  kCacheReferences,
  kCacheMisses,
  kBranches,
  kBranchMisses,
  kStalledCyclesFrontend,
  kStalledCyclesBackend,
  kRefCycles,
};

struct CounterKindInfo {
  CounterKind kind;
  const char* name;  // as perf names it (`perf list`)
  bool hardware;     // needs the CPU's PMU (a VM often has none)
};

// In the order `--counters all` asks for them: the software events, then the hardware events that matter
// most for a GIL question first (cycles and instructions give IPC), so a group that does not fit the PMU
// loses the least useful ones.
inline constexpr std::array<CounterKindInfo, 13> kCounterKinds{{
    {CounterKind::kTaskClock, "task-clock", false},
    {CounterKind::kContextSwitches, "context-switches", false},
    {CounterKind::kCpuMigrations, "cpu-migrations", false},
    {CounterKind::kPageFaults, "page-faults", false},
    {CounterKind::kCycles, "cycles", true},
    {CounterKind::kInstructions, "instructions", true},
    {CounterKind::kCacheMisses, "cache-misses", true},
    {CounterKind::kBranchMisses, "branch-misses", true},
    {CounterKind::kCacheReferences, "cache-references", true},
    {CounterKind::kBranches, "branches", true},
    {CounterKind::kStalledCyclesFrontend, "stalled-cycles-frontend", true},
    {CounterKind::kStalledCyclesBackend, "stalled-cycles-backend", true},
    {CounterKind::kRefCycles, "ref-cycles", true},
}};

inline const char* counter_name(CounterKind k) {
  for (const auto& info : kCounterKinds) {
    if (info.kind == k) return info.name;
  }
  return "unknown";
}

inline std::optional<CounterKind> counter_kind_named(std::string_view name) {
  for (const auto& info : kCounterKinds) {
    if (name == info.name) return info.kind;
  }
  return std::nullopt;
}

inline bool counter_is_hardware(CounterKind k) {
  for (const auto& info : kCounterKinds) {
    if (info.kind == k) return info.hardware;
  }
  return false;
}

}  // namespace gilspy::raw
