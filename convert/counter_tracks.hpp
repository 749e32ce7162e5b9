#pragma once
// The counter tracks of a trace: per thread, from its "C" records (raw/records.hpp CounterSample: one per
// role and window of about 100 ms), one "C" event per window, named "tid <tid>", with
//   "cpu %"              time on a CPU / the time the window covers (schedstat; can pass 100 by up to a
//                        scheduler tick),
//   "run-queue delay ms" the thread's time runnable but waiting for a CPU, summed since the recording began
//                        (a wait is counted when it ends, so the total, not a rate, is what stays exact),
//   "IPC"                instructions / cycles, where both are counted,
// and "cpu %" 0 where its records end. Perfetto draws one track per argument ("tid 1234 cpu %"); DevTools
// draws no counters. Nothing here knows the trace file: points go to a callback, which writes a point's args
// with write_args().
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "convert/json_writer.hpp"
#include "raw/records.hpp"

namespace gilspy::convert {

// One point of a thread's track. A window's figures, those it has; a closing point ("cpu %" 0 where the
// thread's windows stop) has none.
struct CounterPoint {
  int64_t tid = 0;
  int64_t ts = 0;  // ns on the recording's timeline
  std::optional<double> cpu_percent = {}, run_delay_ms = {}, ipc = {};
  bool closing() const { return !cpu_percent && !run_delay_ms && !ipc; }
  std::string name() const;              // "tid <tid>"
  void write_args(JsonWriter& w) const;  // "cpu %" (0 when closing), "run-queue delay ms", "IPC"
};

class CounterTracks {
 public:
  using Emit = std::function<void(const CounterPoint&)>;
  explicit CounterTracks(Emit emit) : emit_(std::move(emit)) {}

  void setup(const raw::CounterSetup& s);
  void sample(const raw::CounterSample& s);
  void finish();  // what each thread has left, and its closing point

 private:
  struct Window {
    int64_t start = -1, end = -1;  // the window's
    int64_t sched_ns = 0, cpu_ns = 0, run_delay_ns = 0;
    uint64_t instructions = 0, cycles = 0;
    bool counted = false;  // both counters seen
  };
  struct Thread {
    Window w;
    int64_t run_delay_total_ns = 0;
  };
  void flush(int64_t tid, Thread& t);

  Emit emit_;
  std::optional<size_t> cycles_, instructions_;  // where they sit among a C record's values
  std::unordered_map<int64_t, Thread> threads_;
};

}  // namespace gilspy::convert
