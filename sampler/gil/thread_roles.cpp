// Each poll's roles for the threads other than the holder (waiting or released), from the GIL's counters, its
// condition variable's count and the kernel; and how far each thread's recorded time may be off for it.
#include <algorithm>
#include <cmath>

#include "sampler/gil/process_sampler.hpp"

namespace gilspy::sampler {

void ProcessSampler::classify(int holder, const GilSample& g, uint64_t delta, int64_t t_now, int64_t t_mid) {
  // A thread leaves take_gil only by taking the GIL, and each take by a thread other than the last holder
  // moves switch_number. `free_takes` bounds how many threads other than the last holder took it since the
  // last poll: while it is zero, every thread that waited then (and is not the last holder) still waits,
  // whatever the kernel shows: woken and queued for a CPU, or preempted between its timed wait and the next,
  // it reads "running" and may be outside the cond's count.
  const uint64_t free_takes = delta - (g.last_holder != prev_.last_holder && delta > 0 ? 1 : 0);
  const size_t asked = pick_asked(holder, g, free_takes);
  ask_kernel(0, asked, g, t_now);
  // A thread that was released at the last poll needs asking only when the cond holds more threads than the
  // waiters kept and those asked explain: it cannot have left a wait it was not in (if it took the GIL and
  // let it go in between, it is released again), so the count shows every new one (but for a join hidden by a
  // waiter's timed wait expiring in the same gap, and one still on its way into the wait: a poll later).
  size_t all = asked;
  if (g.waiters > kept_waiters_ + asleep_ + running_waiters_) {
    for (const uint16_t i : active_) {
      // (pick_asked() left them all out: none is in asked_ twice)
      if (static_cast<int>(i) != holder && tracks_[i].role == GilRole::kReleased)
        asked_[all++] = {i, TaskState::kUnknown};
    }
    ask_kernel(asked, all, g, t_now);
  }
  keep_running_waiters(g, free_takes, all);
  for (size_t k = 0; k < all; ++k) {
    set_role(tracks_[asked_[k].first],
             is_waiting_for_gil(asked_[k].second) ? GilRole::kWaiting : GilRole::kReleased, t_mid);
  }
}

size_t ProcessSampler::pick_asked(int holder, const GilSample& g, uint64_t free_takes) {
  // Kept without asking: the waiters that cannot have taken the GIL (above), while the cond's count still
  // has room for them (a waiter preempted between two timed waits is outside it: then all are asked, and
  // those that read "running" kept). One of them, the one asked longest ago, is asked anyway at each poll: a
  // misread (a "running" thread taken for a woken waiter, though it had taken the GIL and gone) would
  // otherwise last until the next hand-off, and a thread held in a C call that keeps the GIL makes none for
  // seconds. The released threads are left to classify(), which asks them where the count says so.
  uint32_t waiting = 0;
  int audit = -1;
  for (const uint16_t i : active_) {
    const Track& t = tracks_[i];
    if (static_cast<int>(i) == holder || t.role != GilRole::kWaiting || t.ref.tstate == g.last_holder)
      continue;
    ++waiting;
    if (audit < 0 || t.asked_ns < tracks_[audit].asked_ns) audit = i;
  }
  const bool keep = free_takes == 0 && g.waiters >= waiting;
  kept_waiters_ = 0;
  size_t asked = 0;
  for (const uint16_t i : active_) {
    const Track& t = tracks_[i];
    if (static_cast<int>(i) == holder) continue;
    const bool waiter = t.role == GilRole::kWaiting && t.ref.tstate != g.last_holder;
    if (keep && waiter && static_cast<int>(i) != audit) {
      ++kept_waiters_;
    } else if (t.role != GilRole::kReleased) {
      asked_[asked++] = {i, TaskState::kUnknown};  // capacity kMaxThreads: no allocation
    }
  }
  return asked;
}

void ProcessSampler::ask_kernel(size_t from, size_t to, const GilSample& g, int64_t t_now) {
  if (from == 0) asleep_ = running_waiters_ = 0;
  for (size_t k = from; k < to; ++k) {
    Track& t = tracks_[asked_[k].first];
    counters_.task_reads.fetch_add(1, std::memory_order_relaxed);
    asked_[k].second = tasks_.read(asked_[k].first);
    t.asked_ns = t_now;
    asleep_ += asked_[k].second == TaskState::kGilCond ? 1 : 0;
    // The last holder took the GIL since it was seen waiting, whatever it does now: not counted.
    running_waiters_ += asked_[k].second == TaskState::kRunning && t.role == GilRole::kWaiting &&
                                t.ref.tstate != g.last_holder
                            ? 1
                            : 0;
  }
}

void ProcessSampler::keep_running_waiters(const GilSample& g, uint64_t free_takes, size_t asked) {
  // Waiters that read "running" still wait, but for at most `free_takes` of them that took the GIL and let it
  // go; and glibc counts a woken waiter in the cond until it has run, so at least as many as the count has
  // beyond the threads asleep in it and those kept still wait. The evidence's least.
  const uint64_t known = asleep_ + kept_waiters_;
  const uint64_t in_count = g.waiters > known ? g.waiters - known : 0;
  const uint64_t by_takes = running_waiters_ > free_takes ? running_waiters_ - free_takes : 0;
  // Which ones: the waiters first, the latest to begin waiting first (the cond wakes its oldest waiters
  // first: those are the ones that took the GIL); past them, a thread that read "running" began a wait since
  // (the last holder first: it dropped the GIL and went back for it).
  const auto rank = [&g](const Track& t) {
    if (t.ref.tstate == g.last_holder) return 1;
    return t.role == GilRole::kWaiting ? 0 : t.role == GilRole::kHolding ? 1 : 2;
  };
  for (uint64_t keep = std::max(in_count, by_takes); keep > 0; --keep) {
    int pick = -1;
    for (size_t k = 0; k < asked; ++k) {
      if (asked_[k].second != TaskState::kRunning) continue;
      const Track& t = tracks_[asked_[k].first];
      const Track* p = pick < 0 ? nullptr : &tracks_[asked_[pick].first];
      if (p == nullptr || rank(t) < rank(*p) || (rank(t) == rank(*p) && t.since_ns > p->since_ns))
        pick = static_cast<int>(k);
    }
    if (pick < 0) break;
    asked_[pick].second = TaskState::kGilCond;
  }
}

// Each poll is one sample of every thread's state, standing for its window (poll_loop.cpp): where the state
// cannot change inside a window the sample is exact, where it can, the thread's time in each state over the
// window is between 0 and the window, and the sample says which only on average. Per window of length L:
// - hand-offs went unseen (the GIL changed hands between the polls): any thread may have taken or waited for
//   it for any part of the window, a Bernoulli variance of at most L²/4;
// - the lock went from held to free or back with the same last holder (it dropped and took it again, perhaps
//   many times): that thread L²/4, and as much for the window before, where the flip may lie (L²/2);
// - the thread's role changed once, between the two polls: the change is anywhere in the gap, L²/12;
// - else nothing could change: 0.
// The windows' errors are independent (each sample's place in its window is drawn afresh), so they add.
void ProcessSampler::note_uncertainty(const GilSample& g, bool unseen_handoffs, int64_t gap) {
  if (exact_ && !shadow_) return;  // the probes' intervals are exact: no variance to add
  const double l2 = static_cast<double>(gap) * static_cast<double>(gap);
  const bool flipped = g.locked != prev_.locked && g.last_holder == prev_.last_holder;
  for (const uint16_t i : active_) {
    Track& t = tracks_[i];
    if (unseen_handoffs) {
      t.var_ns2 += l2 / 4;
    } else if (flipped && t.ref.tstate == g.last_holder) {
      t.var_ns2 += l2 / 2;
    } else if (t.changed) {
      t.var_ns2 += l2 / 12;
    }
    t.changed = false;
  }
}

raw::ThreadEnd ProcessSampler::thread_end(const Track& t, int64_t at) const {
  return raw::ThreadEnd{
      .tid = t.ref.tid, .ts = at, .state_se_ns = static_cast<int64_t>(std::llround(std::sqrt(t.var_ns2)))};
}

}  // namespace gilspy::sampler
