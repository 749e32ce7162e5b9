#include "sampler/gc/gc_tracker.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"

namespace gilspy::sampler {

GcTracker::GcTracker(const Interpreter& interp, bool read, size_t threads, RecordQueue& queue,
                     raw::TargetId target, int64_t read_period_ns)
    : layout_(interp.layout.gc),
      gc_addr_(interp.gc_addr),
      queue_(queue),
      target_(target),
      read_period_ns_(read_period_ns),
      counted_(threads, 0) {
  if (!read) {
    why_off_ = "not read (--no-gc)";
    return;
  }
  if (!layout_.known || gc_addr_ == 0) {
    why_off_ = std::string("not read: ") +
               (*layout_.why_unknown != '\0' ? layout_.why_unknown : "its GC state is not described");
    return;
  }
  if (layout_.read_size() > state_.size() || layout_.ring_size > ring_.size()) {
    why_off_ = "not read: its GC state is larger than gilspy reads";
    return;
  }
  active_ = true;
  ready_ = layout_.stats_home == layouts::GcStatsHome::kInline;
}

std::string GcTracker::why_off() const {
  if (!bad_state_) return why_off_;
  return "not read: its GC state does not look right (enabled = " + std::to_string(bad_enabled_) +
         ", collecting = " + std::to_string(bad_collecting_) + ")";
}

void GcTracker::prepare(MemoryReader& reader) {
  if (!active_ || ready_) return;
  // 3.15+: gc->generation_stats, allocated once when the interpreter starts; null until then.
  uint64_t ring = 0;
  const ReadRegion r{gc_addr_ + layout_.stats, &ring, sizeof ring};
  try {
    if (reader.read({&r, 1}) != 1 || ring == 0) return;
  } catch (const Error&) {
    return;  // the process is going away: the poll will say so
  }
  ring_addr_ = ring;
  ready_ = true;
}

size_t GcTracker::add_regions(std::span<ReadRegion> out) {
  if (!active() || out.size() < 2) return 0;
  size_t n = 0;
  if (external_state_.empty()) out[n++] = {gc_addr_, state_.data(), layout_.read_size()};
  if (layout_.stats_home == layouts::GcStatsHome::kRing)
    out[n++] = {ring_addr_, ring_.data(), layout_.ring_size};
  return n;
}

void GcTracker::emit_counts(const GcSample& s, int64_t at) {
  emit(raw::GcCounts{.ts = at, .count = {s.count[0], s.count[1], s.count[2]}});
  last_counts_ = s;
  last_counts_ns_ = at;
}

void GcTracker::begin(int64_t t_mid, const Holder& holder, const Delta& d, int64_t t_prev, int64_t t_now) {
  ++seq_;
  open_ = Open{};
  open_.active = true;
  open_.start = t_mid;
  open_.pending = d;
  open_.pending_ts = t_prev;
  open_.pending_window = t_now - t_prev;
  // Whoever held the GIL across the window in which `collecting` went to 1 set it.
  saw_holder(holder, t_prev < t_now ? t_prev : -1);
}

GcTracker::Part* GcTracker::part_of(int slot, int64_t tid) {
  for (size_t i = 0; i < open_.nparts; ++i) {
    // The tid too: a slot freed by a thread that ended is given to the next new one.
    if (open_.parts[i].slot == slot && open_.parts[i].tid == tid) return &open_.parts[i];
  }
  if (open_.nparts == kParts) return nullptr;
  Part& p = open_.parts[open_.nparts++];
  p = Part{};
  p.slot = slot;
  p.tid = tid;
  return &p;
}

void GcTracker::saw_holder(const Holder& holder, int64_t window_from) {
  if (!open_.active || holder.slot < 0) return;
  Part* p = part_of(holder.slot, holder.tid);
  if (p == nullptr) return;
  if (!p->holding || p->hold_since != holder.hold_since) {
    if (p->holding) close_part(*p, holder.hold_since);
    p->holding = true;
    p->hold_since = holder.hold_since;
    p->from = std::max(holder.hold_since, open_.start);
  }
  // Strictly before: a hand-off in the window is dated at the window's start, which is the previous reading
  // itself when that poll came late (poll_loop.cpp); such a hold began inside the window.
  if (open_.certain < 0 && window_from >= 0 && holder.hold_since < window_from) {
    open_.certain = static_cast<int>(p - open_.parts.data());
  }
}

void GcTracker::close_part(Part& p, int64_t at) {
  p.holding = false;
  if (at <= p.from) return;
  p.total += at - p.from;
  if (at - p.from > p.best_to - p.best_from) {
    p.best_since = p.hold_since;
    p.best_from = p.from;
    p.best_to = at;
  }
}

void GcTracker::take_one(Delta& d) {
  for (int g = 2; g >= 0; --g) {
    if (d.n[g] <= 0) continue;
    open_.generation = g;
    open_.collected = d.collected[g];
    open_.uncollectable = d.uncollectable[g];
    open_.counted = true;
    --d.n[g];
    d.collected[g] = 0;  // several of one generation between two polls: what they freed goes to this one
    d.uncollectable[g] = 0;
    return;
  }
}

void GcTracker::counter_moved(const Holder& holder, const Holder& before, int64_t t_prev) {
  // Whoever held the GIL across this window moved the counter: the collector.
  saw_holder(holder, t_prev);
  if (open_.certain >= 0 || before.slot < 0 || before.tid == holder.tid) return;
  // The GIL changed hands in the window. The counter moves as the collection proper ends (C code that never
  // lets the GIL go), and the stop callbacks right after it are Python code, where a thread that waited
  // through the collection has its drop request answered: so the thread that held before the hand-off moved
  // it. (The one that holds now did only if it took the GIL back in the window and its collection proper fit
  // in the rest of it: a part shorter than a poll window.) Without this, a thread handed the GIL in the start
  // and stop callbacks of a contended collection could hold more of it than the collector and be named.
  if (Part* p = part_of(before.slot, before.tid)) open_.probable = static_cast<int>(p - open_.parts.data());
}

void GcTracker::untimed(const Delta& d, int64_t ts, int64_t window) {
  for (int g = 0; g < 3; ++g) {
    if (d.n[g] <= 0) continue;
    emit(raw::GcUntimed{.ts = ts,
                        .window = std::max<int64_t>(0, window),
                        .generation = g,
                        .n = static_cast<uint64_t>(d.n[g]),
                        .collected = static_cast<uint64_t>(d.collected[g]),
                        .uncollectable = static_cast<uint64_t>(d.uncollectable[g])});
  }
}

void GcTracker::count_wait(size_t slot, int64_t since, int64_t at) {
  if (!open_.active) return;
  const int64_t from = std::max(since, open_.start);
  if (at <= from) return;
  open_.wait_ns += at - from;
  if (slot < counted_.size() && counted_[slot] != seq_) {
    counted_[slot] = seq_;
    ++open_.waiters;
  }
}

void GcTracker::hold_closed(size_t slot, int64_t tid, int64_t since, int64_t at) {
  if (!open_.active || at <= open_.start) return;
  Part* p = part_of(static_cast<int>(slot), tid);
  if (p == nullptr) return;
  if (!p->holding || p->hold_since != since) {  // a hold no GC reading saw (between two of them)
    p->hold_since = since;
    p->from = std::max(since, open_.start);
  }
  close_part(*p, at);
}

void GcTracker::end(int64_t at) {
  Open& o = open_;
  const int64_t dur = std::max<int64_t>(0, at - o.start);
  const int named = o.certain >= 0 ? o.certain : o.probable;
  int best = named;
  for (size_t i = 0; i < o.nparts; ++i) {
    Part& p = o.parts[i];
    if (p.holding) close_part(p, at);
    if (best < 0 || (named < 0 && p.total > o.parts[static_cast<size_t>(best)].total)) {
      best = static_cast<int>(i);
    }
  }
  int64_t tid = 0, hold_lead = -1, held_from = 0, held = 0;
  if (best >= 0) {
    const Part& p = o.parts[static_cast<size_t>(best)];
    tid = p.tid;
    if (p.best_to > p.best_from) {
      hold_lead = p.best_from - p.best_since;
      held_from = std::clamp<int64_t>(p.best_from - o.start, 0, dur);
      held = std::clamp<int64_t>(p.best_to - p.best_from, 0, dur - held_from);
    }
  }
  emit(raw::GcCollection{.tid = tid,
                         .ts = o.start,
                         .dur = dur,
                         .generation = o.generation,
                         .collected = static_cast<uint64_t>(std::max<int64_t>(0, o.collected)),
                         .uncollectable = static_cast<uint64_t>(std::max<int64_t>(0, o.uncollectable)),
                         .waiters = o.waiters,
                         .wait_ns = o.wait_ns,
                         .hold_lead = hold_lead,
                         .held_dur = held,
                         .held_from = held_from});
  open_ = Open{};
}

void GcTracker::observe(bool read_ok, int64_t t_now, const Holder& holder) {
  closing_ = false;
  if (!active() || !read_ok) return;
  const int64_t t_prev = started_ ? last_read_ns_ : t_now;
  const int64_t t_mid = t_prev + (t_now - t_prev) / 2;
  last_read_ns_ = t_now;
  const Holder before = std::exchange(last_holder_, holder);
  const RemoteBytes state =
      !external_state_.empty() ? external_state_ : RemoteBytes(state_.data(), layout_.read_size());
  GcSample s = decode_gc(state, RemoteBytes(ring_.data(), layout_.ring_size), layout_);
  if (!s.plausible()) {
    // A first reading that makes no sense: this is not the GC state gilspy thinks it is; never guessed. Later
    // ones (a read torn by the interpreter's teardown) are skipped.
    if (!started_) {
      active_ = false;  // said by why_off(); nothing allocated here, in the poll loop
      bad_state_ = true;
      bad_enabled_ = s.enabled;
      bad_collecting_ = s.collecting;
    }
    return;
  }
  if (!started_) {
    first_reading(s, t_now, holder);
    return;
  }
  const Delta d = counter_moves(s);
  if (s.enabled != prev_.enabled || s.threshold[0] != prev_.threshold[0] ||
      s.threshold[1] != prev_.threshold[1] || s.threshold[2] != prev_.threshold[2]) {
    emit_settings(s, t_mid);
  }
  if (!open_.active) {
    if (s.collecting == 1) {
      begin(t_mid, holder, d, t_prev, t_now);
      emit_counts(s, t_now);
    } else if (d.any()) {
      untimed(d, t_prev, t_now - t_prev);
    }
  } else {
    follow_open(s, d, holder, before, t_prev, t_now);
  }
  prev_ = s;
  counts_now_ns_ = t_now;
  if (closing_) {
    last_counts_ = s;  // emitted at close()
    return;
  }
  const bool counts_changed = s.count[0] != last_counts_.count[0] || s.count[1] != last_counts_.count[1] ||
                              s.count[2] != last_counts_.count[2];
  if (counts_changed && t_now - last_counts_ns_ >= raw::kGcCountsPeriodNs) emit_counts(s, t_now);
}

void GcTracker::emit_settings(const GcSample& s, int64_t at) {
  emit(raw::GcSettings{
      .ts = at, .enabled = s.enabled == 1, .threshold = {s.threshold[0], s.threshold[1], s.threshold[2]}});
}

void GcTracker::first_reading(const GcSample& s, int64_t t_now, const Holder& holder) {
  started_ = true;
  prev_ = s;
  emit_settings(s, t_now);
  emit_counts(s, t_now);
  // One that began before the recording is timed from its first sight.
  if (s.collecting == 1) begin(t_now, holder, Delta{}, t_now, t_now);
}

GcTracker::Delta GcTracker::counter_moves(GcSample& s) const {
  // The counters only grow. 3.15's ring buffers are read while the collector may be between moving a
  // generation's index and writing the entry there: the entry is then one from a lap ago, whose counters are
  // lower. That reading's counters are not taken (the previous ones stay), or the next reading would count
  // a lap of collections that never happened.
  for (int g = 0; g < 3; ++g) {
    if (s.collections[g] < prev_.collections[g]) {
      s.collections[g] = prev_.collections[g];
      s.collected[g] = prev_.collected[g];
      s.uncollectable[g] = prev_.uncollectable[g];
    }
  }
  Delta d;
  for (int g = 0; g < 3; ++g) {
    d.n[g] = std::max<int64_t>(0, s.collections[g] - prev_.collections[g]);
    d.collected[g] = std::max<int64_t>(0, s.collected[g] - prev_.collected[g]);
    d.uncollectable[g] = std::max<int64_t>(0, s.uncollectable[g] - prev_.uncollectable[g]);
  }
  return d;
}

void GcTracker::follow_open(const GcSample& s, Delta d, const Holder& holder, const Holder& before,
                            int64_t t_prev, int64_t t_now) {
  const int64_t t_mid = t_prev + (t_now - t_prev) / 2;
  if (d.any()) {
    if (open_.counted) {
      // Its counter had moved already, at a poll that still read `collecting` == 1: that was the next
      // collection running (or this one's stop callbacks, which cannot move a counter again). So this one
      // ended at that poll, and the next one, which began there, is this move's. Its waits so far stay with
      // the first.
      const int64_t split = open_.counted_at;
      end_then_pending(split);
      begin(split, holder, Delta{}, t_prev, t_now);
    }
    take_one(d);
    open_.counted_at = t_mid;
    counter_moved(holder, before, t_prev);
    if (d.any()) {
      // More moves than the one seen running: after it, other collections ran between the two polls, so it
      // ended in this interval, and what runs now (if anything) is a later one. Split here, so that the
      // untimed ones (drawn at this interval's midpoint) fall between the two.
      end_then_pending(t_mid);
      untimed(d, t_prev, t_now - t_prev);
      if (s.collecting == 1) begin(t_mid, holder, Delta{}, t_mid, t_mid);
    }
  }
  saw_holder(holder, -1);  // a candidate: the callbacks and finalizers may hand the GIL over
  if (s.collecting == 0 && open_.active) {
    closing_ = true;
    close_at_ = t_mid;
  }
}

void GcTracker::end_then_pending(int64_t at) {
  const Delta earlier = open_.pending;
  const int64_t ts = open_.pending_ts, window = open_.pending_window;
  end(at);
  untimed(earlier, ts, window);
}

void GcTracker::close() {
  if (!closing_ || !open_.active) return;
  closing_ = false;
  Delta pending = open_.pending;
  if (!open_.counted) take_one(pending);
  const int64_t pts = open_.pending_ts, pwin = open_.pending_window;
  end(close_at_);
  untimed(pending, pts, pwin);  // collections that ran before this one, between the same two polls
  emit_counts(last_counts_, counts_now_ns_);
}

void GcTracker::finish(int64_t t_end) {
  closing_ = false;
  if (!open_.active) return;
  end_then_pending(t_end);  // its generation stays unknown unless its counter moved inside the stretch
}

}  // namespace gilspy::sampler
