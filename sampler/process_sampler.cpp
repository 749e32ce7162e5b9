#include "sampler/process_sampler.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/proc_files.hpp"

namespace gilspy::sampler {

ProcTaskStateSource::ProcTaskStateSource(pid_t pid, uint64_t gil_addr, const layouts::GilLayout& gil)
    : pid_(pid),
      gil_addr_(gil_addr),
      gil_(gil),
      files_(ThreadWalker::kMaxThreads),
      stats_(ThreadWalker::kMaxThreads) {}

void ProcTaskStateSource::thread_added(size_t slot, int32_t tid) {
  files_[slot].reset(pid_, tid);
  stats_[slot].reset(pid_, tid);
}
void ProcTaskStateSource::thread_removed(size_t slot) {
  files_[slot].reset(0, 0);
  stats_[slot].reset(0, 0);
}
TaskState ProcTaskStateSource::read(size_t slot) {
  return files_[slot].read(gil_addr_, gil_);
}

ProcessSampler::ProcessSampler(const Interpreter& interp, MemoryReader& reader, TaskStateSource& tasks,
                               RecordQueue& queue, raw::TargetId target, SamplerOptions options)
    : interp_(interp),
      reader_(reader),
      tasks_(tasks),
      queue_(queue),
      target_(target),
      options_(options),
      walker_(interp.pid, interp.layout, interp.interp_addr),
      tracks_(ThreadWalker::kMaxThreads),
      walk_buffer_(ThreadWalker::kMaxThreads),
      asked_(ThreadWalker::kMaxThreads),
      gil_bytes_(interp.layout.gil.size),
      image_id_(process_image_id(interp.pid)),
      gc_(interp, options.read_gc, ThreadWalker::kMaxThreads, queue, target, options.gc_read_period_ns) {
  active_.reserve(ThreadWalker::kMaxThreads);
  process_stat_.reset(interp.pid, interp.pid);
  gc_.prepare(reader_);
  if (gc_.state_len() > 0) {
    const uint64_t gil = interp.gil_addr, gc = gc_.state_addr();
    const uint64_t lo = std::min(gil, gc), hi = std::max(gil + gil_bytes_.size(), gc + gc_.state_len());
    if (hi - lo <= kMaxSpan) {
      span_addr_ = lo;
      span_bytes_.resize(hi - lo);
      gil_in_span_ = gil - lo;
      gc_.read_state_into(span_bytes_.data() + (gc - lo));
    }
  }
  if (options_.stacks.enabled && interp.stack_layout.known) {
    stacks_ = std::make_unique<StackSampler>(interp, reader, queue, target, options_.stacks,
                                             ThreadWalker::kMaxThreads);
  }
}

void ProcessSampler::stack_work(int64_t deadline) {
  if (stacks_ == nullptr || gone_) return;
  try {
    stacks_->work(deadline);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNoSuchProcess) throw;  // gone: the next poll ends the target
  }
}

const char* to_string(TargetEnd e) {
  switch (e) {
    case TargetEnd::kRunning:
      return "running";
    case TargetEnd::kExited:
      return "target exited";
    case TargetEnd::kExeced:
      return "target exec'd another program";
    case TargetEnd::kInterpreterGone:
      return "interpreter gone (GIL unreadable)";
  }
  return "?";
}

size_t ProcessSampler::thread_count() const {
  return active_.size();
}

int ProcessSampler::holder_cpu(int64_t now) {
  if (holder_ < 0 || !tracks_[holder_].active || now - tracks_[holder_].found_ns < kPlacementMinAgeNs)
    return -1;
  return tasks_.cpu(static_cast<size_t>(holder_));
}

int ProcessSampler::find_track(uint64_t tstate) const {
  if (tstate == 0) return -1;
  for (const uint16_t i : active_) {
    if (tracks_[i].ref.tstate == tstate) return static_cast<int>(i);
  }
  return -1;
}

template <class Kind>
void ProcessSampler::emit(Kind&& record) {
  queue_.push(target_, std::forward<Kind>(record));  // a full queue is counted by the queue itself
}

