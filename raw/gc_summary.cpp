#include "raw/gc_summary.hpp"

#include <algorithm>

namespace gilspy::raw {

void GcSummary::add(const GcCollection& x) {
  seen_ = true;
  if (x.generation >= 0 && x.generation <= 2) {
    ++timed_[x.generation];
  } else {
    ++unfinished_;
  }
  pause_ns_ += x.dur;
  collected_ += x.collected;
  uncollectable_ += x.uncollectable;
  wait_ns_ += x.wait_ns;
  const GcPause p{.ts = x.ts,
                  .dur = x.dur,
                  .generation = x.generation,
                  .tid = x.tid,
                  .waiters = x.waiters,
                  .collected = x.collected};
  if (!longest_ || x.dur > longest_->dur) longest_ = p;
  if (list_threshold_ns_ >= 0 && x.dur >= list_threshold_ns_) {
    if (listed_.size() < kMaxListed) {
      listed_.push_back(p);
    } else {
      ++not_listed_;
    }
  }
}

void GcSummary::add(const GcUntimed& x) {
  seen_ = true;
  if (x.generation >= 0 && x.generation <= 2) untimed_[x.generation] += x.n;
  collected_ += x.collected;
  uncollectable_ += x.uncollectable;
}

void GcSummary::add(const GcSettings& x) {
  seen_ = true;
  if (x.enabled == enabled_ && settings_seen_) return;
  if (!x.enabled && (enabled_ || !settings_seen_)) {
    disabled_since_ = x.ts;
    ++disables_;
  }
  if (x.enabled && disabled_since_ >= 0) {
    disabled_ns_ += std::max<int64_t>(0, x.ts - disabled_since_);
    disabled_since_ = -1;
  }
  enabled_ = x.enabled;
  settings_seen_ = true;
}

int64_t GcSummary::disabled_ns(int64_t end_ns) const {
  return disabled_ns_ + (disabled_since_ >= 0 ? std::max<int64_t>(0, end_ns - disabled_since_) : 0);
}

nlohmann::json GcSummary::to_json(int64_t duration_ns, int64_t wait_ns) const {
  if (!seen_) return nullptr;
  auto per_gen = [](const uint64_t(&v)[3]) { return nlohmann::json::array({v[0], v[1], v[2]}); };
  const uint64_t all[3] = {collections(0), collections(1), collections(2)};
  nlohmann::json listed = nlohmann::json::array();
  for (const GcPause& p : listed_) {
    listed.push_back({{"ts_ns", p.ts},
                      {"dur_ns", p.dur},
                      {"generation", p.generation},
                      {"tid", p.tid},
                      {"waiters", p.waiters},
                      {"collected", p.collected}});
  }
  nlohmann::json j = {
      {"collections", per_gen(all)},
      {"timed", per_gen(timed_)},
      {"untimed", per_gen(untimed_)},
      {"unfinished", unfinished_},
      {"pause_ns", pause_ns_},
      {"longest_ns", longest_ ? longest_->dur : 0},
      {"longest_ts_ns", longest_ ? nlohmann::json(longest_->ts) : nlohmann::json(nullptr)},
      {"longest_generation", longest_ ? nlohmann::json(longest_->generation) : nlohmann::json(nullptr)},
      {"time_share",
       duration_ns > 0 ? static_cast<double>(pause_ns_) / static_cast<double>(duration_ns) : 0.0},
      {"collected", collected_},
      {"uncollectable", uncollectable_},
      {"wait_during_gc_ns", wait_ns_},
      {"wait_share",
       wait_ns > 0 ? std::min(1.0, static_cast<double>(wait_ns_) / static_cast<double>(wait_ns)) : 0.0},
      {"disabled_ns", disabled_ns(duration_ns)},
      {"disables", disables_},
      {"enabled_at_end", enabled_}};
  if (list_threshold_ns_ >= 0) {
    j["threshold_ns"] = list_threshold_ns_;
    j["long_collections"] = std::move(listed);
    j["long_collections_not_listed"] = not_listed_;
  }
  return j;
}

}  // namespace gilspy::raw
