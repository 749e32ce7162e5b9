#pragma once
// The garbage collector's figures of a recording, from its G records (raw/gc_records.hpp): collections per
// generation (timed and too short to time), pauses, what was freed, the GIL waiting that happened during
// collections, and the collections longer than a threshold (`record --gc-threshold-ms`). Part of
// SummaryBuilder (summary.hpp); its JSON is the summary's "gc" member.
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/gc_records.hpp"

namespace gilspy::raw {

struct GcPause {
  int64_t ts = 0;  // on the recording's timeline
  int64_t dur = 0;
  int32_t generation = -1;
  int64_t tid = 0;
  uint64_t waiters = 0;
  uint64_t collected = 0;
};

class GcSummary {
 public:
  // Collections at least this long are kept for listing (at most kMaxListed of them); negative: none.
  void set_list_threshold(int64_t ns) { list_threshold_ns_ = ns; }
  static constexpr size_t kMaxListed = 1000;

  void add(const GcCollection& x);
  void add(const GcUntimed& x);
  void add(const GcCounts&) { seen_ = true; }
  void add(const GcSettings& x);

  bool seen() const { return seen_; }  // the recording read the GC state at all
  // Per generation (0-2): collections seen running (timed) and collections counted between two polls.
  uint64_t timed(int g) const { return timed_[g]; }
  uint64_t untimed(int g) const { return untimed_[g]; }
  uint64_t collections(int g) const { return timed_[g] + untimed_[g]; }
  uint64_t unfinished() const { return unfinished_; }  // still running when the recording ended
  int64_t pause_ns() const { return pause_ns_; }       // timed collections together
  const std::optional<GcPause>& longest() const { return longest_; }
  uint64_t collected() const { return collected_; }
  uint64_t uncollectable() const { return uncollectable_; }
  int64_t wait_during_gc_ns() const { return wait_ns_; }
  int64_t disabled_ns(int64_t end_ns) const;  // time with gc.disable() in force, up to end_ns
  uint64_t disables() const { return disables_; }
  bool enabled_at_end() const { return enabled_; }
  const std::vector<GcPause>& listed() const { return listed_; }
  uint64_t not_listed() const { return not_listed_; }  // past kMaxListed
  int64_t list_threshold_ns() const { return list_threshold_ns_; }

  // `duration_ns`: the recording's; `wait_ns`: all GIL waiting in it (every thread's).
  nlohmann::json to_json(int64_t duration_ns, int64_t wait_ns) const;

 private:
  bool seen_ = false;
  uint64_t timed_[3] = {0, 0, 0}, untimed_[3] = {0, 0, 0};
  uint64_t unfinished_ = 0;
  int64_t pause_ns_ = 0;
  std::optional<GcPause> longest_;
  uint64_t collected_ = 0, uncollectable_ = 0;
  int64_t wait_ns_ = 0;
  bool settings_seen_ = false, enabled_ = true;
  int64_t disabled_since_ = -1, disabled_ns_ = 0;
  uint64_t disables_ = 0;
  int64_t list_threshold_ns_ = -1;
  std::vector<GcPause> listed_;
  uint64_t not_listed_ = 0;
};

}  // namespace gilspy::raw
