#include "raw/counter_lines.hpp"

#include <climits>
#include <cstdint>

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

Record counter_record_from_json(const json& a, const std::function<Error(const std::string&)>& bad) {
  auto num = [&](size_t i) -> int64_t {
    if (i >= a.size() || !a[i].is_number_integer())
      throw bad("has no integer at position " + std::to_string(i));
    if (a[i].is_number_unsigned() && a[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw bad("has a number out of range at position " + std::to_string(i));
    }
    return a[i].get<int64_t>();
  };
  auto bounded = [&](size_t i, int64_t low) {
    const int64_t v = num(i);
    if (v < low || v > kMaxFigure) throw bad("has a figure out of range at position " + std::to_string(i));
    return v;
  };
  auto figure = [&](size_t i) { return bounded(i, 0); };
  auto moment = [&](size_t i) { return bounded(i, -kMaxFigure); };
  const std::string kind = a[0].get<std::string>();
  if (kind == "CS") {
    return ThreadSwitches{.tid = num(1),
                          .ts = moment(2),
                          .voluntary = static_cast<uint64_t>(figure(3)),
                          .involuntary = static_cast<uint64_t>(figure(4))};
  }
  if (kind == "CD") {
    CounterSetup r;
    r.ts = moment(1);
    if (a.size() < 3 || !a[2].is_array()) throw bad("has no list of counters");
    if (a[2].size() > kMaxCounterValues)
      throw bad("names more than " + std::to_string(kMaxCounterValues) + " counters");
    for (const json& name : a[2]) {
      if (!name.is_string()) throw bad("has a counter name that is not a string");
      r.kinds[r.count++] = counter_kind_named(name.get<std::string>()).value_or(CounterKind::kUnknown);
    }
    if (a.size() > 3 && a[3].is_object()) {
      for (const auto& [name, why] : a[3].items()) {
        r.unavailable.emplace_back(name, why.is_string() ? why.get<std::string>() : why.dump());
      }
    }
    r.perf_threads_max = a.size() > 4 ? figure(4) : 0;
    return r;
  }
  CounterSample r;
  r.tid = num(1);
  r.ts = moment(2);
  r.dur = figure(3);
  if (a.size() < 5 || !a[4].is_string()) throw bad("has no GIL role");
  const std::string role = a[4].get<std::string>();
  if (role == "H") {
    r.role = GilRole::kHolding;
  } else if (role == "W") {
    r.role = GilRole::kWaiting;
  } else if (role == "R") {
    r.role = GilRole::kReleased;
  } else {
    throw bad("has an unknown GIL role");
  }
  auto small = [&](size_t i) {
    const int64_t v = figure(i);
    if (v > UINT32_MAX) throw bad("has a count out of range at position " + std::to_string(i));
    return static_cast<uint32_t>(v);
  };
  r.time_ns = figure(5);
  r.cpu_ns = figure(6);
  r.run_delay_ns = figure(7);
  r.slices = small(8);
  r.holds = small(9);
  r.preempted_holds = small(10);
  r.preempted_ns = figure(11);
  // The counter values, in a list of their own so that fields can still be appended to the line.
  if (a.size() > 12) {
    const json& values = a[12];
    if (!values.is_array()) throw bad("has no list of counter values");
    // More than kMaxCounterValues cannot come from a "CD" line this reader accepted: refused, not cut.
    if (values.size() > kMaxCounterValues) throw bad("has more counter values than a thread can have");
    for (const json& v : values) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(kMaxFigure)) {
        throw bad("has a counter value out of range");
      }
      r.values[r.count++] = v.get<uint64_t>();
    }
  }
  return r;
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
