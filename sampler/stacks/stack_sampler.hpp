#pragma once
// Which code: the Python stacks of the GIL's holder and of its waiters, and the threads' Python names, read
// where they matter and never at every poll. The process sampler tells it when a thread starts holding or
// waiting (set_role) and who holds after each poll; between polls, within the time the poll loop gives it,
// it reads:
// - the holder's stack at the start of each hold it is told of, and again every hold_resample_ns of a hold
//   (on average: each gap is drawn from [1/2, 3/2) of it, so that a loop whose period is a multiple of the
//   gap is not sampled at the same few points of its cycle, never showing the rest);
// - each waiter's stack when it starts waiting (the call that gave up or asked for the GIL);
// - with all_threads, each other thread's stack when it lets go of the GIL (or is first seen without it),
//   and again every released_resample_ns (jittered) while it stays so, after the holder's and waiters';
// - the threads' names (threading._active[ident]._name): soon after a thread appears, then every few
//   seconds for renames.
// A read that is stale by the time there is time for it (the hold or wait ended) is skipped. A holder's stack
// is read while it runs: the GIL's holder and switch count and the thread's innermost frame are read before
// and after, and a sample whose thread moved meanwhile is dropped as torn (counted, never shown). Samples go
// out as interned records (raw/records.hpp: FrameDef, StackDef, StackSample; ThreadName), their text in the
// StackTables the session fills them from. Fixed-size tables; nothing allocates after construction.
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "raw/records.hpp"
#include "sampler/queue/record_queue.hpp"
#include "sampler/stacks/code_cache.hpp"
#include "sampler/stacks/remote_objects.hpp"
#include "sampler/stacks/stack_options.hpp"
#include "sampler/stacks/stack_tables.hpp"
#include "sampler/stacks/stack_walker.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::sampler {

class StackSampler {
 public:
  StackSampler(const Interpreter& interp, MemoryReader& reader, RecordQueue& queue, raw::TargetId target,
               const StackOptions& options, size_t max_threads);

  // From the process sampler, on the poll thread.
  void thread_added(size_t slot, uint64_t tstate, uint64_t pthread_id, int64_t tid, int64_t t_now);
  void thread_removed(size_t slot);
  void role_changed(size_t slot, raw::GilRole role, int64_t since);
  // `switch_number`: the GIL's switch count as this poll read it (with the holder, `holder_slot`).
  void after_poll(int64_t t_now, int holder_slot, uint64_t switch_number);
  void emit_stats(int64_t t_now);

  // Whether there is something to read now; and reading it, until `deadline` (CLOCK_MONOTONIC ns).
  // `spare`: there is budget beyond the holder's and waiters' needs, for all_threads' released threads.
  bool has_work(int64_t now, bool spare = false) const;
  void work(int64_t deadline, bool spare = false);

  const StackTables& tables() const { return tables_; }
  const raw::StackStats& counters() const { return counters_; }

