#pragma once
// Raw lines of the garbage collector's record kinds (raw/gc_records.hpp): written by record_line(), read by
// the reader for every tag that starts with "G" (format_version 3).
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/records.hpp"

namespace gilspy::raw {

std::string gc_line(const GcCollection& x);
std::string gc_line(const GcUntimed& x);
std::string gc_line(const GcCounts& x);
std::string gc_line(const GcSettings& x);

// One event line whose tag starts with "G"; `bad(why)` makes the error naming the event. Throws it for an
// unknown G tag or a field that is missing, not an integer or out of range.
Record gc_record_from_json(const nlohmann::json& a, const std::function<Error(const std::string&)>& bad);

}  // namespace gilspy::raw