void ProcessSampler::emit_stats(int64_t t_now, uint64_t late, uint64_t missed) {
  emit(raw::Stats{.ts = t_now,
                  .polls = counters_.polls.load(std::memory_order_relaxed),
                  .late = late,
                  .missed = missed,
                  .handoffs_seen = counters_.handoffs_seen.load(std::memory_order_relaxed),
                  .handoffs_total = counters_.handoffs_total.load(std::memory_order_relaxed)});
  for (const uint16_t i : active_) {
    const Track& t = tracks_[i];
    emit(raw::ThreadState{.tid = t.ref.tid, .ts = t_now, .role = t.role, .since = t.since_ns});
  }
  if (stacks_) stacks_->emit_stats(t_now);
}

void ProcessSampler::set_role(Track& t, GilRole role, int64_t at) {
  if (t.role == role) return;
  if (at < t.since_ns) at = t.since_ns;
  if (t.role == GilRole::kHolding || role == GilRole::kHolding) holding_changed_ = true;
  const int64_t dur = at - t.since_ns;
  if (t.role == GilRole::kHolding) emit(raw::Hold{.tid = t.ref.tid, .ts = t.since_ns, .dur = dur});
  if (t.role == GilRole::kWaiting) emit(raw::Wait{.tid = t.ref.tid, .ts = t.since_ns, .dur = dur});
  const auto slot = static_cast<size_t>(&t - tracks_.data());  // a running collection counts its waits
  if (t.role == GilRole::kHolding) gc_.hold_closed(slot, t.ref.tid, t.since_ns, at);
  if (t.role == GilRole::kWaiting) gc_.wait_closed(slot, t.since_ns, at);
  t.role = role;
  t.since_ns = at;
  if (stacks_) stacks_->role_changed(static_cast<size_t>(&t - tracks_.data()), role, at);
  if (thread_counters_ != nullptr)
    thread_counters_->role_changed(static_cast<size_t>(&t - tracks_.data()), role, at);
}

// A stopped process (SIGSTOP, a debugger) looks like a GIL held for as long as the stop: the holder did not
// run. Its leader's task state says so; checked at periodic re-walks (every 20 ms), one pread.
void ProcessSampler::check_stopped(int64_t t_mid) {
  const char state = process_stat_.state();
  const bool stopped = state == 'T' || state == 't';
  if (stopped && stopped_since_ns_ < 0) stopped_since_ns_ = t_mid;
  if (!stopped && stopped_since_ns_ >= 0) {
    emit(raw::ProcessStopped{.ts = stopped_since_ns_, .dur = t_mid - stopped_since_ns_});
    stopped_since_ns_ = -1;
  }
}

bool ProcessSampler::names_active_thread(const ThreadRef& ref) const {
  const uint64_t identity = walker_.identity_value(ref);
  for (const uint16_t i : active_) {
    if (tracks_[i].ref.tid == ref.tid || tracks_[i].identity == identity) return true;
  }
  return false;
}

void ProcessSampler::rewalk(int64_t t_mid, bool changed) {
  bool complete = false;
  const size_t n = walker_.walk(reader_, walk_buffer_, &truncated_, &complete, changed);
  walk_incomplete_ = !complete && !truncated_;
  // Threads no longer in the list (or whose state was reused by another thread) end here. A walk cut short by
  // a thread exiting under us ends nobody: the next poll walks again.
  for (const uint16_t i : active_) {
    if (walk_incomplete_) break;
    Track& t = tracks_[i];
    bool still = false;
    for (size_t j = 0; j < n && !still; ++j) {
      still = walk_buffer_[j].tstate == t.ref.tstate &&
              walker_.identity_value(walk_buffer_[j]) == t.identity && walk_buffer_[j].tid == t.ref.tid;
    }
    if (!still) {
      set_role(t, GilRole::kReleased, t_mid);
      if (thread_counters_ != nullptr)
        thread_counters_->thread_removed(i, t_mid);  // its last figures before its end
      emit(raw::ThreadEnd{.tid = t.ref.tid, .ts = t_mid});
      tasks_.thread_removed(i);
      if (stacks_) stacks_->thread_removed(i);
      t.active = false;
    }
  }
  std::erase_if(active_, [&](uint16_t i) { return !tracks_[i].active; });
  for (size_t j = 0; j < n; ++j) {
    if (find_track(walk_buffer_[j].tstate) >= 0) continue;
    // A walk cut short may hold a new thread's state that still names its creator (3.8-3.11, before the new
    // thread runs): the creator, further down the list, was not reached, so the walker could not leave it
    // out. A state naming a thread we follow under another state is left for the next, complete walk.
    if (walk_incomplete_ && names_active_thread(walk_buffer_[j])) continue;
    for (size_t i = 0; i < tracks_.size(); ++i) {
      Track& t = tracks_[i];
      if (t.active) continue;
      t = Track{};
      t.active = true;
      t.ref = walk_buffer_[j];
      t.identity = walker_.identity_value(t.ref);
      t.since_ns = t_mid;
      t.found_ns = walked_ ? t_mid : INT64_MIN / 2;  // found at attach: running for who knows how long
      tasks_.thread_added(i, t.ref.tid);
      if (stacks_) stacks_->thread_added(i, t.ref.tstate, t.ref.pthread_id, t.ref.tid, t_mid);
      if (thread_counters_ != nullptr) thread_counters_->thread_added(i, t.ref.tid, t.role, t_mid);
      emit(raw::ThreadStart{.tid = t.ref.tid,
                            .ts = t_mid,
                            .tstate = t.ref.tstate,
                            .name = {},
                            .ns_tid = t.ref.ns_tid != t.ref.tid ? t.ref.ns_tid : 0});
      active_.push_back(static_cast<uint16_t>(i));  // capacity reserved: no allocation
      break;
    }
  }
  walked_ = true;
}