 private:
  struct Slot {
    bool active = false;
    uint64_t tstate = 0, pthread_id = 0;
    int64_t tid = 0;
    raw::GilRole role = raw::GilRole::kReleased;
    int64_t since = 0;
    int64_t last_sample_ns = -1;   // of the current hold or wait
    int64_t resample_gap_ns = 0;   // when a hold is read again after that (hold_resample_ns, jittered)
    int64_t last_attempt_ns = -1;  // ...and when its last read began
    uint8_t retries = 0;           // torn reads of it read again
    bool waiter_queued = false;
    FrameGuess guess{};  // where its innermost frame was at its last read (stack_walker.hpp)
    bool guess_missed = false;
    // The stack of the current wait, read while the thread did not hold the GIL, and the GIL's switch count
    // then: a thread without the GIL runs no Python, so when the wait ends in a hold and the count has moved
    // by one, to this thread, the hold began where that stack left it (after_poll() gives the hold that
    // sample instead of a read). 0: none.
    uint32_t idle_stack = 0;
    uint64_t idle_switch = 0;
    // Names.
    int64_t added_ns = 0;
    uint64_t name_obj = 0;  // the str object its name was read from (a rename assigns another)
  };
  struct Gil {
    uint64_t last_holder = 0, switch_number = 0;
    int32_t locked = -1;
  };
  // The regions that read the GIL's holder, lock and switch count into *g: read with the thread's frame
  // pointer before a walk, and with the walk's last read after it (one process_vm_readv each).
  std::array<ReadRegion, 3> gil_regions(Gil* g) const;
  // One stack read for `slot`, as the holder or as a waiter.
  void sample(size_t slot, raw::GilRole role, int64_t deadline);
  // sample()'s steps: the first read, a torn read noted (a holder asked for again), the walk's result
  // counted, and whether the GIL moved under the walk.
  bool read_first_frame(Slot& s, Gil* before, uint64_t* first_frame);
  void note_torn(size_t slot, bool holding);
  bool walk_usable(WalkResult r, size_t slot, bool holding);
  static bool gil_moved(const Slot& s, bool holding, const Gil& before, const Gil& after);
  // The sample's stack id; 0 when the tables were full.
  uint32_t emit_sample(Slot& s, raw::GilRole role, int64_t now, const WalkOutput& w);
  // Thread names: one step of reading thread names from threading._active, up to `deadline`; a refresh is
  // three phases (the dict's items copied, their idents decoded, each thread's name read), each resumed by
  // the next step.
  void names_step(int64_t deadline);
  bool start_names_refresh(int64_t now);     // false: threading._active could not be read (retried later)
  bool decode_idents(int64_t deadline);      // true once every ident is decoded and sorted
  bool read_thread_names(int64_t deadline);  // true once every thread was looked up
  bool young_unnamed(int64_t now) const;     // a thread seen in the last 5 s whose name was not read yet
  // The next gap between two reads of one hold (or one released stretch): uniform in [1/2, 3/2) of every_ns.
  int64_t next_resample_gap(int64_t every_ns);
  bool find_active_dict();
  // all_threads: one released thread's read that is due, from the queue of those that just let go, else
  // from a round over the slots for those that stayed released; false when none was due.
  bool released_step(int64_t now, int64_t deadline);
  bool released_due(const Slot& s, int64_t now) const;
  template <class Kind>
  void emit(Kind&& record) {
    queue_.push(target_, std::forward<Kind>(record));
  }

  Interpreter interp_;
  RecordQueue& queue_;
  raw::TargetId target_;
  StackOptions options_;
  RemoteObjects objects_;
  StackTables tables_;
  CodeCache codes_;
  StackWalker walker_;
  ZeroedArray<Slot> slots_;
  ZeroedArray<uint32_t> waiters_;  // a ring of slots to read
  size_t waiters_head_ = 0, waiters_count_ = 0;
  ZeroedArray<uint32_t> released_;  // all_threads: a ring of slots that let go of the GIL, to read
  size_t released_head_ = 0, released_count_ = 0;
  size_t released_cursor_ = 0;  // the round over the slots for released threads due again
  ZeroedArray<uint32_t> frame_ids_;
  int holder_request_ = -1;
  int64_t holder_request_since_ = 0;
  raw::StackStats counters_;
  // Names: threading._active's items at the last refresh (ident -> Thread object), sorted by ident once the
  // idents are decoded, so that each thread finds its object in log n (the linear search was n² a refresh).
  struct IdentObject {
    uint64_t ident, obj;
  };
  uint64_t active_dict_ = 0;
  int64_t active_found_ns_ = -1;
  ZeroedArray<IdentObject> idents_;
  size_t active_count_ = 0;
  enum class NamePhase : uint8_t { kIdle, kIdents, kThreads } name_phase_ = NamePhase::kIdle;
  size_t decode_cursor_ = 0;  // kIdents: the idents before it are decoded
  size_t name_cursor_ = 0;
  int64_t names_due_ns_ = 0;
  int64_t rename_check_due_ns_ = 0;  // every named thread's name read again from then on
  bool names_unavailable_ = false;   // threading is not imported (or not readable): asked again rarely
  int64_t last_names_step_ns_;       // when names_step last ran (at first: when the sampler was made)
  uint64_t jitter_state_;            // xorshift64 state for next_resample_gap (never 0)
};

}  // namespace gilspy::sampler
