#include "sampler/gil/process_sampler.hpp"

#include <algorithm>
#include <cmath>

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
      walk_order_(ThreadWalker::kMaxThreads),
      walk_matched_(ThreadWalker::kMaxThreads),
      asked_(ThreadWalker::kMaxThreads),
      gil_bytes_(interp.layout.gil.size),
      image_id_(process_image_id(interp.pid)),
      gc_(interp, options.read_gc, ThreadWalker::kMaxThreads, queue, target, options.gc_read_period_ns) {
  active_.reserve(ThreadWalker::kMaxThreads);
  process_stat_.reset(interp.pid, interp.pid);
  process_stat_.open();  // now: it then stays this process's, if the pid goes to another (check_process())
  gc_.prepare(reader_);
  if (gc_.state_len() > 0) {
    const uint64_t gil = interp.gil_addr, gc = gc_.state_addr();
    const uint64_t lo = std::min(gil, gc), hi = std::max(gil + gil_bytes_.size(), gc + gc_.state_len());
    if (hi - lo <= kMaxSpan) {
      span_addr_ = lo;
      span_bytes_.resize(hi - lo);
      gil_in_span_ = gil - lo;
      gc_.read_state_into(RemoteBytes(span_bytes_).subspan(gc - lo, gc_.state_len()));
    }
  }
  if (options_.stacks.enabled && interp.stack_layout.known) {
    stacks_ = std::make_unique<StackSampler>(interp, reader, queue, target, options_.stacks,
                                             ThreadWalker::kMaxThreads);
  }
}