void ProcessSampler::apply_task_state(Track& t, TaskState s, const GilSample& g, bool unseen_handoffs,
                                      bool no_room_in_wait, int64_t t_mid) {
  switch (s) {
    case TaskState::kGilCond:
    case TaskState::kGilMutex:
      t.maybe_left_ns = -1;
      set_role(t, GilRole::kWaiting, t_mid);
      return;
    case TaskState::kRunning:
      if (t.role != GilRole::kWaiting) {
        set_role(t, GilRole::kReleased, t_mid);
        return;
      }
      // A woken waiter reads "running" until it really takes the GIL, so it stays a waiter. It left take_gil
      // only if it took the GIL between two polls: surely when it is the last holder now, or when the GIL's
      // condition wait has no room for it (`no_room_in_wait`, see poll(): a waiter queued behind a busy CPU
      // is still counted there, one that took and dropped the GIL is not); perhaps when other hand-offs went
      // unseen. Then it stays a waiter on probation, asked again at every poll until the kernel says where it
      // is, and a release is dated back to the first doubt.
      if (g.last_holder == t.ref.tstate || no_room_in_wait) {
        set_role(t, GilRole::kReleased, t.maybe_left_ns >= 0 ? t.maybe_left_ns : t_mid);
        t.maybe_left_ns = -1;
      } else if (unseen_handoffs && t.maybe_left_ns < 0) {
        t.maybe_left_ns = t_mid;
      }
      return;
    case TaskState::kUnknown:
    case TaskState::kGone:
      if (t.role == GilRole::kHolding) set_role(t, GilRole::kReleased, t_mid);
      return;
    case TaskState::kSwitchWait:
    case TaskState::kOtherSyscall:
      set_role(t, GilRole::kReleased,
               t.role == GilRole::kWaiting && t.maybe_left_ns >= 0 ? t.maybe_left_ns : t_mid);
      t.maybe_left_ns = -1;
      return;
  }
}

bool ProcessSampler::poll(int64_t t_now) {
  // The target can exit at any read of a poll, not only at its first (the thread list, the holder's
  // identity, the GC's statistics): wherever it does, the target ends here, its intervals closed.
  try {
    return poll_once(t_now);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNoSuchProcess) throw;
    end_cause_ = TargetEnd::kExited;
    finish(started_ ? t_prev_ : t_now);
    return false;
  }
}

