#include "raw/gc_lines.hpp"

#include <cstdint>

#include "raw/event_fields.hpp"

namespace gilspy::raw {

using nlohmann::json;

std::string gc_line(const GcCollection& x) {
  return json::array({"G", x.tid, x.ts, x.dur, x.generation, x.collected, x.uncollectable, x.waiters,
                      x.wait_ns, x.hold_lead, x.held_dur, x.held_from})
      .dump();
}
std::string gc_line(const GcUntimed& x) {
  return json::array({"GI", x.ts, x.window, x.generation, x.n, x.collected, x.uncollectable}).dump();
}
std::string gc_line(const GcCounts& x) {
  return json::array({"GC", x.ts, x.count[0], x.count[1], x.count[2]}).dump();
}
std::string gc_line(const GcSettings& x) {
  return json::array({"GS", x.ts, x.enabled ? 1 : 0, x.threshold[0], x.threshold[1], x.threshold[2]}).dump();
}

Record gc_record_from_json(const json& a, const std::function<Error(const std::string&)>& bad) {
  // The same bounds as the other kinds (event_line.hpp): times and durations within 2^60 ns, so that every
  // sum a reader forms stays far from overflow.
  const EventFields f(a, bad);
  auto num = [&](size_t i) { return f.integer(i); };
  auto within = [&](size_t i, int64_t lo, int64_t hi) { return f.within(i, lo, hi, "a value"); };
  auto moment = [&](size_t i) { return within(i, -kMaxEventNs, kMaxEventNs); };
  auto duration = [&](size_t i) { return within(i, 0, kMaxEventNs); };
  auto count = [&](size_t i) { return static_cast<uint64_t>(within(i, 0, INT64_MAX)); };
  auto generation = [&](size_t i, int32_t lowest) { return static_cast<int32_t>(within(i, lowest, 2)); };
  const std::string tag = a[0].get<std::string>();
  if (tag == "G") {
    GcCollection r{.tid = num(1),
                   .ts = moment(2),
                   .dur = duration(3),
                   .generation = generation(4, -1),
                   .collected = count(5),
                   .uncollectable = count(6),
                   .waiters = count(7),
                   .wait_ns = duration(8),
                   .hold_lead = within(9, -1, kMaxEventNs),
                   .held_dur = duration(10),
                   .held_from = a.size() > 11 ? duration(11) : 0};  // absent in format 3's first files
    if (r.held_from > r.dur || r.held_dur > r.dur - r.held_from)
      throw bad("has a held part outside the collection");
    return r;
  }
  if (tag == "GI") {
    return GcUntimed{.ts = moment(1),
                     .window = duration(2),
                     .generation = generation(3, 0),
                     .n = count(4),
                     .collected = count(5),
                     .uncollectable = count(6)};
  }
  if (tag == "GC") return GcCounts{.ts = moment(1), .count = {num(2), num(3), num(4)}};
  if (tag == "GS") {
    return GcSettings{
        .ts = moment(1), .enabled = within(2, 0, 1) == 1, .threshold = {num(3), num(4), num(5)}};
  }
  throw bad("has an unknown kind " + a[0].dump(-1, ' ', true, json::error_handler_t::replace));
}

}  // namespace gilspy::raw
