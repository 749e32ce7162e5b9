#include "raw/counter_lines.hpp"

#include <climits>
#include <cstdint>

#include "raw/event_fields.hpp"

namespace gilspy::raw {

using nlohmann::json;

namespace {

// Bounds every figure so that what readers sum over a file (a thread's CPU time over millions of lines)
// cannot overflow: 2^60 ns is 36 years, 2^60 events more than any counter reaches in a stretch.
constexpr int64_t kMaxFigure = int64_t{1} << 60;

const char* role_letter(GilRole r) {
  switch (r) {
    case GilRole::kHolding:
      return "H";
    case GilRole::kWaiting:
      return "W";
    case GilRole::kReleased:
      return "R";
  }
  return "R";
}

}  // namespace

bool is_counter_kind(const std::string& kind) {
  return kind == "C" || kind == "CD" || kind == "CS";
}

std::string counter_setup_line(const CounterSetup& r) {
  json names = json::array();
  for (size_t i = 0; i < r.count && i < kMaxCounterValues; ++i) names.push_back(counter_name(r.kinds[i]));
  json unavailable = json::object();
  for (const auto& [name, why] : r.unavailable) unavailable[name] = why;
  return json::array({"CD", r.ts, names, unavailable, r.perf_threads_max})
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string counter_sample_line(const CounterSample& r) {
  json values = json::array();
  for (size_t i = 0; i < r.count && i < kMaxCounterValues; ++i) values.push_back(r.values[i]);
  return json::array({"C", r.tid, r.ts, r.dur, role_letter(r.role), r.time_ns, r.cpu_ns, r.run_delay_ns,
                      r.slices, r.holds, r.preempted_holds, r.preempted_ns, values})
      .dump();
}

std::string thread_switches_line(const ThreadSwitches& r) {
  return json::array({"CS", r.tid, r.ts, r.voluntary, r.involuntary}).dump();
}

namespace {

// A figure of a counter line: within [0, kMaxFigure].
int64_t counter_figure(const EventFields& f, size_t i) {
  return f.within(i, 0, kMaxFigure, "a figure");
}
int64_t counter_moment(const EventFields& f, size_t i) {
  return f.within(i, -kMaxFigure, kMaxFigure, "a figure");
}
// A count that the record holds in 32 bits.
uint32_t counter_small(const EventFields& f, size_t i) {
  const int64_t v = counter_figure(f, i);
  if (v > UINT32_MAX) throw f.bad("has a count out of range at position " + std::to_string(i));
  return static_cast<uint32_t>(v);
}

ThreadSwitches read_thread_switches(const EventFields& f) {
  return ThreadSwitches{.tid = f.integer(1),
                        .ts = counter_moment(f, 2),
                        .voluntary = static_cast<uint64_t>(counter_figure(f, 3)),
                        .involuntary = static_cast<uint64_t>(counter_figure(f, 4))};
}

CounterSetup read_counter_setup(const EventFields& f) {
  CounterSetup r;
  r.ts = counter_moment(f, 1);
  if (f.size() < 3 || !f[2].is_array()) throw f.bad("has no list of counters");
  if (f[2].size() > kMaxCounterValues)
    throw f.bad("names more than " + std::to_string(kMaxCounterValues) + " counters");
  for (const json& name : f[2]) {
    if (!name.is_string()) throw f.bad("has a counter name that is not a string");
    r.kinds[r.count++] = counter_kind_named(name.get<std::string>()).value_or(CounterKind::kUnknown);
  }
  if (f.size() > 3 && f[3].is_object()) {
    for (const auto& [name, why] : f[3].items()) {
      r.unavailable.emplace_back(name, why.is_string() ? why.get<std::string>() : why.dump());
    }
  }
  r.perf_threads_max = f.size() > 4 ? counter_figure(f, 4) : 0;
  return r;
}

GilRole read_counter_role(const EventFields& f, size_t i) {
  if (f.size() <= i || !f[i].is_string()) throw f.bad("has no GIL role");
  const std::string role = f[i].get<std::string>();
  if (role == "H") return GilRole::kHolding;
  if (role == "W") return GilRole::kWaiting;
  if (role == "R") return GilRole::kReleased;
  throw f.bad("has an unknown GIL role");
}

// The counter values, in a list of their own so that fields can still be appended to the line.
void read_counter_values(const EventFields& f, size_t i, CounterSample& r) {
  if (f.size() <= i) return;
  const json& values = f[i];
  if (!values.is_array()) throw f.bad("has no list of counter values");
  // More than kMaxCounterValues cannot come from a "CD" line this reader accepted: refused, not cut.
  if (values.size() > kMaxCounterValues) throw f.bad("has more counter values than a thread can have");
  for (const json& v : values) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(kMaxFigure)) {
      throw f.bad("has a counter value out of range");
    }
    r.values[r.count++] = v.get<uint64_t>();
  }
}

CounterSample read_counter_sample(const EventFields& f) {
  CounterSample r;
  r.tid = f.integer(1);
  r.ts = counter_moment(f, 2);
  r.dur = counter_figure(f, 3);
  r.role = read_counter_role(f, 4);
  r.time_ns = counter_figure(f, 5);
  r.cpu_ns = counter_figure(f, 6);
  r.run_delay_ns = counter_figure(f, 7);
  r.slices = counter_small(f, 8);
  r.holds = counter_small(f, 9);
  r.preempted_holds = counter_small(f, 10);
  r.preempted_ns = counter_figure(f, 11);
  read_counter_values(f, 12, r);
  return r;
}

}  // namespace