bool ProcessSampler::poll_once(int64_t t_now) {
  if (gone_) return false;
  // 1. One read: the GIL struct and the identity word of the thread that held it last. Every region costs
  //    (the kernel pins a page per region), so the other threads are checked at hand-offs and re-walks only.
  size_t nregions = 0;
  const bool gc_now = gc_.wants_read(t_now);  // the GC state too (with the GIL where they lie together)
  const bool in_span = gc_now && !span_bytes_.empty();
  regions_[nregions++] = in_span ? ReadRegion{span_addr_, span_bytes_.data(), span_bytes_.size()}
                                 : ReadRegion{interp_.gil_addr, gil_bytes_.data(), gil_bytes_.size()};
  const bool watching = watched_ >= 0 && tracks_[watched_].active;
  if (watching) regions_[nregions++] = {walker_.identity_addr(tracks_[watched_].ref), &watched_word_, 8};
  const size_t core = nregions;  // then the GC state, in the same read
  if (gc_now) nregions += gc_.add_regions(std::span<ReadRegion>(regions_).subspan(nregions));
  size_t got = 0;
  try {
    got = reader_.read({regions_.data(), nregions});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNoSuchProcess) throw;
    end_cause_ = TargetEnd::kExited;
    finish(started_ ? t_prev_ : t_now);
    return false;
  }
  if (got == 0) {
    // The GIL is unreadable: the interpreter is being torn down while the process lives on. A moment of that
    // is tolerated; a whole unreadable second ends this target like an exit (intervals closed at the last
    // good poll), instead of recording nothing for ever.
    if (unreadable_since_ns_ < 0) unreadable_since_ns_ = t_now;
    if (t_now - unreadable_since_ns_ >= kUnreadableLimitNs) {
      // Once per target (allocates): did the program image change under us?
      const auto image = process_image_id(interp_.pid);
      end_cause_ = !image                              ? TargetEnd::kExited
                   : image_id_ && *image != *image_id_ ? TargetEnd::kExeced
                                                       : TargetEnd::kInterpreterGone;
      finish(started_ ? t_prev_ : t_now);
      return false;
    }
    return true;
  }
  unreadable_since_ns_ = -1;
  counters_.polls.fetch_add(1, std::memory_order_relaxed);
  const GilSample g =
      decode_gil(in_span ? span_bytes_.data() + gil_in_span_ : gil_bytes_.data(), interp_.layout.gil);
  if (!started_) {
    prev_ = g;
    t_prev_ = t_now;
    started_ = true;
    rewalk(t_now);
    last_walk_ns_ = t_now;
    emit(raw::Waiters{.ts = t_now, .n = g.waiters});  // the counter starts with a value, then changes
  }
  const int64_t t_mid = t_prev_ + (t_now - t_prev_) / 2;
  holding_changed_ = false;

  // 2. Thread list upkeep: a vanished or reused thread state (its identity word changed), an unknown holder,
  //    or time. A thread state freed and reused by a new thread can become the holder again without moving
  //    last_holder or switch_number, which is why the last holder's identity is read at every poll.
  bool dirty = got < core || (watching && watched_word_ != tracks_[watched_].identity);
  int last = find_track(g.last_holder);  // the last holder's track; the holder's when the GIL is locked
  if (!dirty && g.last_holder != 0) {
    if (last < 0) {
      dirty = true;
    } else if (last != watched_) {
      uint64_t word = 0;
      const ReadRegion r{walker_.identity_addr(tracks_[last].ref), &word, 8};
      dirty = reader_.read({&r, 1}) != 1 || word != tracks_[last].identity;
    }
  }
  if (walk_incomplete_) dirty = true;
  const bool periodic = t_now - last_walk_ns_ >= options_.walk_period_ns;
  if (periodic) check_stopped(t_mid);
  if (periodic) gc_.prepare(reader_);  // 3.15+: until the GC's statistics are found
  if (dirty || periodic) {
    rewalk(t_mid, dirty);
    last_walk_ns_ = t_now;
    last = find_track(g.last_holder);  // slots may have changed
  }
  const int holder = g.locked == 1 ? last : -1;
  if (g.holder() != 0 && holder < 0) counters_.unknown_holder_polls.fetch_add(1, std::memory_order_relaxed);

  // 3. Hand-offs: switch_number counts every take by a different thread; we saw one if a new holder is there.
  const uint64_t delta = g.switch_number >= prev_.switch_number ? g.switch_number - prev_.switch_number : 0;
  const uint64_t seen = (g.locked == 1 && g.last_holder != prev_.last_holder && delta > 0) ? 1 : 0;
  counters_.handoffs_total.fetch_add(delta, std::memory_order_relaxed);
  counters_.handoffs_seen.fetch_add(seen, std::memory_order_relaxed);
  const bool unseen_handoffs = delta > seen;

  // 4. Who to ask the kernel about. A thread leaves take_gil only by taking the GIL, so the set of waiters
  //    can only shrink when the holder changes, and only by the new holder when every hand-off was seen:
  //    then only the previous holder (asked below as a "holding" thread) needs the kernel. After unseen
  //    hand-offs any waiter may have taken and dropped the GIL, but one that did and did not wait again has
  //    left the GIL's condition wait: the waiters are asked only when the cond's count has room for that
  //    (pass 1b). A released thread needs asking only when that count says someone we do not know of sleeps
  //    there (pass 2), so a target with many idle threads does not cost a read of each at every hand-off. A
  //    full scan every full_scan_period_ns is the safety net (a thread blocked on the GIL's mutex is not in
  //    that count; one waiter leaving while another thread begins to wait leaves the count as it was).
  size_t known_waiting = 0;
  for (const uint16_t i : active_) known_waiting += tracks_[i].role == GilRole::kWaiting ? 1 : 0;
  const bool full_scan = t_now - last_full_scan_ns_ >= options_.full_scan_period_ns;
  if (full_scan) last_full_scan_ns_ = t_now;

  // 5. Ask first, then decide: whether a waiter that reads "running" can still be inside the GIL's condition
  //    wait depends on the others. glibc counts a woken waiter in __wrefs until it has run, so the cond's
  //    count covers the threads asleep in it plus the woken ones: when the threads the kernel shows asleep
  //    there (and the waiters not asked) already make up the count, every "running" waiter has left take_gil.
  size_t asked = 0;
  int64_t accounted = 0;        // waiters the cond's count is known or assumed to include
  int64_t running_waiters = 0;  // asked waiters that read "running": perhaps still counted there
  size_t unasked_waiters = 0;   // waiters assumed in the cond, not asked
  const auto ask = [&](uint16_t i) {
    counters_.task_reads.fetch_add(1, std::memory_order_relaxed);
    const TaskState state = tasks_.read(i);
    asked_[asked++] = {i, state};  // capacity kMaxThreads: no allocation
    accounted += state == TaskState::kGilCond ? 1 : 0;
    running_waiters += state == TaskState::kRunning && tracks_[i].role == GilRole::kWaiting ? 1 : 0;
  };
  for (const uint16_t i : active_) {
    Track& t = tracks_[i];
    if (static_cast<int>(i) == holder) {
      t.maybe_left_ns = -1;
      if (t.role == GilRole::kHolding && delta > 0) {
        // Same holder, but the GIL changed hands in between: it dropped and took it again.
        set_role(t, GilRole::kReleased, t_mid);
      }
      set_role(t, GilRole::kHolding, t_mid);
      continue;
    }
    if (full_scan || t.maybe_left_ns >= 0 ||
        (t.role == GilRole::kHolding && (g.waiters > 0 || known_waiting > 0))) {
      ask(i);
    } else if (t.role == GilRole::kHolding) {
      set_role(t, GilRole::kReleased, t_mid);
    } else if (t.role == GilRole::kWaiting) {
      ++accounted;
      ++unasked_waiters;
    }
  }
  // Pass 1b: the cond holds fewer threads than the waiters we assume there (and those the kernel showed
  // there): one of them left, unseen. Which one only the kernel says. Checked at every poll, not only at
  // the one that sees the hand-offs: glibc counts a woken waiter until it has run, so the count can fall
  // one poll later (bench b: the main thread's µs hold unseen, its wait then ran on until the next
  // hand-off, +3.1-4.8 pp of wait on 3.10-3.12).
  if (unasked_waiters > 0 && static_cast<int64_t>(g.waiters) < accounted) {
    for (const uint16_t i : active_) {
      const Track& t = tracks_[i];
      if (static_cast<int>(i) == holder || t.role != GilRole::kWaiting || t.maybe_left_ns >= 0) continue;
      --accounted;  // no longer assumed: asked
      ask(i);
    }
  }
  // Pass 2: more in the cond than the known waiters explain: a released thread began waiting.
  if (!full_scan && g.waiters > accounted + running_waiters) {
    for (const uint16_t i : active_) {
      Track& t = tracks_[i];
      if (static_cast<int>(i) == holder || t.role != GilRole::kReleased || t.maybe_left_ns >= 0) continue;
      counters_.task_reads.fetch_add(1, std::memory_order_relaxed);
      const TaskState state = tasks_.read(i);
      asked_[asked++] = {i, state};
      accounted += state == TaskState::kGilCond ? 1 : 0;
    }
  }
  const bool no_room_in_wait = accounted >= static_cast<int64_t>(g.waiters);
  for (size_t k = 0; k < asked; ++k) {
    apply_task_state(tracks_[asked_[k].first], asked_[k].second, g, unseen_handoffs, no_room_in_wait, t_mid);
  }
  if (g.waiters != prev_.waiters) emit(raw::Waiters{.ts = t_now, .n = g.waiters});
  // 6. The garbage collector, read with the GIL: a collection began, ended, or ran unseen between polls.
  GcTracker::Holder collector;
  if (holder >= 0 && tracks_[holder].role == GilRole::kHolding) {
    collector = {.slot = holder, .tid = tracks_[holder].ref.tid, .hold_since = tracks_[holder].since_ns};
  }
  if (gc_now) gc_.observe(got == nregions, t_now, collector);
  if (gc_.closing()) {
    for (const uint16_t i : active_) {
      if (tracks_[i].role == GilRole::kWaiting) gc_.open_wait(i, tracks_[i].since_ns);
    }
    gc_.close();
  }
  activity_.collecting = gc_.collecting();
  note_activity(g, delta, dirty, t_now, t_mid);
  if (stacks_) stacks_->after_poll(t_now, holder, g.switch_number);
  holder_ = holder;
  watched_ = last;
  prev_ = g;
  t_prev_ = t_now;
  if (thread_counters_ != nullptr) thread_counters_->after_poll(t_now);
  return true;
}

