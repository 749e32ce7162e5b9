// A record to its raw event line and back (raw_format.hpp's record_line, event_line.hpp's record_from_json):
// the kinds of format_version 1 and 2 here, the later ones in gc_lines, stack_lines and counter_lines.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "base/error.hpp"
#include "raw/counter_lines.hpp"
#include "raw/event_line.hpp"
#include "raw/gc_lines.hpp"
#include "raw/raw_format.hpp"
#include "raw/stack_lines.hpp"

namespace gilspy::raw {

using nlohmann::json;

std::optional<std::string> record_line(const Record& r) {
  return std::visit(
      overloaded{
          // A thread name comes from the kernel and need not be UTF-8: replace what is not, never throw.
          [](const ThreadStart& x) -> std::optional<std::string> {
            json a = json::array({"T", x.tid, x.ts, x.name, x.tstate});
            if (x.ns_tid != 0) a.push_back(x.ns_tid);
            return a.dump(-1, ' ', false, json::error_handler_t::replace);
          },
          [](const Hold& x) -> std::optional<std::string> {
            return json::array({"H", x.tid, x.ts, x.dur}).dump();
          },
          [](const Wait& x) -> std::optional<std::string> {
            return json::array({"W", x.tid, x.ts, x.dur}).dump();
          },
          [](const Waiters& x) -> std::optional<std::string> {
            return json::array({"N", x.ts, x.n}).dump();
          },
          [](const ThreadEnd& x) -> std::optional<std::string> {
            return x.state_se_ns < 0 ? json::array({"E", x.tid, x.ts}).dump()
                                     : json::array({"E", x.tid, x.ts, x.state_se_ns}).dump();
          },
          [](const Stats& x) -> std::optional<std::string> {
            return json::array({"S", x.ts, x.polls, x.late, x.missed, x.handoffs_seen, x.handoffs_total})
                .dump();
          },
          [](const ProcessStopped& x) -> std::optional<std::string> {
            return json::array({"P", x.ts, x.dur}).dump();
          },
          [](const ThreadState&) -> std::optional<std::string> { return std::nullopt; },
          [](const GcCollection& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcUntimed& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcCounts& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcSettings& x) -> std::optional<std::string> { return gc_line(x); },
          [](const FrameDef& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackDef& x) -> std::optional<std::string> { return stack_line(x); },
          [](const ThreadName& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackSample& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackStats& x) -> std::optional<std::string> { return stack_line(x); },
          [](const CounterSetup& x) -> std::optional<std::string> { return counter_setup_line(x); },
          [](const CounterSample& x) -> std::optional<std::string> { return counter_sample_line(x); },
          [](const ThreadSwitches& x) -> std::optional<std::string> { return thread_switches_line(x); },
      },
      r);
}

// One event line; nullopt for ["F"], the end of the events. Throws Error(kCorrupt) naming the event.
std::optional<Record> record_from_json(const json& a, size_t index, const std::string& name) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kCorrupt, name + ": event #" + std::to_string(index + 1) + " " + why);
  };
  // One letter, or two (format_version 3: the GC kinds "G?", the stack kinds "F?" and "K?", the counters'
  // "CD" and "CS").
  const std::string tag = a.is_array() && !a.empty() && a[0].is_string() ? a[0].get<std::string>() : "";
  if (is_counter_kind(tag)) return counter_record_from_json(a, bad);
  if (tag.empty() ||
      (tag.size() != 1 && !(tag.size() == 2 && (tag[0] == 'F' || tag[0] == 'K' || tag[0] == 'G')))) {
    throw bad("is not [\"<kind>\", ...]");
  }
  // The garbage collector's kinds (format_version 3): "G", "GI", "GC", "GS" (raw/gc_lines.cpp).
  if (tag[0] == 'G') return gc_record_from_json(a, bad);
  auto num = [&](size_t i) -> int64_t {
    if (i >= a.size() || !a[i].is_number_integer())
      throw bad("has no integer at position " + std::to_string(i));
    if (a[i].is_number_unsigned() && a[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw bad("has a number out of range at position " + std::to_string(i));
    }
    return a[i].get<int64_t>();
  };
  auto count = [&](size_t i) { return static_cast<uint64_t>(num(i)); };
  auto moment = [&](size_t i) {
    const int64_t t = num(i);
    if (t < -kMaxEventNs || t > kMaxEventNs)
      throw bad("has a time out of range at position " + std::to_string(i));
    return t;
  };
  auto duration = [&](size_t i) {
    const int64_t d = num(i);
    if (d < 0) throw bad("has a negative duration");
    if (d > kMaxEventNs) throw bad("has a duration out of range");
    return d;
  };
  switch (a[0].get<std::string>()[0]) {
    case 'T': {
      ThreadStart r;
      r.tid = num(1);
      r.ts = moment(2);
      if (a.size() < 4 || !a[3].is_string()) throw bad("has no thread name");
      r.name = a[3].get<std::string>();
      r.tstate = a.size() > 4 && a[4].is_number_unsigned() ? a[4].get<uint64_t>() : 0;
      r.ns_tid = a.size() > 5 && a[5].is_number_integer() ? a[5].get<int64_t>() : 0;
      return r;
    }
    case 'H':
      return Hold{.tid = num(1), .ts = moment(2), .dur = duration(3)};
    case 'W':
      return Wait{.tid = num(1), .ts = moment(2), .dur = duration(3)};
    case 'N':
      return Waiters{.ts = moment(1), .n = count(2)};
    case 'E':
      return ThreadEnd{.tid = num(1), .ts = moment(2), .state_se_ns = a.size() > 3 ? duration(3) : -1};
    case 'S':
      return Stats{.ts = moment(1),
                   .polls = count(2),
                   .late = count(3),
                   .missed = count(4),
                   .handoffs_seen = count(5),
                   .handoffs_total = count(6)};
    case 'P':
      return ProcessStopped{.ts = num(1), .dur = duration(2)};
    case 'F':
      if (tag.size() == 1 && a.size() == 1) return std::nullopt;  // ["F"]: the end of the events
      return stack_record_from_json(a, tag, bad);
    case 'K':
      return stack_record_from_json(a, tag, bad);
    default:
      throw bad("has an unknown kind " + a[0].dump(-1, ' ', true, json::error_handler_t::replace));
  }
}

}  // namespace gilspy::raw
