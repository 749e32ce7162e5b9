#pragma once
// One reading of the GIL struct, decoded.
#include <algorithm>
#include <cstdint>
#include <cstring>

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

inline GilSample decode_gil(const uint8_t* bytes, const layouts::GilLayout& g) {
  auto u64 = [&](uint32_t off) {
    uint64_t v;
    std::memcpy(&v, bytes + off, 8);
    return v;
  };
  auto i32 = [&](uint32_t off) {
    int32_t v;
    std::memcpy(&v, bytes + off, 4);
    return v;
  };
  GilSample s;
  s.locked = i32(g.locked);
  s.last_holder = u64(g.last_holder);
  s.switch_number = u64(g.switch_number);
  s.interval_us = std::min(u64(g.interval), kMaxSwitchIntervalUs);
  uint32_t wrefs;
  std::memcpy(&wrefs, bytes + g.cond + g.cond_wrefs, 4);
  s.waiters = wrefs >> g.cond_wrefs_shift;
  if (g.enabled) s.enabled = i32(*g.enabled) != 0;
  return s;
}

}  // namespace gilspy::sampler
