#pragma once
// The garbage collector, seen from the poll loop: polls read the GC state (in the GIL's region, or one or two
// more regions of the poll's one process_vm_readv; at most every read_period_ns) and this turns the readings
// into records (raw/gc_records.hpp):
//
// - A collection is a stretch of polls reading `collecting` == 1. It starts and ends at the midpoints between
//   the polls that saw it begin and end, like the holds. Its
//   generation is the one whose `collections` counter moved: the counter moves at the end of a collection
//   while `collecting` is still 1, so a poll may see the move inside the stretch or at its end; either way
//   each move is counted once. Its collected / uncollectable are that generation's counter deltas.
// - A stretch may hold back-to-back collections (an allocation-heavy loop): a counter move at a poll that
//   still reads 1 means the counted collection ended there, and when a second move comes, the stretch is
//   split at the first move (the poll in between saw the next collection running: a collection's own stop
//   callbacks, which also run with `collecting` == 1, move no counter).
// - Counter moves outside a stretch are collections that began and ended between two polls: GcUntimed, a
//   count within that window, no duration. When one poll interval holds several moves, the one seen running
//   gets one of them (the oldest generation that moved: the longest) and the others are counted as untimed.
// - Its collector is the thread that set `collecting`, not always the holder when a poll first sees it: the
//   "start" gc.callbacks (Python code) run with `collecting` == 1 and can hand the GIL to a waiting thread
//   before the collection proper runs (and the "stop" ones after it). Each thread seen holding during the
//   stretch is a candidate (Part); the collector is one seen holding across the whole window in which
//   `collecting` went to 1 or its counter moved (it held the GIL at that instant: certain), else the one
//   that held the GIL longest in the stretch. Its gc slice on its lane is its longest hold inside it.
// - The GIL waiting during a collection is summed from the sampler's own waits (wait_closed / open_wait):
//   how many threads waited at some time in it, and how long, all threads together.
// - gc.get_count() (GcCounts) on change at most every kGcCountsPeriodNs and at every start and end;
//   gc.isenabled() and the thresholds (GcSettings) first and on change.
//
// Fixed-size buffers, allocated at construction: nothing here allocates after it.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "raw/records.hpp"
#include "sampler/gc/gc_sample.hpp"
#include "sampler/queue/record_queue.hpp"
#include "sampler/remote/memory_reader.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::sampler {

class GcTracker {
 public:
  // `read`: false turns the GC off (--no-gc). `threads`: the sampler's thread slots. `read_period_ns`: the
  // shortest time between two readings (see wants_read()).
  GcTracker(const Interpreter& interp, bool read, size_t threads, RecordQueue& queue, raw::TargetId target,
            int64_t read_period_ns);

  // Reads what the first poll needs that is not in the GC state itself (3.15+: where gc_stats is). Called at
  // construction and at each re-walk until it succeeds; cheap once done.
  void prepare(MemoryReader& reader);
  bool active() const { return active_ && ready_; }
  // Why the GC is not recorded ("" when it is or may still be): for the summary, once polling has ended.
  std::string why_off() const;

  // Where the GC state is and how much of it a poll reads (0 when the GC is off).
  uint64_t state_addr() const { return active_ ? gc_addr_ : 0; }
  size_t state_len() const { return active_ ? layout_.read_size() : 0; }
  // The poll reads the GC state as part of a larger region (beside the GIL, in the same struct): decode from
  // `bytes` (state_len() of them, valid for the tracker's life) instead of a region of its own.
  void read_state_into(RemoteBytes bytes) { external_state_ = bytes; }
  // The regions a poll appends to its read (0 to 2: the GC state unless read elsewhere, 3.15+'s statistics),
  // into `out`; returns how many.
  size_t add_regions(std::span<ReadRegion> out);

  // The GIL's holder at a poll (slot -1 when none or unknown) and when its hold began.
  struct Holder {
    int slot = -1;
    int64_t tid = 0;
    int64_t hold_since = -1;
  };
  // Whether the poll at t_now should read the GC state. The GC state almost never shares a page with the GIL,
  // and every page a read touches is pinned by the kernel: about a third more per bare poll. So it is read at
  // every poll up to 1 / read_period_ns (~6.7 kHz by default) and at that rate above it (every second poll
  // of the adaptive schedule's 10 kHz bursts, 1 in 30 at --busy 200 kHz): its edges are timed from these
  // readings, within 75 us.
  bool wants_read(int64_t t_now) const {
    return active() && (!started_ || t_now - last_read_ns_ >= read_period_ns_);
  }
  // After a poll that read the GC state (wants_read()) and the GIL: `read_ok` says whether every GC region
  // was read. Edges lie at the midpoints between this reading and the previous one.
  void observe(bool read_ok, int64_t t_now, const Holder& holder);
  // True after observe() when the open collection ends at this poll: the sampler then reports every thread
  // still waiting (open_wait) and calls close().
  bool closing() const { return closing_; }
  void open_wait(size_t slot, int64_t since) { count_wait(slot, since, close_at_); }
  void close();

