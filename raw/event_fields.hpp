#pragma once
// Inside raw/: the fields of one event line (its JSON array, the kind first), for the decoders of every kind
// (record_lines, gc_lines, stack_lines, counter_lines). A field that is missing, of another type or out of
// its range throws `bad(why)`, the Error(kCorrupt) that names the event.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/event_line.hpp"

namespace gilspy::raw {

using BadEvent = std::function<Error(const std::string&)>;

class EventFields {
 public:
  EventFields(const nlohmann::json& a, const BadEvent& bad) : a_(a), bad_(bad) {}

  size_t size() const { return a_.size(); }
  const nlohmann::json& operator[](size_t i) const { return a_[i]; }
  Error bad(const std::string& why) const { return bad_(why); }

  // An integer within int64 (a float would convert past its range undefined).
  int64_t integer(size_t i) const {
    if (i >= a_.size() || !a_[i].is_number_integer())
      throw bad("has no integer at position " + std::to_string(i));
    if (a_[i].is_number_unsigned() && a_[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw bad("has a number out of range at position " + std::to_string(i));
    }
    return a_[i].get<int64_t>();
  }
  // An integer within [low, high]; `what` names it in the error ("a time": "has a time out of range ...").
  int64_t within(size_t i, int64_t low, int64_t high, const char* what) const {
    const int64_t v = integer(i);
    if (v < low || v > high)
      throw bad(std::string("has ") + what + " out of range at position " + std::to_string(i));
    return v;
  }
  // A time on the recording's timeline (event_line.hpp: kMaxEventNs).
  int64_t moment(size_t i) const { return within(i, -kMaxEventNs, kMaxEventNs, "a time"); }
  std::string text(size_t i) const {
    if (i >= a_.size() || !a_[i].is_string()) throw bad("has no string at position " + std::to_string(i));
    return a_[i].get<std::string>();
  }

 private:
  const nlohmann::json& a_;
  const BadEvent& bad_;  // outlives this: the decoders take it by reference from the reader
};

}  // namespace gilspy::raw
