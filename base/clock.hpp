#pragma once
// The clocks every floor reads: CLOCK_MONOTONIC for all times inside gilspy and in its records (raw files
// anchor it to CLOCK_REALTIME once, at the start), in ns.
#include <time.h>

#include <cstdint>

namespace gilspy {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace gilspy
