#pragma once
// Where a session's records go. A session (cli/session.hpp) attaches, polls and drains; each sink turns the
// records into something: the raw files (raw_sink.hpp), the terminal's status line (status_sink.hpp), a live
// screen (`top`). Every call comes from the session's thread, never from the poll thread.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "raw/records.hpp"
#include "raw/summary.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/loop/poll_loop.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::cli {

// One target as the sinks see it. The session owns it; it lives until the session ends.
struct SessionTarget {
  raw::TargetId id = 0;  // what its records are tagged with; never reused in a session
  pid_t pid = 0;
  int64_t rank = 0;    // the target's RANK, else LOCAL_RANK, else 0
  int64_t ns_pid = 0;  // its pid in its own PID namespace (a container) when that differs from pid; else 0
  std::string process_comm;                          // /proc/PID/comm
  std::string command;                               // its command line (launch mode: the command given)
  const sampler::Interpreter* interp = nullptr;      // version, binary, GIL address
  const sampler::ProcessSampler* sampler = nullptr;  // live counters (atomics, safe to read any time)
  int64_t attached_ns = 0;  // on the session's timeline: when its recording began (0: with the session's)
  // Session-wide, copied into each target so a sink needs nothing else to describe it:
  int64_t monotonic_ns = 0;  // the clock anchor: record times count from here (CLOCK_MONOTONIC)
  int64_t realtime_ns = 0;   // CLOCK_REALTIME read together with monotonic_ns
  double rate_hz = 0;        // polls per second asked
  std::string hostname;
};

// After each drain of the sampler's queue (every 50 ms): the live counters.
struct LiveStats {
  const sampler::LoopCounters& loop;
  uint64_t dropped_records = 0;  // queue overflow so far
  // Polling had ended before this drain began: every record has now been delivered and finish() comes next.
  bool polling_ended = false;
};

// Once, after the poll thread has stopped and every record has been delivered.
struct SessionEnd {
  std::string
      stop_reason;  // "duration", "SIGINT" (any stopping signal's name), "target exited", "stopped", "error"
  int64_t end_ns = 0;  // on the session's timeline
  std::map<raw::TargetId, raw::LoopFigures>
      figures;  // per target: the poll loop's and its sampler's counters
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Once per target, before its first record.
  virtual void start(const SessionTarget& target) = 0;
  // Every record, in the order the sampler emitted them. Times are ns on the session's timeline (since
  // target.monotonic_ns); a ThreadStart carries the thread's display name. Stats and ThreadState come at each
  // stats tick of the poll loop (PollLoopOptions::stats_period_s).
  virtual void record(const SessionTarget& target, const raw::Record& r) = 0;
  // After each drain (see LiveStats): a sink flushes what it wrote, redraws, and so on.
  virtual void stats(const LiveStats& live) = 0;
  // Once, at the end, even when the session failed (then stop_reason is "error"): what was recorded stays
  // readable. A sink that throws here ends the session with that error.
  virtual void finish(const SessionEnd& end) = 0;
};

}  // namespace gilspy::cli
