#pragma once
// Inside raw/: the SAX reader of raw::read(), for any file the fast path (fast_reader.hpp) does not vouch
// for. It reads anything JSON, delivers the meta and the events as they complete, and reports where and why
// it stopped; raw::read() judges what that means (salvage.hpp).
#include <cstddef>
#include <functional>
#include <istream>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "raw/raw_format.hpp"

namespace gilspy::raw {

// What the SAX reader found.
struct SaxOutcome {
  bool parsed = false;  // the parser reached the end of the document without being stopped
  bool syntax_error = false;
  size_t error_position = 0;  // as the parser counts: one past the offending byte
  std::string error_text;
  std::string shape_problem;    // not a raw file at all (before its meta)
  std::optional<Error> damage;  // after the meta: what is wrong (an event, the nesting, the shape)
  bool meta_seen = false;
  bool end_seen = false;  // the end of the events, ["F"]
};

// Reads `in`: `on_meta` once, `on_record` per event (counted in result.records), format_version and summary
// into `result`. Throws Error(kCorrupt) naming an event that is wrong (unless `salvage`: then it is the
// outcome's damage), Error(kBadInput) naming what the meta lacks, and what the callbacks throw.
SaxOutcome read_sax(std::istream& in, const std::string& name,
                    const std::function<void(const Meta&)>& on_meta,
                    const std::function<void(const Record&)>& on_record, ReadResult& result, bool salvage);

}  // namespace gilspy::raw