void ProcessSampler::stack_work(int64_t deadline, bool spare) {
  if (stacks_ == nullptr || gone_) return;
  try {
    stacks_->work(deadline, spare);
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

void ProcessSampler::set_exact(std::unique_ptr<exact::ExactTracer> tracer, bool shadow) {
  exact_ = std::move(tracer);
  shadow_ = shadow;
  if (shadow) exact_sink_.add_up();
}

ProcessSampler::ExactTotal& ProcessSampler::ExactSink::total(int32_t tid) {
  for (ExactTotal& t : totals_) {
    if (t.tid == tid) return t;
  }
  if (totals_.size() < totals_.capacity()) return totals_.emplace_back(ExactTotal{.tid = tid});
  return overflow_;  // past kMaxThreads threads: not added up
}

void ProcessSampler::ExactSink::hold(int32_t tid, int64_t ts, int64_t dur) {
  if (!add_up_) return s_.emit(raw::Hold{.tid = tid, .ts = ts, .dur = dur});
  total(tid).hold_ns += from_first_poll(ts, dur);
}
void ProcessSampler::ExactSink::wait(int32_t tid, int64_t ts, int64_t dur) {
  if (!add_up_) return s_.emit(raw::Wait{.tid = tid, .ts = ts, .dur = dur});
  total(tid).wait_ns += from_first_poll(ts, dur);
}
// Shadow mode counts from the first poll on, where the polls' view of every thread begins (the probes came
// earlier).
int64_t ProcessSampler::ExactSink::from_first_poll(int64_t ts, int64_t dur) const {
  const int64_t from = std::max(ts, s_.first_poll_ns_);
  return s_.started_ && ts + dur > from ? ts + dur - from : 0;
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
    emit(raw::ThreadState{
        .tid = t.ref.tid, .ts = t_now, .role = t.role, .since = t.since_ns, .state_var_ns2 = t.var_ns2});
  }
  if (stacks_) stacks_->emit_stats(t_now);
}

void ProcessSampler::set_role(Track& t, GilRole role, int64_t at) {
  if (t.role == role) return;
  if (at < t.since_ns) at = t.since_ns;
  if (t.role == GilRole::kHolding || role == GilRole::kHolding) holding_changed_ = true;
  t.changed = true;
  const int64_t dur = at - t.since_ns;
  // With --exact the probes say when each thread held and waited; the polls' roles still drive the rest.
  const bool polled = !exact_ || shadow_;
  if (t.role == GilRole::kHolding && polled) emit(raw::Hold{.tid = t.ref.tid, .ts = t.since_ns, .dur = dur});
  if (t.role == GilRole::kWaiting && polled) emit(raw::Wait{.tid = t.ref.tid, .ts = t.since_ns, .dur = dur});
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
bool ProcessSampler::check_process(int64_t t_mid) {
  bool ended = false;
  const char state = process_stat_.state(&ended);
  if (ended) return false;
  const bool stopped = state == 'T' || state == 't';
  if (stopped && stopped_since_ns_ < 0) stopped_since_ns_ = t_mid;
  if (!stopped && stopped_since_ns_ >= 0) {
    emit(raw::ProcessStopped{.ts = stopped_since_ns_, .dur = t_mid - stopped_since_ns_});
    stopped_since_ns_ = -1;
  }
  return true;
}

bool ProcessSampler::poll(int64_t t_now, int64_t t_from) {
  // The target can exit at any read of a poll, not only at its first (the thread list, the holder's
  // identity, the GC's statistics): wherever it does, the target ends here, its intervals closed.
  try {
    return poll_once(t_now, t_from);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNoSuchProcess) throw;
    end_cause_ = TargetEnd::kExited;
    finish(started_ ? t_prev_ : t_now);
    return false;
  }
}

bool ProcessSampler::poll_once(int64_t t_now, int64_t t_from) {
  if (gone_) return false;
  if (exact_) exact_->drain(t_now, exact_sink_);
  const PollRead r = read_state(t_now);
  if (r.outcome != PollRead::kRead) return r.outcome == PollRead::kTryAgain;
  const RemoteBytes gil_read =
      r.in_span ? RemoteBytes(span_bytes_).subspan(gil_in_span_, gil_bytes_.size()) : RemoteBytes(gil_bytes_);
  const std::optional<GilSample> decoded = decode_gil(gil_read, interp_.layout.gil);
  // The table's fields lie inside its own size (checked at attach): never true; nothing decided.
  if (!decoded) return true;
  const GilSample& g = *decoded;
  if (!started_) start_with(g, t_now);
  const int64_t t_mid = t_from < 0 ? t_prev_ + (t_now - t_prev_) / 2 : std::clamp(t_from, t_prev_, t_now);
  holding_changed_ = false;
  bool dirty = false;
  int last = -1;  // the last holder's track; the holder's when the GIL is locked
  if (!upkeep_threads(g, r, t_now, t_mid, &dirty, &last)) return false;
  const int holder = g.locked == 1 ? last : -1;
  if (g.holder() != 0 && holder < 0) counters_.unknown_holder_polls.fetch_add(1, std::memory_order_relaxed);
  uint64_t seen = 0;
  const uint64_t delta = count_handoffs(g, t_now, &seen);
  assign_roles(holder, g, delta, t_now, t_mid);
  observe_gc(holder, r.gc_now, r.got == r.nregions, t_now);
  note_activity(g, delta, dirty, t_now, t_mid);
  note_uncertainty(g, delta > seen, t_now - t_prev_);
  if (stacks_) stacks_->after_poll(t_now, holder, g.switch_number);
  holder_ = holder;
  watched_ = last;
  prev_ = g;
  t_prev_ = t_now;
  if (thread_counters_ != nullptr) thread_counters_->after_poll(t_now);
  return true;
}

// 1. One read: the GIL struct and the identity word of the thread that held it last. Every region costs (the
//    kernel pins a page per region), so the other threads are checked at hand-offs and re-walks only.
ProcessSampler::PollRead ProcessSampler::read_state(int64_t t_now) {
  PollRead r;
  r.gc_now = gc_.wants_read(t_now);  // the GC state too (with the GIL where they lie together)
  r.in_span = r.gc_now && !span_bytes_.empty();
  regions_[r.nregions++] = r.in_span ? ReadRegion{span_addr_, span_bytes_.data(), span_bytes_.size()}
                                     : ReadRegion{interp_.gil_addr, gil_bytes_.data(), gil_bytes_.size()};
  r.watching = watched_ >= 0 && tracks_[watched_].active;
  if (r.watching) regions_[r.nregions++] = {walker_.identity_addr(tracks_[watched_].ref), &watched_word_, 8};
  r.core = r.nregions;  // then the GC state, in the same read
  if (r.gc_now) r.nregions += gc_.add_regions(std::span<ReadRegion>(regions_).subspan(r.nregions));
  try {
    r.got = reader_.read({regions_.data(), r.nregions});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNoSuchProcess) throw;
    end_cause_ = TargetEnd::kExited;
    finish(started_ ? t_prev_ : t_now);
    return {.outcome = PollRead::kEnded};
  }
  if (r.got == 0) return {.outcome = unreadable(t_now) ? PollRead::kEnded : PollRead::kTryAgain};
  unreadable_since_ns_ = -1;
  counters_.polls.fetch_add(1, std::memory_order_relaxed);
  return r;
}

