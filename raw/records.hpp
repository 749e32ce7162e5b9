#pragma once
// Every record kind gilspy produces, defined once. The sampler emits them (ts on CLOCK_MONOTONIC), the
// session moves them onto the recording's timeline (ns since meta.clock.monotonic_ns) and hands them to
// sinks; the raw writer and reader (raw_format.hpp), the summary and `convert` take the same types.
//
// Adding a kind: a struct here, an alternative in Record, its line in raw_format.cpp (or a note that the raw
// file skips it), and the consumers that care (summary.cpp, convert/, cli/ sinks); std::visit with
// overloaded{} makes the compiler list every place that must decide. Fields are only ever appended to a raw
// line, so an older reader still reads a newer file's records of a kind it knows.
//
// Records cross the poll thread's queue, which must not allocate: every kind is a few integers, except
// ThreadStart's name, which the sampler leaves empty (an empty std::string moves without allocating) and the
// session fills in from /proc.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "raw/counter_kinds.hpp"

namespace gilspy::raw {

// Names a target (process) for the whole of a session; never reused, unlike an index into a list of targets.
using TargetId = uint32_t;

// What a thread is doing with the GIL.
enum class GilRole : uint8_t { kReleased, kWaiting, kHolding };
inline const char* to_string(GilRole role) {
  switch (role) {
    case GilRole::kHolding:
      return "holding";
    case GilRole::kWaiting:
      return "waiting";
    case GilRole::kReleased:
      return "released";
  }
  return "released";
}

// A thread is seen for the first time. Raw line: ["T",tid,ts,name,tstate] (+ ns_tid when not 0).
// g++ 12 warns (maybe-uninitialized) inside this struct's implicit move when a variant holding another kind
// is moved: a false positive of g++ 12 with std::variant and std::string; the pragma keeps it to this struct.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct ThreadStart {
  int64_t tid = 0;  // OS thread id
  int64_t ts = 0;
  uint64_t tstate = 0;  // address of its PyThreadState
  std::string name;  // empty from the sampler; the session names it ("MainThread", "thread <tid> (<comm>)")
  int64_t ns_tid = 0;  // its id inside the target's PID namespace (a container) when that differs from tid
  bool operator==(const ThreadStart&) const = default;
};
#pragma GCC diagnostic pop

// The thread is gone, or the recording ended. Raw line: ["E",tid,ts].
struct ThreadEnd {
  int64_t tid = 0;
  int64_t ts = 0;
  bool operator==(const ThreadEnd&) const = default;
};

// The thread held the GIL from ts for dur (its drop_gil is at ts + dur). Raw line: ["H",tid,ts,dur].
struct Hold {
  int64_t tid = 0;
  int64_t ts = 0;
  int64_t dur = 0;
  bool operator==(const Hold&) const = default;
};

// The thread waited for the GIL (inside take_gil) from ts for dur. Raw line: ["W",tid,ts,dur].
struct Wait {
  int64_t tid = 0;
  int64_t ts = 0;
  int64_t dur = 0;
  bool operator==(const Wait&) const = default;
};

// From ts on, n threads sleep on the GIL's condition variable (emitted on change). Raw line: ["N",ts,n].
struct Waiters {
  int64_t ts = 0;
  uint64_t n = 0;
  bool operator==(const Waiters&) const = default;
};

// Counters so far, one per target at each stats tick of the poll loop and at its end. Raw line:
// ["S",ts,polls,late,missed,handoffs_seen,handoffs_total]; new counters go at the end of the line.
struct Stats {
  int64_t ts = 0;
  uint64_t polls = 0;   // polls of this target that read its GIL
  uint64_t late = 0;    // poll-loop ticks that started more than a fifth of a period late (all targets)
  uint64_t missed = 0;  // deadlines the poll loop skipped because a tick ran over a period (all targets)
  uint64_t handoffs_seen = 0;   // GIL hand-offs between threads the sampler saw
  uint64_t handoffs_total = 0;  // hand-offs that happened (switch_number)
  bool operator==(const Stats&) const = default;
};

// The whole process was stopped (SIGSTOP, a debugger, a job-control stop: task state T or t) from about ts
// for about dur (seen at the sampler's thread re-walks, every 20 ms). Whoever held the GIL then still holds it
// in the records: it did not run. Raw line: ["P",ts,dur].
struct ProcessStopped {
  int64_t ts = 0;
  int64_t dur = 0;
  bool operator==(const ProcessStopped&) const = default;
};

// Where a live thread stands at a stats tick: its role since `since`, still open at ts. A live view uses it
// to count the open part of a long hold or wait, which no Hold/Wait record covers until it ends. Not stored
// in raw files (the intervals say the same once they end); the raw writer skips it.
struct ThreadState {
  int64_t tid = 0;
  int64_t ts = 0;
  GilRole role = GilRole::kReleased;
  int64_t since = 0;
  bool operator==(const ThreadState&) const = default;
};