Record counter_record_from_json(const json& a, const std::function<Error(const std::string&)>& bad) {
  const EventFields f(a, bad);
  const std::string kind = a[0].get<std::string>();
  if (kind == "CS") return read_thread_switches(f);
  if (kind == "CD") return read_counter_setup(f);
  return read_counter_sample(f);
}

namespace {

// A JSON integer at s[i] (no leading zeros, no exponent), within [low, high]; advances i.
bool take_int(std::string_view s, size_t& i, int64_t low, int64_t high, int64_t& out) {
  const bool negative = i < s.size() && s[i] == '-';
  if (negative && low >= 0) return false;  // "-0" too: JSON's -0 is not an unsigned number
  size_t j = i + (negative ? 1 : 0);
  if (j >= s.size() || s[j] < '0' || s[j] > '9') return false;
  if (s[j] == '0' && j + 1 < s.size() && s[j + 1] >= '0' && s[j + 1] <= '9') return false;
  uint64_t v = 0;
  size_t digits = 0;
  for (; j < s.size() && s[j] >= '0' && s[j] <= '9'; ++j) {
    if (++digits > 18) return false;  // past 2^60 either way: the generic path says what is wrong
    v = v * 10 + static_cast<uint64_t>(s[j] - '0');
  }
  if (j < s.size() && (s[j] == '.' || s[j] == 'e' || s[j] == 'E')) return false;
  const int64_t value = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  if (value < low || value > high) return false;
  out = value;
  i = j;
  return true;
}

bool take(std::string_view s, size_t& i, char c) {
  if (i >= s.size() || s[i] != c) return false;
  ++i;
  return true;
}

}  // namespace

bool fast_counter_sample(std::string_view s, CounterSample& out) {
  constexpr std::string_view kHead = R"(["C",)";
  if (s.substr(0, kHead.size()) != kHead) return false;
  size_t i = kHead.size();
  CounterSample r;
  if (!take_int(s, i, INT64_MIN + 1, INT64_MAX, r.tid) || !take(s, i, ',') ||
      !take_int(s, i, -kMaxFigure, kMaxFigure, r.ts) || !take(s, i, ',') ||
      !take_int(s, i, 0, kMaxFigure, r.dur) || !take(s, i, ',') || !take(s, i, '"') || i >= s.size()) {
    return false;
  }
  switch (s[i++]) {
    case 'H':
      r.role = GilRole::kHolding;
      break;
    case 'W':
      r.role = GilRole::kWaiting;
      break;
    case 'R':
      r.role = GilRole::kReleased;
      break;
    default:
      return false;
  }
  int64_t slices = 0, holds = 0, preempted = 0;
  if (!take(s, i, '"') || !take(s, i, ',') || !take_int(s, i, 0, kMaxFigure, r.time_ns) || !take(s, i, ',') ||
      !take_int(s, i, 0, kMaxFigure, r.cpu_ns) || !take(s, i, ',') ||
      !take_int(s, i, 0, kMaxFigure, r.run_delay_ns) || !take(s, i, ',') ||
      !take_int(s, i, 0, UINT32_MAX, slices) || !take(s, i, ',') || !take_int(s, i, 0, UINT32_MAX, holds) ||
      !take(s, i, ',') || !take_int(s, i, 0, UINT32_MAX, preempted) || !take(s, i, ',') ||
      !take_int(s, i, 0, kMaxFigure, r.preempted_ns) || !take(s, i, ',') || !take(s, i, '[')) {
    return false;
  }
  r.slices = static_cast<uint32_t>(slices);
  r.holds = static_cast<uint32_t>(holds);
  r.preempted_holds = static_cast<uint32_t>(preempted);
  if (!take(s, i, ']')) {
    for (;;) {
      int64_t v = 0;
      if (r.count == kMaxCounterValues || !take_int(s, i, 0, kMaxFigure, v)) return false;
      r.values[r.count++] = static_cast<uint64_t>(v);
      if (take(s, i, ']')) break;
      if (!take(s, i, ',')) return false;
    }
  }
  if (!take(s, i, ']') || i != s.size()) return false;
  out = r;
  return true;
}

}  // namespace gilspy::raw
