#pragma once
// Inside raw/: what the two readers of raw files share. sax_reader.cpp reads anything JSON and says precisely
// what is wrong where; fast_reader.cpp reads files exactly as the Writer writes them, line by line, and hands
// anything else to the SAX reader. Both apply the same limits and turn an event into a Record the same way
// (record_lines.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "raw/records.hpp"

namespace gilspy::raw {

// Deeper than anything gilspy writes (the summary's threads are 3 levels down), shallow enough that no reader
// of the values built from a file (dump, destructors, copies) can run out of stack.
inline constexpr int kMaxNesting = 64;
// Times and durations of events are bounded so that every sum the readers form (ts + dur, a trace's offset +
// ts, a thread's total hold time) stays far from int64 overflow: 2^60 ns is 36 years.
inline constexpr int64_t kMaxEventNs = int64_t{1} << 60;
inline constexpr int64_t kMaxTotalDurationNs = int64_t{1} << 62;

// One event line; nullopt for ["F"], the end of the events. Throws Error(kCorrupt) naming the event (#index+1
// of file `name`).
std::optional<Record> record_from_json(const nlohmann::json& a, size_t index, const std::string& name);

}  // namespace gilspy::raw
