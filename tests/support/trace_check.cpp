#include "support/trace_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace gilspy::test {
namespace {

using nlohmann::json;

struct LaneEvent {
  double ts;
  double dur;    // 0 for an instant
  size_t index;  // in traceEvents, for the message
  bool slice;    // an "X" with dur > 0 (may hold others)
  bool nests;    // ...that may lie inside another: a Python frame (cat "stack") or a collection ("gc")
};

class Checker {
 public:
  void problem(std::string text) {
    if (result.problems.size() < kMaxProblems) result.problems.push_back(std::move(text));
    ++result.problem_count;
  }

  explicit Checker(const TraceCheckOptions& options) : options_(options) {}

  void event(const json& e, size_t i) {
    if (!e.is_object()) return problem(fmt::format("event #{} is not an object", i));
    if (options_.merged) {
      const auto cat = e.find("cat");
      if (cat == e.end() || (*cat != "gil" && *cat != "stack")) return;  // the profiler's own event
    }
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) return problem(fmt::format("event #{} has no ph", i));
    const std::string p = *ph;
    if (p != "X" && p != "I" && p != "C" && p != "M") {
      return problem(fmt::format("event #{}: ph \"{}\"; only X, I, C and M are read by every viewer", i, p));
    }
    const auto pid = e.find("pid"), tid = e.find("tid");
    // A string pid only where the profiler's process has one (PyTorch's legacy "CPU functions").
    const bool pid_ok = pid != e.end() && (pid->is_number_integer() || (options_.merged && pid->is_string()));
    if (!pid_ok || tid == e.end() || !tid->is_number_integer()) {
      return problem(fmt::format("event #{}: pid and tid must be integers", i));
    }
    if (p == "M") return;
    const auto ts_it = e.find("ts");
    if (ts_it == e.end()) return problem(fmt::format("event #{}: ts must be a number", i));
    json ts_value = *ts_it;
    if (options_.merged && ts_value.is_string()) {  // Ascend: "1736405443863674.400", read as a number
      ts_value = json::parse(ts_value.get<std::string>(), nullptr, false);
    }
    const auto ts = &ts_value;
    if (!ts->is_number()) return problem(fmt::format("event #{}: ts must be a number", i));
    if (p == "C") return;
    double dur = 0;
    if (p == "X") {
      const auto d = e.find("dur");
      if (d == e.end() || !d->is_number())
        return problem(fmt::format("event #{}: X without a number dur", i));
      dur = d->get<double>();
      if (!(dur >= 0)) return problem(fmt::format("event #{}: negative dur {}", i, dur));
    }
    const auto cat = e.find("cat");
    const auto name = e.find("name");
    const bool frame = cat != e.end() && cat->is_string() && *cat == "stack";
    const bool gc = name != e.end() && name->is_string() && *name == "gc";
    const bool slice = p == "X" && dur > 0;
    const Lane lane{pid->dump(), tid->get<int64_t>()};
    lanes_[lane].push_back({ts->get<double>(), dur, i, slice, slice && (frame || gc)});
    if (p == "X" && name != e.end() && (*name == "hold_gil" || *name == "take_gil"))
      thread_lanes_.insert(lane);
    if (p == "X" && gc) {
      const auto args = e.find("args");
      const bool part = args != e.end() && args->is_object() && args->value("held_part", false);
      gc_slices_.push_back({lane, ts->get<double>(), dur, i, part});
    }
    ++result.events;
  }

