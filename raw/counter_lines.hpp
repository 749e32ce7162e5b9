#pragma once
// The raw lines of the counter records (format_version 3): "CD" (which counters the "C" lines carry, and the
// ones asked for that could not be counted), "C" (one thread's scheduler figures and counters over a stretch
// in one GIL role) and "CS" (a thread's voluntary / involuntary switches so far). record_lines.cpp calls
// these for those kinds; docs/raw-format.md describes the lines.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/records.hpp"

namespace gilspy::raw {

std::string counter_setup_line(const CounterSetup& r);
std::string counter_sample_line(const CounterSample& r);
std::string thread_switches_line(const ThreadSwitches& r);

// Whether `kind` (the event's first element) names a counter record.
bool is_counter_kind(const std::string& kind);

// Parses one counter line. `bad(why)` makes the Error(kCorrupt) that names the event; it is thrown for a line
// that is not one of these kinds as written (missing or out-of-range fields). Unknown counter names in a "CD"
// line read as CounterKind::kUnknown, so a newer writer's counters are skipped, not refused.
Record counter_record_from_json(const nlohmann::json& a, const std::function<Error(const std::string&)>& bad);

// The fast reader's path for "C" lines, the most numerous of these (up to three per thread and 100 ms
// window): parsed by hand when `line` is exactly as counter_sample_line() writes it and within the same
// limits, giving what counter_record_from_json() would; false for anything else, which is then read through
// nlohmann::json.
bool fast_counter_sample(std::string_view line, CounterSample& out);

}  // namespace gilspy::raw