  // The sampler's role changes, while a collection may run.
  void wait_closed(size_t slot, int64_t since, int64_t at) { count_wait(slot, since, at); }
  // A hold of thread `tid` (slot `slot`) from `since` ended at `at`: what of it lies inside a running
  // collection makes that thread a candidate collector.
  void hold_closed(size_t slot, int64_t tid, int64_t since, int64_t at);

  bool collecting() const { return open_.active; }
  // The end of the recording (or of the target): an open collection ends here, its generation unknown
  // unless its counter had moved.
  void finish(int64_t t_end);

 private:
  struct Delta {
    int64_t n[3] = {0, 0, 0}, collected[3] = {0, 0, 0}, uncollectable[3] = {0, 0, 0};
    bool any() const { return n[0] > 0 || n[1] > 0 || n[2] > 0; }
  };
  // A thread seen holding the GIL during the open collection: its holds inside it, the longest one kept.
  struct Part {
    int slot = -1;
    int64_t tid = 0;
    bool holding = false;  // a hold of it is open: since hold_since, inside the collection from `from`
    int64_t hold_since = 0, from = 0;
    int64_t total = 0;                                    // ns held inside the collection so far
    int64_t best_since = 0, best_from = 0, best_to = -1;  // its longest hold inside it ([from, to])
  };
  static constexpr size_t kParts = 4;  // more threads than that taking turns inside one collection: the rest
                                       // are not candidates
  struct Open {
    bool active = false;
    int64_t start = 0;
    std::array<Part, kParts> parts{};
    size_t nparts = 0;
    int certain = -1;  // the part seen holding across the window of its start or its counter move
    // Where no part is certain: the part that held before a hand-off in the window of its counter move (see
    // counter_moved()).
    int probable = -1;
    bool counted = false;
    int64_t counted_at = 0;  // the poll that saw its counter move
    int32_t generation = -1;
    int64_t collected = 0, uncollectable = 0;
    Delta pending;  // counter moves seen by the poll that saw it begin: this one's or earlier ones'
    int64_t pending_ts = 0, pending_window = 0;
    uint64_t waiters = 0;
    int64_t wait_ns = 0;
  };

  // observe()'s steps: the first reading, the counter moves since the last one, an open collection followed
  // (ended, split, or given its counter move).
  void first_reading(const GcSample& s, int64_t t_now, const Holder& holder);
  Delta counter_moves(GcSample& s) const;  // also keeps the last counters where `s`'s went back
  void follow_open(const GcSample& s, Delta d, const Holder& holder, const Holder& before, int64_t t_prev,
                   int64_t t_now);
  void emit_settings(const GcSample& s, int64_t at);
  // Ends the open collection at `at`, then emits the untimed collections counted before it between the same
  // two polls.
  void end_then_pending(int64_t at);
  void begin(int64_t t_mid, const Holder& holder, const Delta& d, int64_t t_prev, int64_t t_now);
  // The holder seen at a poll of the open collection: its part opens (from its hold's start, or the
  // collection's if later); `window_from`: the previous reading, when this poll saw an instant only the
  // collector can cause (its start, its counter move) in (window_from, now]; -1 otherwise.
  void saw_holder(const Holder& holder, int64_t window_from);
  Part* part_of(int slot, int64_t tid);
  void close_part(Part& p, int64_t at);
  // Gives one counter move of `d` (the oldest generation that moved) to the open collection; the rest of `d`
  // is emitted as untimed over [ts, ts + window].
  void take_one(Delta& d);
  void untimed(const Delta& d, int64_t ts, int64_t window);
  // The open collection's counter moved in (t_prev, now]: `before` held at t_prev, `holder` holds now.
  void counter_moved(const Holder& holder, const Holder& before, int64_t t_prev);
  void end(int64_t at);
  void count_wait(size_t slot, int64_t since, int64_t at);
  void emit_counts(const GcSample& s, int64_t at);
  template <class Kind>
  void emit(Kind&& record) {
    queue_.push(target_, std::forward<Kind>(record));
  }

  layouts::GcLayout layout_;
  uint64_t gc_addr_ = 0;
  uint64_t ring_addr_ = 0;
  bool active_ = false;
  bool ready_ = false;
  std::string why_off_;     // set at construction
  bool bad_state_ = false;  // the first reading made no sense (why_off() says what it read)
  int32_t bad_enabled_ = 0, bad_collecting_ = 0;
  RecordQueue& queue_;
  raw::TargetId target_;
  std::array<uint8_t, 512> state_{};
  RemoteBytes external_state_;  // read_state_into(); empty: the tracker's own state_
  std::array<uint8_t, 2048> ring_{};
  bool started_ = false;
  int64_t read_period_ns_ = 0;
  int64_t last_read_ns_ = 0;  // the last good reading
  Holder last_holder_;        // who held the GIL at it
  GcSample prev_;
  GcSample last_counts_;
  int64_t last_counts_ns_ = 0;
  Open open_;
  bool closing_ = false;
  int64_t close_at_ = 0;
  int64_t counts_now_ns_ = 0;      // the poll whose reading close() emits
  uint32_t seq_ = 0;               // collections opened so far: marks a thread as counted in this one
  std::vector<uint32_t> counted_;  // per thread slot: the seq of the collection it was last counted in
};

}  // namespace gilspy::sampler
