#pragma once
// Per thread and GIL role, what the CPU did: the sums of the "C" records (time on a CPU, time waiting for
// one, switches, perf counters), the voluntary / involuntary switches of the "CS" records, and the preempted
// holds (holds during which the holder waited for a CPU). What the end summary, the raw file's summary and
// `convert` show; SummaryBuilder feeds it.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/records.hpp"

namespace gilspy::raw {

struct RoleCounters {
  int64_t time_ns = 0;                               // stretches with scheduler figures, in this role
  int64_t cpu_ns = 0;                                // on a CPU
  int64_t run_delay_ns = 0;                          // runnable, waiting for a CPU
  uint64_t slices = 0;                               // times switched onto a CPU
  int64_t counted_ns = 0;                            // stretches with perf counter values
  std::array<uint64_t, kMaxCounterValues> values{};  // summed, in CounterSetup::kinds order
  double cpu_share() const;                          // cpu / time: 0 when no time
  double run_delay_share() const;                    // run delay / time
};

struct ThreadCounterSummary {
  int64_t tid = 0;
  std::array<RoleCounters, 3> roles{};  // indexed by GilRole (released, waiting, holding)
  bool has_switches = false;            // two CS records at least: the switches between the first and last
  uint64_t voluntary = 0, involuntary = 0;  // over the recording: last CS minus the first
  uint64_t holds = 0;                       // holds whose start the counters saw
  uint64_t preempted_holds = 0;   // of them, those whose holder waited >= kPreemptedHoldMinNs for a CPU
  int64_t preempted_hold_ns = 0;  // the time those holders waited for a CPU while holding
  const RoleCounters& role(GilRole r) const { return roles[static_cast<size_t>(r)]; }
  RoleCounters total() const;  // every role together
};

class CounterSummary {
 public:
  void add(const CounterSetup& r);
  void add(const CounterSample& r);
  void add(const ThreadSwitches& r);

  bool any() const { return !threads_.empty() || setup_.has_value(); }
  // The counters the C records carry (empty setup when the file had none).
  const CounterSetup& setup() const;
  // Where `kind` sits among the values; nullopt when it was not counted.
  std::optional<size_t> index_of(CounterKind kind) const;
  std::vector<ThreadCounterSummary> threads() const;  // in order of first appearance
  std::optional<ThreadCounterSummary> thread(int64_t tid) const;
  nlohmann::json to_json() const;

 private:
  struct Open {
    ThreadCounterSummary sum;
    uint64_t first_voluntary = 0, first_involuntary = 0;
    bool has_first_switches = false;
  };
  std::optional<CounterSetup> setup_;
  std::map<int64_t, Open> threads_;
  std::vector<int64_t> order_;
};

// a + b, held at the largest value instead of overflowing (figures from a file are bounded per line, not in
// sum).
int64_t saturating_add(int64_t a, int64_t b);
uint64_t saturating_add(uint64_t a, uint64_t b);

}  // namespace gilspy::raw