void ProcessSampler::note_activity(const GilSample& g, uint64_t delta, bool dirty, int64_t t_now,
                                   int64_t t_mid) {
  const bool handoff = delta > 0 || g.last_holder != prev_.last_holder;
  activity_.expected_due_ns = activity_.switch_due_ns;
  if (handoff) {
    // How late forced switches come after the moment they are due (the woken waiter must get a CPU first):
    // learnt, so the dense window sits where the switch happens.
    const int64_t late = t_mid - activity_.switch_due_ns;
    if (activity_.switch_due_ns >= 0 && late > -kDueLearnLimitNs && late < kDueLearnLimitNs) {
      due_delay_ns_ += (std::max<int64_t>(0, late + due_delay_ns_) - due_delay_ns_) / 4;
    }
    last_handoff_ns_ = t_mid;
  }
  if (g.waiters == 0) {
    waiters_since_ns_ = -1;
  } else if (waiters_since_ns_ < 0) {
    waiters_since_ns_ = t_mid;
  }
  // Doubtful waiters and unknown threads are resolved by polling again soon, like any change.
  bool probation = false;
  for (const uint16_t i : active_) probation = probation || tracks_[i].maybe_left_ns >= 0;
  const bool doubt = dirty || walk_incomplete_ || probation;
  if (handoff || g.locked != prev_.locked || holding_changed_ || doubt) activity_.last_change_ns = t_now;
  if (handoff || g.locked != prev_.locked) activity_.last_handoff_ns = t_now;
  activity_.probation = probation;
  activity_.switch_due_ns = -1;
  if (g.locked == 1 && g.waiters > 0) {
    activity_.switch_due_ns = std::max(last_handoff_ns_, waiters_since_ns_) +
                              static_cast<int64_t>(g.interval_us) * 1000 + due_delay_ns_;
  }
}

void ProcessSampler::finish(int64_t t_end) {
  if (gone_) return;
  gone_ = true;
  holder_ = -1;
  if (stopped_since_ns_ >= 0 && t_end > stopped_since_ns_) {
    emit(raw::ProcessStopped{.ts = stopped_since_ns_, .dur = t_end - stopped_since_ns_});
  }
  stopped_since_ns_ = -1;
  for (const uint16_t i : active_) {
    Track& t = tracks_[i];
    set_role(t, GilRole::kReleased, t_end);
    if (thread_counters_ != nullptr) thread_counters_->thread_removed(i, t_end);
    emit(raw::ThreadEnd{.tid = t.ref.tid, .ts = t_end});
    tasks_.thread_removed(i);
    if (stacks_) stacks_->thread_removed(i);
    t.active = false;
  }
  active_.clear();
  gc_.finish(t_end);  // after the waits it counts were closed
}

}  // namespace gilspy::sampler
