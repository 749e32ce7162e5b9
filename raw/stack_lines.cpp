#include "raw/stack_lines.hpp"

#include <algorithm>
#include <cstdint>

#include "base/error.hpp"
#include "raw/event_fields.hpp"

namespace gilspy::raw {

using nlohmann::json;

namespace {

// Strings from the target need not be valid UTF-8 by the time they get here (a torn read is dropped by the
// sampler, but a file may be edited): replace what is not, never throw.
std::string dump(const json& a) {
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr size_t kMaxStackDepth = 4096;  // far above --stack-depth's largest value

}  // namespace

std::string stack_line(const FrameDef& r) {
  return dump(json::array({"F", r.id, r.ts, r.qualname, r.file, r.line, r.first_line}));
}
std::string stack_line(const StackDef& r) {
  return dump(json::array({"FS", r.id, r.ts, r.truncated ? 1 : 0, r.frames}));
}
std::string stack_line(const ThreadName& r) {
  return dump(json::array({"KN", r.tid, r.ts, r.name, r.os_name}));
}
std::string stack_line(const StackSample& r) {
  const char* role = r.role == GilRole::kWaiting ? "w" : r.role == GilRole::kReleased ? "r" : "h";
  return dump(json::array({"K", r.tid, r.ts, r.since, role, r.stack}));
}
std::string stack_line(const StackStats& r) {
  return dump(json::array({"KC", r.ts, r.walks, r.samples, r.torn, r.invalid, r.skipped, r.truncated,
                           r.frames, r.bytes, r.read_ns, r.name_reads, r.reused}));
}

namespace {

uint32_t stack_id(const EventFields& f, size_t i) {
  return static_cast<uint32_t>(f.within(i, 1, UINT32_MAX, "an id"));
}
int32_t stack_line_number(const EventFields& f, size_t i) {
  return static_cast<int32_t>(f.within(i, -1, INT32_MAX, "a line number"));
}
// A cost figure of "KC"; fields past the line's end (a shorter line of an older writer) are 0.
uint64_t stack_cost(const EventFields& f, size_t i) {
  return i < f.size() ? static_cast<uint64_t>(std::max<int64_t>(0, f.integer(i))) : 0;
}

FrameDef read_frame_def(const EventFields& f) {
  return FrameDef{.id = stack_id(f, 1),
                  .ts = f.moment(2),
                  .qualname = f.text(3),
                  .file = f.text(4),
                  .line = stack_line_number(f, 5),
                  .first_line = stack_line_number(f, 6)};
}

StackDef read_stack_def(const EventFields& f) {
  StackDef s{.id = stack_id(f, 1), .ts = f.moment(2), .truncated = f.integer(3) != 0, .frames = {}};
  if (f.size() < 5 || !f[4].is_array() || f[4].size() > kMaxStackDepth) throw f.bad("has no list of frames");
  for (const json& frame : f[4]) {
    if (!frame.is_number_unsigned() || frame.get<uint64_t>() == 0 || frame.get<uint64_t>() > UINT32_MAX) {
      throw f.bad("has a frame id out of range");
    }
    s.frames.push_back(frame.get<uint32_t>());
  }
  return s;
}

ThreadName read_thread_name(const EventFields& f) {
  return ThreadName{.tid = f.integer(1),
                    .ts = f.moment(2),
                    .name = f.text(3),
                    .text_id = 0,
                    .os_name = f.size() > 4 ? f.text(4) : std::string()};
}

StackSample read_stack_sample(const EventFields& f) {
  const std::string role = f.text(4);  // checked before the other fields
  if (role != "h" && role != "w" && role != "r") throw f.bad("has a role that is not \"h\", \"w\" or \"r\"");
  return StackSample{.tid = f.integer(1),
                     .ts = f.moment(2),
                     .since = f.moment(3),
                     .role = role == "w"   ? GilRole::kWaiting
                             : role == "r" ? GilRole::kReleased
                                           : GilRole::kHolding,
                     .stack = stack_id(f, 5)};
}

StackStats read_stack_stats(const EventFields& f) {
  return StackStats{.ts = f.moment(1),
                    .walks = stack_cost(f, 2),
                    .samples = stack_cost(f, 3),
                    .torn = stack_cost(f, 4),
                    .invalid = stack_cost(f, 5),
                    .skipped = stack_cost(f, 6),
                    .truncated = stack_cost(f, 7),
                    .frames = stack_cost(f, 8),
                    .bytes = stack_cost(f, 9),
                    .read_ns = stack_cost(f, 10),
                    .name_reads = stack_cost(f, 11),
                    .reused = stack_cost(f, 12)};
}

}  // namespace

Record stack_record_from_json(const json& a, const std::string& tag,
                              const std::function<Error(const std::string&)>& bad) {
  const EventFields f(a, bad);
  if (tag == "F") return read_frame_def(f);
  if (tag == "FS") return read_stack_def(f);
  if (tag == "KN") return read_thread_name(f);
  if (tag == "K") return read_stack_sample(f);
  if (tag == "KC") return read_stack_stats(f);
  throw bad("has an unknown kind " + dump(a[0]));
}

}  // namespace gilspy::raw
