// A record to its raw event line and back (raw_format.hpp's record_line, event_line.hpp's record_from_json):
// the kinds of format_version 1 and 2 here, the later ones in gc_lines, stack_lines and counter_lines.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "base/error.hpp"
#include "raw/counter_lines.hpp"
#include "raw/event_fields.hpp"
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

namespace {

// A hold's, a wait's or a stop's duration (and a thread end's state_se_ns, held to the same bounds).
int64_t gil_duration(const EventFields& f, size_t i) {
  const int64_t d = f.integer(i);
  if (d < 0) throw f.bad("has a negative duration");
  if (d > kMaxEventNs) throw f.bad("has a duration out of range");
  return d;
}
uint64_t gil_count(const EventFields& f, size_t i) {
  return static_cast<uint64_t>(f.integer(i));
}

ThreadStart read_thread_start(const EventFields& f) {
  ThreadStart r;
  r.tid = f.integer(1);
  r.ts = f.moment(2);
  if (f.size() < 4 || !f[3].is_string()) throw f.bad("has no thread name");
  r.name = f[3].get<std::string>();
  r.tstate = f.size() > 4 && f[4].is_number_unsigned() ? f[4].get<uint64_t>() : 0;
  r.ns_tid = f.size() > 5 && f[5].is_number_integer() ? f[5].get<int64_t>() : 0;
  return r;
}

// The kinds of format_version 1 and 2, a letter each.
Record read_gil_record(const EventFields& f, char kind) {
  switch (kind) {
    case 'T':
      return read_thread_start(f);
    case 'H':
      return Hold{.tid = f.integer(1), .ts = f.moment(2), .dur = gil_duration(f, 3)};
    case 'W':
      return Wait{.tid = f.integer(1), .ts = f.moment(2), .dur = gil_duration(f, 3)};
    case 'N':
      return Waiters{.ts = f.moment(1), .n = gil_count(f, 2)};
    case 'E':
      return ThreadEnd{
          .tid = f.integer(1), .ts = f.moment(2), .state_se_ns = f.size() > 3 ? gil_duration(f, 3) : -1};
    case 'S':
      return Stats{.ts = f.moment(1),
                   .polls = gil_count(f, 2),
                   .late = gil_count(f, 3),
                   .missed = gil_count(f, 4),
                   .handoffs_seen = gil_count(f, 5),
                   .handoffs_total = gil_count(f, 6)};
    case 'P':
      return ProcessStopped{.ts = f.integer(1), .dur = gil_duration(f, 2)};
    default:
      throw f.bad("has an unknown kind " + f[0].dump(-1, ' ', true, json::error_handler_t::replace));
  }
}

// One letter, or two (format_version 3: the GC kinds "G?", the stack kinds "F?" and "K?"; the counters' "CD"
// and "CS" are known before this is asked).
bool tag_has_kind_shape(const std::string& tag) {
  return tag.size() == 1 || (tag.size() == 2 && (tag[0] == 'F' || tag[0] == 'K' || tag[0] == 'G'));
}

}  // namespace

std::optional<Record> record_from_json(const json& a, size_t index, const std::string& name) {
  const BadEvent bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kCorrupt, name + ": event #" + std::to_string(index + 1) + " " + why);
  };
  const std::string tag = a.is_array() && !a.empty() && a[0].is_string() ? a[0].get<std::string>() : "";
  if (is_counter_kind(tag)) return counter_record_from_json(a, bad);
  if (!tag_has_kind_shape(tag)) throw bad("is not [\"<kind>\", ...]");
  switch (tag[0]) {
    case 'G':  // "G", "GI", "GC", "GS" (raw/gc_lines.cpp)
      return gc_record_from_json(a, bad);
    case 'F':
      if (tag.size() == 1 && a.size() == 1) return std::nullopt;  // ["F"]: the end of the events
      return stack_record_from_json(a, tag, bad);
    case 'K':
      return stack_record_from_json(a, tag, bad);
    default:
      return read_gil_record(EventFields(a, bad), tag[0]);
  }
}

}  // namespace gilspy::raw