  void lanes(const json& events) {
    result.lanes = lanes_.size();
    for (auto& [lane, items] : lanes_) {
      // By start; at one start, zero-length events first (they end there), then the longer slice first (the
      // parent), as the viewers order them.
      std::stable_sort(items.begin(), items.end(), [](const LaneEvent& a, const LaneEvent& b) {
        if (a.ts != b.ts) return a.ts < b.ts;
        if (a.slice != b.slice) return !a.slice;
        if (a.ts + a.dur != b.ts + b.dur) return a.ts + a.dur > b.ts + b.dur;
        return !a.nests && b.nests;  // a child as long as its parent (a gc filling its hold) comes after it
      });
      std::vector<const LaneEvent*> open;  // slices that the next event may lie inside, innermost last
      for (size_t k = 0; k < items.size(); ++k) {
        const LaneEvent& b = items[k];
        if (k > 0) ++result.adjacent_pairs;
        while (!open.empty() && open.back()->ts + open.back()->dur <= b.ts) open.pop_back();
        if (!open.empty()) {
          const LaneEvent& a = *open.back();
          const double a_end = a.ts + a.dur;  // what a JavaScript viewer computes
          // A frame or gc slice may lie wholly inside another (DevTools nests it); one that starts inside and
          // ends after it is dropped, a GIL slice inside another is an overlap, and an instant inside a slice
          // is not where gilspy means it.
          if (!b.nests || b.ts + b.dur > a_end) {
            problem(
                fmt::format("lane pid {} tid {}: {} (ts {} + dur {} = {}) ends after the next event's ts {} "
                            "({}{})",
                            lane.first, lane.second, events[a.index].value("name", "?"), a.ts, a.dur, a_end,
                            b.ts, events[b.index].value("name", "?"),
                            !b.slice  ? ", an instant inside it"
                            : b.nests ? ", which starts inside it and ends after it"
                                      : ", a slice that may not nest"));
            continue;
          }
        }
        if (b.slice) open.push_back(&b);
      }
    }
  }

  // No slice contradicts another: a collection on its thread's lane (one with holds or waits) is the one on
  // the GC lane of its process, with the same times (within 0.01 µs: each is fitted inside its parent by a
  // few ns), or lies within it when it is only the part that ran in one hold ("held_part").
  void collections() {
    constexpr double kSlackUs = 0.01;
    for (const GcSlice& t : gc_slices_) {
      if (!thread_lanes_.contains(t.lane)) continue;
      bool lane_has_any = false, matched = false;
      for (const GcSlice& g : gc_slices_) {
        if (g.lane.first != t.lane.first || thread_lanes_.contains(g.lane)) continue;
        lane_has_any = true;
        const bool within = t.ts >= g.ts - kSlackUs && t.ts + t.dur <= g.ts + g.dur + kSlackUs;
        const bool same = std::abs(t.ts - g.ts) <= kSlackUs && std::abs(t.dur - g.dur) <= kSlackUs;
        if (t.part ? within : same) matched = true;
      }
      if (lane_has_any && !matched) {
        problem(
            fmt::format("event #{}: a gc slice on lane pid {} tid {} (ts {}, dur {}) is no collection of the "
                        "GC lane (a slice cut short, or shifted)",
                        t.index, t.lane.first, t.lane.second, t.ts, t.dur));
      }
    }
  }

  TraceCheckResult result;

 private:
  using Lane = std::pair<std::string, int64_t>;  // pid as JSON text, tid
  struct GcSlice {
    Lane lane;
    double ts, dur;
    size_t index;
    bool part;
  };
  std::set<Lane> thread_lanes_;
  std::vector<GcSlice> gc_slices_;
  std::map<std::pair<std::string, int64_t>, std::vector<LaneEvent>> lanes_;  // by pid as JSON text, tid
  TraceCheckOptions options_;
};

}  // namespace

TraceCheckResult check_chrome_trace(std::string_view text, const TraceCheckOptions& options) {
  Checker c(options);
  // nlohmann parses numbers with strtod: the double nearest the decimal text, as JSON.parse gives it.
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    c.problem("not valid JSON");
    return c.result;
  }
  const json* events = &doc;
  if (doc.is_object()) {
    const auto it = doc.find("traceEvents");
    if (it == doc.end()) {
      c.problem("no traceEvents");
      return c.result;
    }
    events = &*it;
  }
  if (!events->is_array()) {
    c.problem("traceEvents is not an array");
    return c.result;
  }
  for (size_t i = 0; i < events->size(); ++i) c.event((*events)[i], i);
  c.lanes(*events);
  c.collections();
  return c.result;
}

}  // namespace gilspy::test
