#pragma once
// The exact mode's hits (time-ordered) -> each thread's holds and waits: a thread waits from its entry into
// take_gil to the return, holds from there to its entry into drop_gil. Knows nothing of the kernel (the
// probes are probe_rings.hpp's): unit-tested on made-up hits.
#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "sampler/exact/gil_probes.hpp"

namespace gilspy::sampler::exact {

struct ProbeHit {
  int64_t time = 0;  // CLOCK_MONOTONIC ns
  int32_t tid = 0;
  ProbeKind kind = ProbeKind::kTakeEntry;
  bool operator<(const ProbeHit& o) const { return time < o.time; }
};

// Where the intervals go (the sampler turns them into raw Hold / Wait records).
class IntervalSink {
 public:
  virtual ~IntervalSink() = default;
  virtual void hold(int32_t tid, int64_t ts, int64_t dur) = 0;
  virtual void wait(int32_t tid, int64_t ts, int64_t dur) = 0;
};

class HandoffDecoder {
 public:
  // `start_ns`: when the probes began. A thread whose first hit is a return from take_gil waited since then;
  // one whose first hit is drop_gil took the GIL when the holder before it dropped it (it waited since the
  // start until then), or held it since the start. `max_threads`: the table's room for threads with an open
  // hold or wait (it never grows: no allocation after construction).
  HandoffDecoder(int64_t start_ns, size_t max_threads);

  // One hit, later than or as late as every hit before it. A hit that repeats the thread's state (its
  // previous hit was of the same kind: lost records, or two events of one thread during attach) changes
  // nothing.
  void add(const ProbeHit& hit, IntervalSink& out);
  // Closes every open hold and wait at `t_end` (the recording's end).
  void finish(int64_t t_end, IntervalSink& out);

  uint64_t takes() const { return takes_; }           // returns from take_gil
  uint64_t handoffs() const { return handoffs_; }     // takes by another thread than the one before
  uint64_t dropped_threads() const { return full_; }  // hits not decoded: the table was full

 private:
  enum class State : uint8_t { kNew, kReleased, kWaiting, kHolding };
  struct Slot {
    int32_t tid = 0;  // 0: a free slot
    State state = State::kNew;
    int64_t since = 0;
  };
  Slot* find_or_add(int32_t tid);
  void compact();  // forgets released threads (nothing open): room for new ones

  int64_t start_ns_;
  std::vector<Slot> slots_;  // open addressing, size a power of two
  std::vector<Slot> spare_;  // compact()'s scratch, same size
  size_t used_ = 0;
  int32_t last_taker_ = 0;
  int64_t last_drop_ = 0;  // the latest entry into drop_gil, and by whom
  int32_t last_drop_tid_ = 0;
  uint64_t takes_ = 0, handoffs_ = 0, full_ = 0;
  bool compacted_ = false;  // a thread new to the table may be one forgotten, not one found at the start
};

}  // namespace gilspy::sampler::exact
