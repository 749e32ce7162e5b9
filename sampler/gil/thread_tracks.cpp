// The threads a ProcessSampler follows (its tracks), kept in step with the thread list: a re-walk's list
// matched against them, the threads that ended closed, the new ones opened. Poll-path code: nothing here
// allocates (every table is reserved at construction).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "sampler/gil/process_sampler.hpp"

namespace gilspy::sampler {

void ProcessSampler::rewalk(int64_t t_mid, bool changed) {
  bool complete = false;
  const size_t n = walker_.walk(reader_, walk_buffer_, &truncated_, &complete, changed);
  walk_incomplete_ = !complete && !truncated_;
  // The walk sorted by thread state, each known thread looked up in it: compared pairwise, a list of 1 500
  // threads cost a third of a core at one walk per poll.
  for (size_t j = 0; j < n; ++j) walk_order_[j] = {walk_buffer_[j].tstate, static_cast<uint16_t>(j)};
  std::sort(walk_order_.begin(), walk_order_.begin() + static_cast<ptrdiff_t>(n));
  std::fill_n(walk_matched_.begin(), n, uint8_t{0});
  // Threads no longer in the list (or whose state was reused by another thread) end here. A walk cut short by
  // a thread exiting under us ends nobody: the next poll walks again.
  if (!walk_incomplete_) {
    for (const uint16_t i : active_) {
      if (!match_in_walk(tracks_[i], n)) end_track(i, t_mid);
    }
  }
  std::erase_if(active_, [&](uint16_t i) { return !tracks_[i].active; });
  for (size_t j = 0; j < n; ++j) {
    if (walk_matched_[j] != 0 || find_track(walk_buffer_[j].tstate) >= 0) continue;
    // A walk cut short may hold a new thread's state that still names its creator (3.8-3.11, before the new
    // thread runs): the creator, further down the list, was not reached, so the walker could not leave it
    // out. A state naming a thread we follow under another state is left for the next, complete walk.
    if (walk_incomplete_ && names_active_thread(walk_buffer_[j])) continue;
    start_track(walk_buffer_[j], t_mid);
  }
  walked_ = true;
}

bool ProcessSampler::match_in_walk(const Track& t, size_t n) {
  const auto end = walk_order_.begin() + static_cast<ptrdiff_t>(n);
  for (auto it = std::lower_bound(walk_order_.begin(), end, std::pair{t.ref.tstate, uint16_t{0}});
       it != end && it->first == t.ref.tstate; ++it) {
    const ThreadRef& w = walk_buffer_[it->second];
    if (walker_.identity_value(w) == t.identity && w.tid == t.ref.tid) {
      walk_matched_[it->second] = 1;
      return true;
    }
  }
  return false;
}

bool ProcessSampler::names_active_thread(const ThreadRef& ref) const {
  const uint64_t identity = walker_.identity_value(ref);
  for (const uint16_t i : active_) {
    if (tracks_[i].ref.tid == ref.tid || tracks_[i].identity == identity) return true;
  }
  return false;
}

void ProcessSampler::end_track(size_t i, int64_t at) {
  Track& t = tracks_[i];
  set_role(t, GilRole::kReleased, at);
  if (thread_counters_ != nullptr)
    thread_counters_->thread_removed(i, at);  // its last figures before its end
  emit(thread_end(t, at));
  tasks_.thread_removed(i);
  if (stacks_) stacks_->thread_removed(i);
  t.active = false;
}

void ProcessSampler::start_track(const ThreadRef& ref, int64_t t_mid) {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    Track& t = tracks_[i];
    if (t.active) continue;
    t = Track{};
    t.active = true;
    t.ref = ref;
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
    return;
  }
}

}  // namespace gilspy::sampler
