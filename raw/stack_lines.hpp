#pragma once
// The raw lines of the stack and thread-name record kinds (raw/records.hpp: FrameDef "F", StackDef "FS",
// ThreadName "KN", StackSample "K", StackStats "KC"; format_version 3). Kept apart from record_lines.cpp,
// which calls these for its kinds.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/records.hpp"

namespace gilspy::raw {

std::string stack_line(const FrameDef& r);
std::string stack_line(const StackDef& r);
std::string stack_line(const ThreadName& r);
std::string stack_line(const StackSample& r);
std::string stack_line(const StackStats& r);

// One stack-kind event from its JSON array (tag "F" with fields, "FS", "K", "KN", "KC"). `bad(why)` makes the
// error naming the event. Throws it for a line that is not one of these kinds as written.
Record stack_record_from_json(const nlohmann::json& a, const std::string& tag,
                              const std::function<Error(const std::string&)>& bad);

}  // namespace gilspy::raw