// What the CPU did meanwhile (format_version 3; docs/raw-format.md explains the figures). The counters of
// this target's "C" lines, named once at the start by the session (not the sampler: it carries
// text), with the ones asked for that cannot be counted and why. Raw line:
// ["CD",ts,[names...],{name:reason,...},perf_threads_max].
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct CounterSetup {
  int64_t ts = 0;
  uint8_t count = 0;                                  // perf counters per thread (0: none asked or usable)
  std::array<CounterKind, kMaxCounterValues> kinds{};  // what values[i] of a CounterSample counts
  std::vector<std::pair<std::string, std::string>> unavailable;  // asked for, not counted: {name, reason}
  int64_t perf_threads_max = 0;  // perf groups are opened on at most this many threads at once (fd limit)
  bool operator==(const CounterSetup&) const = default;
};
#pragma GCC diagnostic pop

// A hold counts as preempted when its holder waited at least this long for a CPU while holding the GIL: a
// time slice lost to another runnable thread (a CFS slice is a few ms), not the microseconds a waking thread
// takes on the holder's CPU.
inline constexpr int64_t kPreemptedHoldMinNs = 1'000'000;

// What one thread did in one GIL role over a window [ts, ts + dur) (about 100 ms; a record per role the
// thread was in): its time in that role, and over that time its scheduler figures
// (/proc/PID/task/TID/schedstat) and perf counts, split by role where the role changed between two reads
// (sampler/thread_counters.hpp says how). Raw line:
// ["C",tid,ts,dur,role,time_ns,cpu_ns,run_delay_ns,slices,holds,preempted_holds,preempted_ns,[values...]]
// (role "H", "W" or "R").
struct CounterSample {
  int64_t tid = 0;
  int64_t ts = 0;
  int64_t dur = 0;
  GilRole role = GilRole::kReleased;
  uint8_t count = 0;           // values below: 0 when the thread had no perf counts in the window
  uint32_t holds = 0;          // holding: holds that began in the window
  int64_t time_ns = 0;         // in `role` within the window, with scheduler figures (0: the thread was gone)
  int64_t cpu_ns = 0;          // ...of it on a CPU
  int64_t run_delay_ns = 0;    // ...runnable but waiting for a CPU (the run queue)
  uint32_t slices = 0;         // times it was switched onto a CPU
  uint32_t preempted_holds = 0;  // holding: holds that ended in the window whose holder waited >= kPreemptedHoldMinNs
  int64_t preempted_ns = 0;      // ...the time they waited for a CPU while holding
  std::array<uint64_t, kMaxCounterValues> values{};  // CounterSetup::kinds order
  bool operator==(const CounterSample&) const = default;
};

// A thread's voluntary and involuntary context switches so far, as the kernel counts them since the thread
// began (/proc/PID/task/TID/status), read at a low rate. Raw line: ["CS",tid,ts,voluntary,involuntary].
struct ThreadSwitches {
  int64_t tid = 0;
  int64_t ts = 0;
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
  bool operator==(const ThreadSwitches&) const = default;
};

using Record = std::variant<ThreadStart, ThreadEnd, Hold, Wait, Waiters, Stats, ProcessStopped, ThreadState,
                            CounterSetup, CounterSample, ThreadSwitches>;

// A record and the target it belongs to: what goes through the sampler's queue to the session.
struct TargetRecord {
  TargetId target = 0;
  Record record;
};

// For std::visit: overloaded{[](const Hold&) {...}, [](const auto&) {...}}.
template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

// The record's time (its start, for an interval).
inline int64_t time_of(const Record& r) {
  return std::visit([](const auto& x) { return x.ts; }, r);
}
// The latest time the record covers: ts + dur for an interval, ts otherwise.
inline int64_t end_of(const Record& r) {
  return std::visit(
      overloaded{[](const Hold& x) { return x.ts + x.dur; }, [](const Wait& x) { return x.ts + x.dur; },
                 [](const ProcessStopped& x) { return x.ts + x.dur; },
                 [](const CounterSample& x) { return x.ts + x.dur; }, [](const auto& x) { return x.ts; }},
      r);
}
// Moves every time in the record by `delta` ns (CLOCK_MONOTONIC -> the recording's timeline).
inline void shift_time(Record& r, int64_t delta) {
  std::visit(overloaded{[&](ThreadState& x) {
                          x.ts += delta;
                          x.since += delta;
                        },
                        [&](auto& x) { x.ts += delta; }},
             r);
}

}  // namespace gilspy::raw