// The GIL is unreadable: the interpreter is being torn down while the process lives on. A moment of that is
// tolerated; a whole unreadable second ends this target like an exit (intervals closed at the last good
// poll), instead of recording nothing for ever. True when it ended.
bool ProcessSampler::unreadable(int64_t t_now) {
  if (unreadable_since_ns_ < 0) unreadable_since_ns_ = t_now;
  if (t_now - unreadable_since_ns_ < kUnreadableLimitNs) return false;
  // Once per target (allocates): did the program image change under us?
  const auto image = process_image_id(interp_.pid);
  bool ended = false;
  process_stat_.state(&ended);  // its pid reused by another process: it exited, it did not exec
  end_cause_ = !image || ended                     ? TargetEnd::kExited
               : image_id_ && *image != *image_id_ ? TargetEnd::kExeced
                                                   : TargetEnd::kInterpreterGone;
  finish(started_ ? t_prev_ : t_now);
  return true;
}

void ProcessSampler::start_with(const GilSample& g, int64_t t_now) {
  prev_ = g;
  t_prev_ = t_now;
  first_poll_ns_ = t_now;
  started_ = true;
  rewalk(t_now);
  last_walk_ns_ = t_now;
  emit(raw::Waiters{.ts = t_now, .n = g.waiters});  // the counter starts with a value, then changes
}

// 2. Thread list upkeep: a vanished or reused thread state (its identity word changed), an unknown holder, or
//    time. A thread state freed and reused by a new thread can become the holder again without moving
//    last_holder or switch_number, which is why the last holder's identity is read at every poll. False when
//    the process turned out to have ended.
bool ProcessSampler::upkeep_threads(const GilSample& g, const PollRead& r, int64_t t_now, int64_t t_mid,
                                    bool* dirty_out, int* last_out) {
  bool dirty = r.got < r.core || (r.watching && watched_word_ != tracks_[watched_].identity);
  int last = find_track(g.last_holder);
  if (!dirty && g.last_holder != 0) {
    if (last < 0) {
      dirty = true;
    } else if (last != watched_) {
      uint64_t word = 0;
      const ReadRegion one{walker_.identity_addr(tracks_[last].ref), &word, 8};
      dirty = reader_.read({&one, 1}) != 1 || word != tracks_[last].identity;
    }
  }
  if (walk_incomplete_) dirty = true;
  // A walk reads every thread state (the kernel pins a page for each): with many threads the list is walked
  // less often. A new holder is still found at once (dirty above); a thread that ended without holding is
  // dated up to that late, which the summary says.
  const int64_t walk_period = options_.walk_period_ns * static_cast<int64_t>(std::max<size_t>(
                                                            1, active_.size() / kThreadsPerWalkPeriod));
  if (walk_period > counters_.walk_period_ns.load(std::memory_order_relaxed)) {
    counters_.walk_period_ns.store(walk_period, std::memory_order_relaxed);
  }
  const bool periodic = t_now - last_walk_ns_ >= walk_period;
  if (periodic && !check_process(t_mid)) {
    // The process we attached to has ended, and its pid (and memory, with the same layout and no address
    // randomization) belongs to another: what was read is not ours.
    end_cause_ = TargetEnd::kExited;
    finish(t_prev_);
    return false;
  }
  if (periodic) gc_.prepare(reader_);  // 3.15+: until the GC's statistics are found
  if (dirty || periodic) {
    rewalk(t_mid, dirty);
    last_walk_ns_ = t_now;
    last = find_track(g.last_holder);  // slots may have changed
  }
  *dirty_out = dirty;
  *last_out = last;
  return true;
}

