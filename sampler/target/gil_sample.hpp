#pragma once
// One reading of the GIL struct, decoded.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "base/byte_fields.hpp"
#include "cpython_layouts/layout.hpp"

namespace gilspy::sampler {

struct GilSample {
  int32_t locked = -1;         // -1 not created, 0 free, 1 held
  uint64_t last_holder = 0;    // PyThreadState* of the last taker (not cleared on release)
  uint64_t switch_number = 0;  // hand-offs between different threads so far
  uint64_t interval_us = 0;    // sys.getswitchinterval() in µs, at most kMaxSwitchIntervalUs
  uint32_t waiters = 0;        // threads inside pthread_cond_wait on the GIL's cond
  bool enabled = true;         // false: free-threaded build running without a GIL

  uint64_t holder() const { return locked == 1 ? last_holder : 0; }
};

// A switch interval past this (11.6 days) is read as this: the target's word is its own, and gilspy computes
// times in ns from it (a forged 2^63 overflowed them).
inline constexpr uint64_t kMaxSwitchIntervalUs = 1'000'000'000'000;

// The GIL struct's fields from `bytes` (read from its address); nullopt when a field of the layout does not
// lie inside them (a table that does not fit what was read: nothing is decided from it).
inline std::optional<GilSample> decode_gil(RemoteBytes bytes, const layouts::GilLayout& g) {
  FieldReader r(bytes);
  GilSample s;
  s.locked = r.get(g.locked);
  s.last_holder = r.get(g.last_holder);
  s.switch_number = r.get(g.switch_number);
  s.interval_us = std::min(r.get(g.interval), kMaxSwitchIntervalUs);
  s.waiters = r.get(g.cond_wrefs, g.cond) >> g.cond_wrefs_shift;
  if (g.enabled) s.enabled = r.get(*g.enabled) != 0;
  if (!r.complete()) return std::nullopt;
  return s;
}

}  // namespace gilspy::sampler
