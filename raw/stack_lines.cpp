#include "raw/stack_lines.hpp"

#include <cstdint>

#include "base/error.hpp"

namespace gilspy::raw {

using nlohmann::json;

namespace {

// Strings from the target need not be valid UTF-8 by the time they get here (a torn read is dropped by the
// sampler, but a file may be edited): replace what is not, never throw.
std::string dump(const json& a) {
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr int64_t kMaxNs = int64_t{1} << 60;  // as the other kinds (record_lines.cpp)
constexpr size_t kMaxStackDepth = 4096;       // far above --stack-depth's largest value

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
  return dump(json::array({"K", r.tid, r.ts, r.since, r.role == GilRole::kWaiting ? "w" : "h", r.stack}));
}
std::string stack_line(const StackStats& r) {
  return dump(json::array({"KC", r.ts, r.walks, r.samples, r.torn, r.invalid, r.skipped, r.truncated,
                           r.frames, r.bytes, r.read_ns, r.name_reads, r.reused}));
}

Record stack_record_from_json(const json& a, const std::string& tag,
                              const std::function<Error(const std::string&)>& bad) {
  auto integer = [&](size_t i) -> int64_t {
    if (i >= a.size() || !a[i].is_number_integer())
      throw bad("has no integer at position " + std::to_string(i));
    if (a[i].is_number_unsigned() && a[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw bad("has a number out of range at position " + std::to_string(i));
    }
    return a[i].get<int64_t>();
  };
  auto moment = [&](size_t i) {
    const int64_t t = integer(i);
    if (t < -kMaxNs || t > kMaxNs) throw bad("has a time out of range at position " + std::to_string(i));
    return t;
  };
  auto id = [&](size_t i) {
    const int64_t v = integer(i);
    if (v <= 0 || v > UINT32_MAX) throw bad("has an id out of range at position " + std::to_string(i));
    return static_cast<uint32_t>(v);
  };
  auto line_number = [&](size_t i) {
    const int64_t v = integer(i);
    if (v < -1 || v > INT32_MAX) throw bad("has a line number out of range at position " + std::to_string(i));
    return static_cast<int32_t>(v);
  };
  auto text = [&](size_t i) {
    if (i >= a.size() || !a[i].is_string()) throw bad("has no string at position " + std::to_string(i));
    return a[i].get<std::string>();
  };
  auto count = [&](size_t i) {
    return i < a.size() ? static_cast<uint64_t>(std::max<int64_t>(0, integer(i))) : 0;
  };
  if (tag == "F") {
    return FrameDef{.id = id(1),
                    .ts = moment(2),
                    .qualname = text(3),
                    .file = text(4),
                    .line = line_number(5),
                    .first_line = line_number(6)};
  }
  if (tag == "FS") {
    StackDef s{.id = id(1), .ts = moment(2), .truncated = integer(3) != 0, .frames = {}};
    if (a.size() < 5 || !a[4].is_array() || a[4].size() > kMaxStackDepth) throw bad("has no list of frames");
    for (size_t i = 0; i < a[4].size(); ++i) {
      const json& f = a[4][i];
      if (!f.is_number_unsigned() || f.get<uint64_t>() == 0 || f.get<uint64_t>() > UINT32_MAX) {
        throw bad("has a frame id out of range");
      }
      s.frames.push_back(f.get<uint32_t>());
    }
    return s;
  }
  if (tag == "KN") {
    return ThreadName{.tid = integer(1),
                      .ts = moment(2),
                      .name = text(3),
                      .text_id = 0,
                      .os_name = a.size() > 4 ? text(4) : std::string()};
  }
  if (tag == "K") {
    const std::string role = text(4);
    if (role != "h" && role != "w") throw bad("has a role that is not \"h\" or \"w\"");
    return StackSample{.tid = integer(1),
                       .ts = moment(2),
                       .since = moment(3),
                       .role = role == "w" ? GilRole::kWaiting : GilRole::kHolding,
                       .stack = id(5)};
  }
  if (tag == "KC") {
    return StackStats{.ts = moment(1),
                      .walks = count(2),
                      .samples = count(3),
                      .torn = count(4),
                      .invalid = count(5),
                      .skipped = count(6),
                      .truncated = count(7),
                      .frames = count(8),
                      .bytes = count(9),
                      .read_ns = count(10),
                      .name_reads = count(11),
                      .reused = count(12)};
  }
  throw bad("has an unknown kind " + dump(a[0]));
}

}  // namespace gilspy::raw
