#pragma once
// Every record kind gilspy produces, defined once. The sampler emits them (ts on CLOCK_MONOTONIC), the
// session moves them onto the recording's timeline (ns since meta.clock.monotonic_ns) and hands them to
// sinks; the raw writer and reader (raw_format.hpp), the summary and `convert` take the same types.
//
// Adding a kind: a struct here, an alternative in Record, its line in record_lines.cpp (or a note that the
// raw file skips it), and the consumers that care (summary.cpp, convert/, cli/ sinks); std::visit with
// overloaded{} makes the compiler list every place that must decide. Fields are only ever appended to a raw
// line, so an older reader still reads a newer file's records of a kind it knows.
//
// Records cross the poll thread's queue, which must not allocate: every kind is a few integers, except
// ThreadStart's name, which the sampler leaves empty (an empty std::string moves without allocating) and the
// session fills in from /proc, and the stack kinds' strings and frame lists, filled from the sampler's
// tables.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "raw/counter_kinds.hpp"
#include "raw/gc_records.hpp"

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
  std::string name;    // empty from the sampler; the session names it ("MainThread", "thread <tid> (<comm>)")
  int64_t ns_tid = 0;  // its id inside the target's PID namespace (a container) when that differs from tid
  bool operator==(const ThreadStart&) const = default;
};
#pragma GCC diagnostic pop

// The thread is gone, or the recording ended. Raw line: ["E",tid,ts] (+ state_se_ns when known).
struct ThreadEnd {
  int64_t tid = 0;
  int64_t ts = 0;
  // The standard error (ns) of the thread's recorded time in each GIL state over its life: each poll is a
  // sample that stands for its window, and where the state could change inside a window its share of that
  // window is unknown (process_sampler.cpp, "uncertainty"). -1: not known (an older recorder).
  int64_t state_se_ns = -1;
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
// for about dur (seen at the sampler's thread re-walks, every 20 ms). Whoever held the GIL then still holds
// it in the records: it did not run. Raw line: ["P",ts,dur].
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
  double state_var_ns2 =
      0;  // the variance of its time in each state so far (ThreadEnd's state_se_ns, squared)
  bool operator==(const ThreadState&) const = default;
};

// --- Python stacks and thread names (docs/raw-format.md, "Stacks and thread names"; format_version 3) ---
// Stacks are interned: a frame (a function at a line) is defined once, a stack (a list of frames) once, and
// each sample names a stack by id, so a long recording stays small. Ids count from 1 per target, in the order
// defined; a definition always comes before its first use. From the sampler, the strings and the frame list
// are empty (nothing on the poll thread allocates): the session fills them from the sampler's tables, where
// `id` (and ThreadName's `text_id`) find them.

// A frame: `qualname` (3.11+ co_qualname; the plain co_name before) in `file` at `line`; `first_line` is the
// function's co_firstlineno. Raw line: ["F",id,ts,"qualname","file",line,first_line].
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // as ThreadStart: g++ 12 and std::string in a variant
struct FrameDef {
  uint32_t id = 0;
  int64_t ts = 0;
  std::string qualname;
  std::string file;
  int32_t line = 0;
  int32_t first_line = 0;
  bool operator==(const FrameDef&) const = default;
};

// A stack: frame ids, innermost first; `truncated` when the thread had more frames than the depth limit
// (--stack-depth): the outermost were left out. Raw line: ["FS",id,ts,truncated,[frame ids]].
struct StackDef {
  uint32_t id = 0;
  int64_t ts = 0;
  bool truncated = false;
  std::vector<uint32_t> frames;
  bool operator==(const StackDef&) const = default;
};

// The Python name of a thread (threading.Thread.name) from ts on: when first read, and after a rename.
// `os_name`: the thread's OS name (/proc/PID/task/TID/comm, set with prctl) when it says something the Python
// name does not (not the process's own name, not the start of the Python name); empty otherwise. Shown as
// "name (os_name)". Raw line: ["KN",tid,ts,"name","os_name"].
struct ThreadName {
  int64_t tid = 0;
  int64_t ts = 0;
  std::string name;
  uint32_t text_id = 0;  // from the sampler: where the session finds the name (not in raw files)
  std::string os_name;   // filled by the session
  bool operator==(const ThreadName&) const = default;
  // What lanes, summaries and `top` call the thread from now on.
  std::string label() const { return os_name.empty() ? name : name + " (" + os_name + ")"; }
};
#pragma GCC diagnostic pop

