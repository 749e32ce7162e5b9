#pragma once
// `gilspy check`: the sampler against every take and drop of the same window (--exact's probes added up on
// the side), per thread: hold and wait both ways, the difference, and whether the sampler's 95 % interval
// held. Pure functions of what a recording gathered: unit-tested on made-up figures.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/summary.hpp"

namespace gilspy::cli {

struct ExactThreadTotal {
  int64_t tid = 0;
  int64_t hold_ns = 0, wait_ns = 0;
};

struct CheckRow {
  int64_t tid = 0;
  std::string name;     // target text: escaped when printed
  int64_t life_ns = 0;  // the thread's time in the recording (the shares' denominator, both ways)
  double sampled_hold = 0, sampled_wait = 0;
  double exact_hold = 0, exact_wait = 0;
  double ci95 = -1;  // the sampler's half-width; -1: not known
  bool seen_by_sampler = true;
  // |Δ| of both shares within ci95; unknown (no interval) counts as not judged
  bool judged() const { return ci95 >= 0 && seen_by_sampler; }
  bool held() const;
  double hold_diff_pp() const { return 100 * (sampled_hold - exact_hold); }
  double wait_diff_pp() const { return 100 * (sampled_wait - exact_wait); }
};

// Every thread of the recording, busiest first by the probes' hold + wait. A thread the probes saw and the
// sampler never did is a row too (its life: the recording's).
std::vector<CheckRow> check_rows(const raw::SummaryBuilder& sampled,
                                 const std::vector<ExactThreadTotal>& exact);

struct CheckHeader {
  int64_t pid = 0;
  std::string python_version;
  double seconds = 0;
  const raw::LoopFigures* figures = nullptr;
};

// The answer first: how many intervals held and the worst differences; then the table (at most
// `max_rows` rows, 0: all) and what each side cost.
std::string format_check(const CheckHeader& h, const std::vector<CheckRow>& rows, size_t max_rows);
nlohmann::json check_json(const CheckHeader& h, const std::vector<CheckRow>& rows);

}  // namespace gilspy::cli