// 3. Hand-offs: switch_number counts every take by a different thread; we saw one if a new holder is there.
uint64_t ProcessSampler::count_handoffs(const GilSample& g, int64_t t_now, uint64_t* seen_out) {
  const uint64_t moved = g.switch_number - prev_.switch_number;  // modulo 2^64: backwards reads as huge
  const uint64_t most = 1 + static_cast<uint64_t>(std::max<int64_t>(0, t_now - t_prev_) / kMinTakeNs);
  const bool possible = moved <= most;
  if (!possible) counters_.impossible_switch_moves.fetch_add(1, std::memory_order_relaxed);
  const uint64_t delta = possible ? moved : 0;
  const uint64_t seen = (g.locked == 1 && g.last_holder != prev_.last_holder && delta > 0) ? 1 : 0;
  counters_.handoffs_total.fetch_add(delta, std::memory_order_relaxed);
  counters_.handoffs_seen.fetch_add(seen, std::memory_order_relaxed);
  *seen_out = seen;
  return delta;
}

// 4. Every thread but the holder is classified afresh at every poll, from the cond's count and, where that
//    does not decide, the kernel: a role is never carried from one poll to the next, so a misread lasts one
//    poll and the shares stay right at any poll rate.
void ProcessSampler::assign_roles(int holder, const GilSample& g, uint64_t delta, int64_t t_now,
                                  int64_t t_mid) {
  if (holder >= 0) {
    Track& t = tracks_[holder];
    if (t.role == GilRole::kHolding && delta > 0) {
      // Same holder, but the GIL changed hands in between: it dropped and took it again.
      set_role(t, GilRole::kReleased, t_mid);
    }
    set_role(t, GilRole::kHolding, t_mid);
  }
  classify(holder, g, delta, t_now, t_mid);
  if (g.waiters != prev_.waiters) emit(raw::Waiters{.ts = t_now, .n = g.waiters});
}

// 5. The garbage collector, read with the GIL: a collection began, ended, or ran unseen between polls.
void ProcessSampler::observe_gc(int holder, bool gc_now, bool read_whole, int64_t t_now) {
  GcTracker::Holder collector;
  if (holder >= 0 && tracks_[holder].role == GilRole::kHolding) {
    collector = {.slot = holder, .tid = tracks_[holder].ref.tid, .hold_since = tracks_[holder].since_ns};
  }
  if (gc_now) gc_.observe(read_whole, t_now, collector);
  if (gc_.closing()) {
    for (const uint16_t i : active_) {
      if (tracks_[i].role == GilRole::kWaiting) gc_.open_wait(i, tracks_[i].since_ns);
    }
    gc_.close();
  }
  activity_.collecting = gc_.collecting();
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
  const bool doubt = dirty || walk_incomplete_;
  if (handoff || g.locked != prev_.locked || holding_changed_ || doubt) activity_.last_change_ns = t_now;
  if (handoff || g.locked != prev_.locked) activity_.last_handoff_ns = t_now;
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
  if (exact_) exact_->finish(t_end, exact_sink_);
  if (stopped_since_ns_ >= 0 && t_end > stopped_since_ns_) {
    emit(raw::ProcessStopped{.ts = stopped_since_ns_, .dur = t_end - stopped_since_ns_});
  }
  stopped_since_ns_ = -1;
  for (const uint16_t i : active_) end_track(i, t_end);
  active_.clear();
  gc_.finish(t_end);  // after the waits it counts were closed
}

}  // namespace gilspy::sampler
