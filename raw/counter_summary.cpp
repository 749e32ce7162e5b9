#include "raw/counter_summary.hpp"

#include <limits>

namespace gilspy::raw {

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return out;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<uint64_t>::max() : out;
}

double RoleCounters::cpu_share() const {
  return time_ns > 0 ? static_cast<double>(cpu_ns) / static_cast<double>(time_ns) : 0.0;
}

double RoleCounters::run_delay_share() const {
  return time_ns > 0 ? static_cast<double>(run_delay_ns) / static_cast<double>(time_ns) : 0.0;
}

RoleCounters ThreadCounterSummary::total() const {
  RoleCounters t;
  for (const RoleCounters& r : roles) {
    t.time_ns = saturating_add(t.time_ns, r.time_ns);
    t.cpu_ns = saturating_add(t.cpu_ns, r.cpu_ns);
    t.run_delay_ns = saturating_add(t.run_delay_ns, r.run_delay_ns);
    t.slices = saturating_add(t.slices, r.slices);
    t.counted_ns = saturating_add(t.counted_ns, r.counted_ns);
    for (size_t i = 0; i < kMaxCounterValues; ++i) t.values[i] = saturating_add(t.values[i], r.values[i]);
  }
  return t;
}

const CounterSetup& CounterSummary::setup() const {
  static const CounterSetup kNone{};
  return setup_ ? *setup_ : kNone;
}

std::optional<size_t> CounterSummary::index_of(CounterKind kind) const {
  const CounterSetup& s = setup();
  for (size_t i = 0; i < s.count && i < kMaxCounterValues; ++i) {
    if (s.kinds[i] == kind && kind != CounterKind::kUnknown) return i;
  }
  return std::nullopt;
}

void CounterSummary::add(const CounterSetup& r) {
  setup_ = r;
}

void CounterSummary::add(const CounterSample& r) {
  auto [it, inserted] = threads_.try_emplace(r.tid);
  Open& t = it->second;
  if (inserted) {
    t.sum.tid = r.tid;
    order_.push_back(r.tid);
  }
  RoleCounters& role = t.sum.roles[static_cast<size_t>(r.role)];
  role.time_ns = saturating_add(role.time_ns, r.time_ns);
  role.cpu_ns = saturating_add(role.cpu_ns, r.cpu_ns);
  role.run_delay_ns = saturating_add(role.run_delay_ns, r.run_delay_ns);
  role.slices = saturating_add(role.slices, uint64_t{r.slices});
  if (r.count > 0) {
    role.counted_ns = saturating_add(role.counted_ns, r.time_ns);
    for (size_t i = 0; i < r.count && i < kMaxCounterValues; ++i) {
      role.values[i] = saturating_add(role.values[i], r.values[i]);
    }
  }
  if (r.role == GilRole::kHolding) {
    t.sum.holds = saturating_add(t.sum.holds, uint64_t{r.holds});
    t.sum.preempted_holds = saturating_add(t.sum.preempted_holds, uint64_t{r.preempted_holds});
    t.sum.preempted_hold_ns = saturating_add(t.sum.preempted_hold_ns, r.preempted_ns);
  }
}

void CounterSummary::add(const ThreadSwitches& r) {
  auto [it, inserted] = threads_.try_emplace(r.tid);
  Open& t = it->second;
  if (inserted) {
    t.sum.tid = r.tid;
    order_.push_back(r.tid);
  }
  if (!t.has_first_switches) {
    // One reading says nothing about the recording (a thread that ended before a second one had none):
    // switches are shown from the second reading on, never as a made-up 0.
    t.has_first_switches = true;
    t.first_voluntary = r.voluntary;
    t.first_involuntary = r.involuntary;
    return;
  }
  t.sum.has_switches = true;
  // The kernel's counts only grow; a smaller one (a file edited by hand) is clamped rather than wrapped.
  t.sum.voluntary = r.voluntary >= t.first_voluntary ? r.voluntary - t.first_voluntary : 0;
  t.sum.involuntary = r.involuntary >= t.first_involuntary ? r.involuntary - t.first_involuntary : 0;
}

std::vector<ThreadCounterSummary> CounterSummary::threads() const {
  std::vector<ThreadCounterSummary> out;
  for (const int64_t tid : order_) out.push_back(*thread(tid));
  return out;
}

std::optional<ThreadCounterSummary> CounterSummary::thread(int64_t tid) const {
  const auto it = threads_.find(tid);
  if (it == threads_.end()) return std::nullopt;
  return it->second.sum;
}

nlohmann::json CounterSummary::to_json() const {
  using nlohmann::json;
  const CounterSetup& s = setup();
  json events = json::array();
  for (size_t i = 0; i < s.count && i < kMaxCounterValues; ++i) events.push_back(counter_name(s.kinds[i]));
  json unavailable = json::object();
  for (const auto& [name, why] : s.unavailable) unavailable[name] = why;
  auto role_json = [&](const RoleCounters& r) {
    json values = json::object();
    for (size_t i = 0; i < s.count && i < kMaxCounterValues; ++i) {
      if (s.kinds[i] != CounterKind::kUnknown) values[counter_name(s.kinds[i])] = r.values[i];
    }
    return json{{"time_ns", r.time_ns},           {"cpu_ns", r.cpu_ns},
                {"run_delay_ns", r.run_delay_ns}, {"slices", r.slices},
                {"cpu_share", r.cpu_share()},     {"run_delay_share", r.run_delay_share()},
                {"counted_ns", r.counted_ns},     {"counters", values}};
  };
  json threads = json::array();
  for (const ThreadCounterSummary& t : this->threads()) {
    json roles = json::object();
    for (const GilRole r : {GilRole::kHolding, GilRole::kWaiting, GilRole::kReleased}) {
      roles[to_string(r)] = role_json(t.role(r));
    }
    json j = {{"tid", t.tid},
              {"roles", roles},
              {"holds", t.holds},
              {"preempted_holds", t.preempted_holds},
              {"preempted_hold_ns", t.preempted_hold_ns}};
    if (t.has_switches) {
      j["voluntary_switches"] = t.voluntary;
      j["involuntary_switches"] = t.involuntary;
    }
    threads.push_back(std::move(j));
  }
  return {{"events", events},
          {"unavailable", unavailable},
          {"perf_threads_max", s.perf_threads_max},
          {"preempted_hold_min_ns", kPreemptedHoldMinNs},
          {"threads", threads}};
}

}  // namespace gilspy::raw
