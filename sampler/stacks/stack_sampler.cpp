#include "sampler/stacks/stack_sampler.hpp"

#include <algorithm>
#include <cstring>

#include "base/clock.hpp"

namespace gilspy::sampler {
namespace {

constexpr int64_t kNewThreadNameDelayNs = 10'000'000;    // a new thread is in threading._active by then
constexpr int64_t kUnnamedRetryNs = 100'000'000;         // a young thread not found there yet: again soon
constexpr int64_t kYoungThreadNs = 5'000'000'000;        // ...for this long after it appeared
constexpr int64_t kRenameCheckNs = 1'000'000'000;        // every known thread's name, for renames, per...
constexpr int64_t kThreadsPerRenameCheck = 100;          // ...this many threads (one read each)
constexpr int64_t kNoThreadingRetryNs = 1'000'000'000;   // threading not imported yet
constexpr int64_t kActiveDictRefindNs = 10'000'000'000;  // threading._active looked up again this often
constexpr size_t kMaxNameBytes = 256;
constexpr uint8_t kTornRetries = 2;            // a torn read of a holder is read again at once, this often
constexpr int64_t kFailedRetryNs = 1'000'000;  // then again after this, until a read of the hold holds
// Names due and not stepped for this long (since the last step, or since the sampler began) go first. 10 ms
// (was 50): a new thread's name is due 10 ms after it appears, and a thread that lives 30-50 ms (a request,
// a short job) was often gone before a budget that stacks use up let names go first.
constexpr int64_t kNamesFirstAfterNs = 10'000'000;
// all_threads: slots looked at per step of the round for released threads due again, so that a step with
// thousands of threads and none due costs little.
constexpr size_t kReleasedScanPerStep = 64;

}  // namespace

StackSampler::StackSampler(const Interpreter& interp, MemoryReader& reader, RecordQueue& queue,
                           raw::TargetId target, const StackOptions& options, size_t max_threads)
    : interp_(interp),
      queue_(queue),
      target_(target),
      options_(options),
      objects_(reader, interp.stack_layout),
      codes_(objects_, tables_),
      walker_(objects_, codes_, static_cast<size_t>(std::max(1, options.max_depth))),
      slots_(max_threads),
      waiters_(max_threads),
      released_(options.all_threads ? max_threads : 0),
      frame_ids_(static_cast<size_t>(std::max(1, options.max_depth))),
      idents_(max_threads * 2),
      // Seeded per target and per run; any value but 0 will do, the draws need no quality beyond spread.
      last_names_step_ns_(monotonic_ns()),
      jitter_state_((static_cast<uint64_t>(interp.pid) << 32 ^ static_cast<uint64_t>(monotonic_ns())) | 1) {}

int64_t StackSampler::next_resample_gap(int64_t every_ns) {
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  const auto base = static_cast<uint64_t>(std::max<int64_t>(2, every_ns));
  return static_cast<int64_t>(base / 2 + jitter_state_ % base);
}

void StackSampler::thread_added(size_t slot, uint64_t tstate, uint64_t pthread_id, int64_t tid,
                                int64_t t_now) {
  // Released from t_now, as the process sampler sees a new thread (until it is seen to hold or wait).
  slots_[slot] = Slot{.active = true,
                      .tstate = tstate,
                      .pthread_id = pthread_id,
                      .tid = tid,
                      .since = t_now,
                      .added_ns = t_now};
  names_due_ns_ = std::min(names_due_ns_, t_now + kNewThreadNameDelayNs);
}

void StackSampler::thread_removed(size_t slot) {
  slots_[slot].active = false;
  if (holder_request_ == static_cast<int>(slot)) holder_request_ = -1;
}

void StackSampler::role_changed(size_t slot, raw::GilRole role, int64_t since) {
  Slot& s = slots_[slot];
  // Only a hold seen to follow the wait whose stack was read may start at that stack (after_poll()).
  if (!(s.role == raw::GilRole::kWaiting && role == raw::GilRole::kHolding)) s.idle_stack = 0;
  s.role = role;
  s.since = since;
  s.last_sample_ns = -1;
  s.last_attempt_ns = -1;
  s.retries = 0;
  if (role == raw::GilRole::kHolding) {
    holder_request_ = static_cast<int>(slot);
    holder_request_since_ = since;
  } else if (role == raw::GilRole::kWaiting) {
    // Served in order; by then the slot says whether this wait is still on and not yet sampled.
    if (waiters_count_ < waiters_.size()) {
      waiters_[(waiters_head_ + waiters_count_) % waiters_.size()] = static_cast<uint32_t>(slot);
      ++waiters_count_;
    } else {
      ++counters_.skipped;
    }
  } else if (options_.all_threads && released_count_ < released_.size()) {
    released_[(released_head_ + released_count_) % released_.size()] = static_cast<uint32_t>(slot);
    ++released_count_;
  }
}

void StackSampler::after_poll(int64_t t_now, int holder_slot, uint64_t switch_number) {
  if (holder_slot < 0) return;
  Slot& s = slots_[static_cast<size_t>(holder_slot)];
  if (s.role != raw::GilRole::kHolding) return;
  if (s.idle_stack != 0) {
    // A hold that came straight from the wait whose stack was read, with the first switch since that read:
    // the thread has not held the GIL since (that takes a switch to it and one away), so it resumed where
    // that stack stands, and no read is needed. (A thread that takes the GIL, lets go and takes it back
    // with nobody in between makes no switch; gilspy would see that as a hold of its own, unless all of it
    // falls between two polls: then this sample shows where it waited, a few hundred microseconds stale.)
    const uint32_t stack = s.idle_stack;
    s.idle_stack = 0;
    if (switch_number == s.idle_switch + 1 && s.last_sample_ns < 0 && holder_request_ == holder_slot &&
        holder_request_since_ == s.since) {
      holder_request_ = -1;
      emit(raw::StackSample{
          .tid = s.tid, .ts = s.since, .since = s.since, .role = raw::GilRole::kHolding, .stack = stack});
      ++counters_.samples;
      ++counters_.reused;
      s.last_sample_ns = s.since;
      s.resample_gap_ns = next_resample_gap(options_.hold_resample_ns);
      return;
    }
  }
  if (holder_request_ >= 0) return;
  // Again every hold_resample_ns of a hold (jittered, see the header); a hold whose first read failed (torn,
  // out of time) is read again soon, so that a hold the sampler sees has a stack.
  const bool due = s.last_sample_ns >= 0
                       ? t_now - s.last_sample_ns >= s.resample_gap_ns
                       : s.last_attempt_ns >= 0 && t_now - s.last_attempt_ns >= kFailedRetryNs;
  if (due) {
    holder_request_ = holder_slot;
    holder_request_since_ = s.since;
  }
}

bool StackSampler::has_work(int64_t now, bool spare) const {
  return holder_request_ >= 0 || waiters_count_ > 0 || now >= names_due_ns_ ||
         (spare && options_.all_threads);
}

std::array<ReadRegion, 3> StackSampler::gil_regions(Gil* g) const {
  const auto& l = interp_.layout.gil;
  return {field_region(interp_.gil_addr, l.last_holder, &g->last_holder),
          field_region(interp_.gil_addr, l.locked, &g->locked),
          field_region(interp_.gil_addr, l.switch_number, &g->switch_number)};
}

void StackSampler::work(int64_t deadline, bool spare) {
  const int64_t t0 = monotonic_ns();
  int64_t now = t0;
  // Names go first when they have waited kNamesFirstAfterNs: two threads trading the GIL every switch
  // interval ask for a stack at every hold and every wait, enough to use up the budget, and a name never read
  // leaves a lane called "thread TID" for the whole recording (seen: a 1 s recording under CI load).
  if (now >= names_due_ns_ && now - last_names_step_ns_ >= kNamesFirstAfterNs) {
    last_names_step_ns_ = now;
    names_step(deadline);
    now = monotonic_ns();
  }
  while (now < deadline) {
    if (holder_request_ >= 0) {
      const int slot = holder_request_;
      holder_request_ = -1;
      Slot& s = slots_[static_cast<size_t>(slot)];
      if (!s.active || s.role != raw::GilRole::kHolding || s.since != holder_request_since_) {
        ++counters_.skipped;  // the hold ended before there was time for it
      } else {
        sample(static_cast<size_t>(slot), raw::GilRole::kHolding, deadline);
      }
    } else if (waiters_count_ > 0) {
      const uint32_t slot = waiters_[waiters_head_];
      waiters_head_ = (waiters_head_ + 1) % waiters_.size();
      --waiters_count_;
      const Slot& s = slots_[slot];
      if (s.active && s.role == raw::GilRole::kWaiting && s.last_sample_ns < 0) {
        sample(slot, raw::GilRole::kWaiting, deadline);
      } else if (!s.active || s.role != raw::GilRole::kWaiting) {
        ++counters_.skipped;  // the wait ended before there was time for it
      }
    } else if (now >= names_due_ns_) {
      last_names_step_ns_ = now;
      names_step(deadline);
      if (name_phase_ == NamePhase::kIdle && names_due_ns_ <= now) break;  // nothing more to do now
    } else if (!spare || !options_.all_threads || !released_step(now, deadline)) {
      break;
    }
    now = monotonic_ns();
  }
  counters_.read_ns += static_cast<uint64_t>(now - t0);
}

void StackSampler::sample(size_t slot, raw::GilRole role, int64_t deadline) {
  Slot& s = slots_[slot];
  Gil before, after;
  const bool holding = role == raw::GilRole::kHolding;
  uint64_t first_frame = 0;
  const bool read = read_first_frame(s, &before, &first_frame);
  if (read && holding && (before.locked != 1 || before.last_holder != s.tstate)) {
    ++counters_.skipped;  // it let go in the meantime
    return;
  }
  ++counters_.walks;
  s.last_attempt_ns = monotonic_ns();
  if (!read) {
    note_torn(slot, holding);
    return;
  }
  WalkOutput w;
  const auto gil_after = gil_regions(&after);
  const WalkResult r = walker_.walk_from(s.tstate, first_frame, deadline, &w, gil_after);
  counters_.frames += w.frames_read;
  if (!walk_usable(r, slot, holding)) return;
  if (gil_moved(s, holding, before, after)) {
    ++counters_.torn;  // it let go (or took the GIL): the interval is over, no second read
    return;
  }
  const uint32_t stack = emit_sample(s, role, monotonic_ns(), w);
  if (role == raw::GilRole::kWaiting && stack != 0) {
    s.idle_stack = stack;
    s.idle_switch = after.switch_number;
  }
}

// The GIL and the thread's frame pointer in one read (into *before and *first_frame); false when torn.
bool StackSampler::read_first_frame(Slot& s, Gil* before, uint64_t* first_frame) {
  const auto gil_before = gil_regions(before);
  // Where its frame was last time, unless that guess missed at the last read: a thread whose frame moves
  // between reads (calls of every shape) pays for a wrong guess's page at most every other read.
  const FrameGuess guess = s.guess_missed ? FrameGuess{} : s.guess;
  const bool read = walker_.current_frame(s.tstate, first_frame, gil_before, guess);
  if (read) {
    s.guess_missed = guess.frame != 0 && *first_frame != guess.frame;
    s.guess = walker_.found(*first_frame);
  }
  return read;
}

// A holder that ran on under the read is read again at once (twice at most): the next read usually holds.
void StackSampler::note_torn(size_t slot, bool holding) {
  Slot& s = slots_[slot];
  ++counters_.torn;
  if (holding && s.retries < kTornRetries) {
    ++s.retries;
    holder_request_ = static_cast<int>(slot);
    holder_request_since_ = s.since;
  }
}

// Whether a walk gave a stack to emit; counts why not.
bool StackSampler::walk_usable(WalkResult r, size_t slot, bool holding) {
  switch (r) {
    case WalkResult::kOk:
      return true;
    case WalkResult::kEmpty:
      return false;
    case WalkResult::kTorn:
      note_torn(slot, holding);
      return false;
    case WalkResult::kInvalid:
      ++counters_.invalid;
      return false;
    case WalkResult::kFull:
      ++counters_.skipped;
      return false;
    case WalkResult::kBudget:
      ++counters_.skipped;
      if (holding) {
        holder_request_ = static_cast<int>(slot);  // again at the next chance, if it still holds
        holder_request_since_ = slots_[slot].since;
      }
      return false;
  }
  return true;
}

// The walk checked that the thread's frame pointer did not move; whether the GIL changed hands. A waiter that
// is the GIL's last holder at either read took it since the poll that saw it wait (or just let it go): it ran
// Python meanwhile, and its stack is not where it waited (CI: a sleeper's "wait" read at the loop line after
// its sleep).
bool StackSampler::gil_moved(const Slot& s, bool holding, const Gil& before, const Gil& after) {
  return holding ? (after.locked != 1 || after.last_holder != s.tstate ||
                    after.switch_number != before.switch_number)
                 : (before.last_holder == s.tstate || after.last_holder == s.tstate);
}

uint32_t StackSampler::emit_sample(Slot& s, raw::GilRole role, int64_t now, const WalkOutput& w) {
  const auto frames = walker_.frames();
  for (size_t i = 0; i < frames.size(); ++i) {
    bool added = false;
    frame_ids_[i] = tables_.intern_frame(frames[i], &added);
    if (frame_ids_[i] == 0) {
      ++counters_.skipped;  // the frame table is full
      return 0;
    }
    if (added) {
      emit(raw::FrameDef{.id = frame_ids_[i],
                         .ts = now,
                         .qualname = {},
                         .file = {},
                         .line = frames[i].line,
                         .first_line = frames[i].first_line});
    }
  }
  bool added = false;
  const uint32_t stack = tables_.intern_stack({frame_ids_.data(), frames.size()}, w.truncated, &added);
  if (stack == 0) {
    ++counters_.skipped;
    return 0;
  }
  if (added) emit(raw::StackDef{.id = stack, .ts = now, .truncated = w.truncated, .frames = {}});
  emit(raw::StackSample{.tid = s.tid, .ts = now, .since = s.since, .role = role, .stack = stack});
  ++counters_.samples;
  if (w.truncated) ++counters_.truncated;
  s.last_sample_ns = now;
  s.resample_gap_ns = next_resample_gap(role == raw::GilRole::kReleased ? options_.released_resample_ns
                                                                        : options_.hold_resample_ns);
  s.retries = 0;
  return stack;
}

bool StackSampler::released_due(const Slot& s, int64_t now) const {
  if (!s.active || s.role != raw::GilRole::kReleased) return false;
  if (s.last_sample_ns >= 0) return now - s.last_sample_ns >= s.resample_gap_ns;
  return s.last_attempt_ns < 0 || now - s.last_attempt_ns >= kFailedRetryNs;
}

bool StackSampler::released_step(int64_t now, int64_t deadline) {
  while (released_count_ > 0) {
    const uint32_t slot = released_[released_head_];
    released_head_ = (released_head_ + 1) % released_.size();
    --released_count_;
    if (released_due(slots_[slot], now)) {
      sample(slot, raw::GilRole::kReleased, deadline);
      return true;
    }
  }
  for (size_t looked = 0; looked < std::min(kReleasedScanPerStep, slots_.size()); ++looked) {
    const size_t slot = released_cursor_;
    released_cursor_ = (released_cursor_ + 1) % slots_.size();
    if (released_due(slots_[slot], now)) {
      sample(slot, raw::GilRole::kReleased, deadline);
      return true;
    }
  }
  return false;
}

bool StackSampler::find_active_dict() {
  active_dict_ = objects_.module_global(interp_.interp_addr, "threading", "_active");
  return active_dict_ != 0 && objects_.kind_of(active_dict_) == PyKind::kDict;
}

void StackSampler::names_step(int64_t deadline) {
  const int64_t now = monotonic_ns();
  if (name_phase_ == NamePhase::kIdle) {
    if (now < rename_check_due_ns_ && !young_unnamed(now)) {
      // Due for threads that have ended since (a server's request threads live a few ms): nothing to read
      // until the next rename check. Reading threading._active and every key of it costs ~20 reads.
      names_due_ns_ = rename_check_due_ns_;
      return;
    }
    if (!start_names_refresh(now)) return;
  }
  // Each phase goes on where the last step's deadline stopped it: with many threads a refresh takes several
  // steps (1 500 threads: ~1 500 reads to decode their idents), and starting over at each step read the
  // same first few dozen again and again, leaving the other threads unnamed.
  if (name_phase_ == NamePhase::kIdents && !decode_idents(deadline)) return;
  if (!read_thread_names(deadline)) return;
  name_phase_ = NamePhase::kIdle;
  const int64_t threads = static_cast<int64_t>(active_count_);
  rename_check_due_ns_ = now + kRenameCheckNs * std::max<int64_t>(1, threads / kThreadsPerRenameCheck);
  names_due_ns_ = young_unnamed(now) ? now + kUnnamedRetryNs : rename_check_due_ns_;
}

bool StackSampler::start_names_refresh(int64_t now) {
  if (active_dict_ == 0 || now - active_found_ns_ > kActiveDictRefindNs) {
    active_dict_ = 0;
    if (!find_active_dict()) {
      active_dict_ = 0;
      names_unavailable_ = true;
      names_due_ns_ = now + kNoThreadingRetryNs;
      return false;
    }
    active_found_ns_ = now;
    names_unavailable_ = false;
  }
  if (!objects_.read_dict(active_dict_)) {
    active_dict_ = 0;  // found again next time
    names_due_ns_ = now + kNoThreadingRetryNs;
    return false;
  }
  // Copy the items out: reading the names reuses the dict buffers. Keys are idents (ints), still to decode.
  active_count_ = std::min(objects_.item_count(), idents_.size());
  for (size_t i = 0; i < active_count_; ++i) idents_[i] = {objects_.item_key(i), objects_.item_value(i)};
  decode_cursor_ = 0;
  name_phase_ = NamePhase::kIdents;
  return true;
}

bool StackSampler::decode_idents(int64_t deadline) {
  // At least a batch per step, so that a step that starts late still moves on.
  for (size_t done = 0; decode_cursor_ < active_count_; ++decode_cursor_, ++done) {
    if (done >= 32 && done % 32 == 0 && monotonic_ns() >= deadline) return false;
    idents_[decode_cursor_].ident = objects_.read_uint(idents_[decode_cursor_].ident).value_or(0);
  }
  std::sort(idents_.data(), idents_.data() + active_count_,
            [](const IdentObject& a, const IdentObject& b) { return a.ident < b.ident; });
  name_phase_ = NamePhase::kThreads;
  name_cursor_ = 0;
  return true;
}

bool StackSampler::read_thread_names(int64_t deadline) {
  char text[kMaxNameBytes];
  const IdentObject* begin = idents_.data();
  const IdentObject* end = begin + active_count_;
  for (; name_cursor_ < slots_.size(); ++name_cursor_) {
    if (monotonic_ns() >= deadline) return false;  // the rest at the next step
    Slot& s = slots_[name_cursor_];
    if (!s.active) continue;
    const IdentObject* found = std::lower_bound(
        begin, end, s.pthread_id, [](const IdentObject& e, uint64_t id) { return e.ident < id; });
    const uint64_t obj = found != end && found->ident == s.pthread_id ? found->obj : 0;
    if (obj == 0) continue;
    const uint64_t name = objects_.attribute(obj, "_name");
    if (name == 0 || name == s.name_obj) continue;
    bool cut = false;
    const auto len = objects_.read_str(name, {text, sizeof text}, &cut);
    if (!len || *len == 0) continue;  // not text: left as it was
    const uint32_t id = tables_.intern_string({text, *len});
    if (id == 0) continue;
    s.name_obj = name;
    ++counters_.name_reads;
    emit(raw::ThreadName{.tid = s.tid, .ts = monotonic_ns(), .name = {}, .text_id = id, .os_name = {}});
  }
  return true;
}

bool StackSampler::young_unnamed(int64_t now) const {
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.active && s.name_obj == 0 && now - s.added_ns < kYoungThreadNs) return true;
  }
  return false;
}

void StackSampler::emit_stats(int64_t t_now) {
  counters_.ts = t_now;
  counters_.bytes = objects_.bytes_read();
  emit(raw::StackStats(counters_));
}

}  // namespace gilspy::sampler