// A stack sample: thread `tid` was in stack `stack` at ts, during the hold (role kHolding) or the wait
// (kWaiting) that began at `since` (the Hold or Wait record of that interval has ts == since, and comes when
// it ends). Taken at the start of each hold and each wait the sampler sees, and again every 10 ms of a long
// hold. Raw line: ["K",tid,ts,since,"h"|"w",stack].
struct StackSample {
  int64_t tid = 0;
  int64_t ts = 0;
  int64_t since = 0;
  GilRole role = GilRole::kHolding;
  uint32_t stack = 0;
  bool operator==(const StackSample&) const = default;
};

// What reading stacks and names cost so far, one per target at each stats tick. Raw line:
// ["KC",ts,walks,samples,torn,invalid,skipped,truncated,frames,bytes,read_ns,name_reads,reused]; new counters
// go at the end (a shorter line from an older gilspy reads them as 0).
struct StackStats {
  int64_t ts = 0;
  uint64_t walks = 0;       // stack reads begun
  uint64_t samples = 0;     // ...that gave a sample
  uint64_t torn = 0;        // dropped: the thread ran on while it was read (its frame or the GIL moved)
  uint64_t invalid = 0;     // dropped: what was read is not a stack (a bad code object, string, line)
  uint64_t skipped = 0;     // not read: the time budget ran out, or the hold or wait ended first
  uint64_t truncated = 0;   // samples cut at the depth limit
  uint64_t frames = 0;      // frames read
  uint64_t bytes = 0;       // bytes read from the target for stacks (frames, code objects, strings)
  uint64_t read_ns = 0;     // time spent reading stacks and names
  uint64_t name_reads = 0;  // thread names read
  uint64_t reused = 0;  // samples (in `samples`) of a hold's start: the stack its thread was read at without
                        // the GIL, when the first switch since then gave it the GIL (no read)
  bool operator==(const StackStats&) const = default;
};

// What the CPU did meanwhile (format_version 3; docs/raw-format.md explains the figures). The counters of
// this target's "C" lines, named once at the start by the session (not the sampler: it carries
// text), with the ones asked for that cannot be counted and why. Raw line:
// ["CD",ts,[names...],{name:reason,...},perf_threads_max].
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct CounterSetup {
  int64_t ts = 0;
  uint8_t count = 0;                                   // perf counters per thread (0: none asked or usable)
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
  uint8_t count = 0;         // values below: 0 when the thread had no perf counts in the window
  uint32_t holds = 0;        // holding: holds that began in the window
  int64_t time_ns = 0;       // in `role` within the window, with scheduler figures (0: the thread was gone)
  int64_t cpu_ns = 0;        // ...of it on a CPU
  int64_t run_delay_ns = 0;  // ...runnable but waiting for a CPU (the run queue)
  uint32_t slices = 0;       // times it was switched onto a CPU
  uint32_t preempted_holds =
      0;  // holding: holds that ended in the window whose holder waited >= kPreemptedHoldMinNs
  int64_t preempted_ns = 0;                          // ...the time they waited for a CPU while holding
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
                            GcCollection, GcUntimed, GcCounts, GcSettings, FrameDef, StackDef, ThreadName,
                            StackSample, StackStats, CounterSetup, CounterSample, ThreadSwitches>;

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
                 [](const GcCollection& x) { return x.ts + x.dur; },
                 [](const GcUntimed& x) { return x.ts + x.window; },
                 [](const CounterSample& x) { return x.ts + x.dur; }, [](const auto& x) { return x.ts; }},
      r);
}
// Moves every time in the record by `delta` ns (CLOCK_MONOTONIC -> the recording's timeline).
inline void shift_time(Record& r, int64_t delta) {
  std::visit(overloaded{[&](ThreadState& x) {
                          x.ts += delta;
                          x.since += delta;
                        },
                        [&](StackSample& x) {
                          x.ts += delta;
                          x.since += delta;
                        },
                        [&](auto& x) { x.ts += delta; }},
             r);
}

}  // namespace gilspy::raw
