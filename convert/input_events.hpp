#pragma once
// Inside convert/: one recording's events into a trace being written. input_events.cpp does the work (the
// same lanes, slices and counters for a plain conversion and for a merge); chrome_trace.cpp calls it for each
// input of a trace of its own, merge_trace.cpp to add GIL lanes to another program's trace, with its own
// output (maybe a gzip stream) and placement (that program's pid, free tids).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "convert/chrome_trace.hpp"
#include "convert/json_writer.hpp"
#include "convert/lane_placement.hpp"

namespace gilspy::convert {

struct InputEventsOptions {
  bool salvage = false;
  LanePlacement* placement = nullptr;  // null: the recording's pid (report.trace_pid) and its OS tids
  bool ts_as_string = false;           // "ts":"1736405443863674.400", as Ascend's trace_view.json writes ts
  bool frame_slices = true;  // the sampled frames as slices nested under the GIL slices (else only in args)
};

// Streams the raw file `report.path` into the traceEvents array being written to `out`, its times relative
// to `base_ns` (ns since the Unix epoch): `events` is the number of events already in the array (for the
// separator) and grows by those written. Returns the input's entry for otherData ("inputs") and fills
// `report`. Throws as convert_to_chrome_trace().
nlohmann::json write_input_events(JsonWriter& out, size_t& events, ConvertInputReport& report,
                                  int64_t base_ns, const InputEventsOptions& options);

// A raw file's metadata alone (the first lines). Throws Error(kIo) / Error(kBadInput) naming the file.
raw::Meta read_input_meta(const std::string& path);

}  // namespace gilspy::convert
