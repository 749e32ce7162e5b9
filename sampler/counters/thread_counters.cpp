#include "sampler/counters/thread_counters.hpp"

#include <algorithm>

namespace gilspy::sampler {

using raw::GilRole;

namespace {

bool contends(GilRole r) {
  return r != GilRole::kReleased;
}

// total * part / whole without overflow (whole > 0).
uint64_t scale_u(uint64_t total, uint64_t part, uint64_t whole) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(total) * part / whole);
}

// A rate is trusted once this much time without a change stands behind it; older time counts half after
// kRateWindowNs, so it follows a thread whose behaviour in a role changes.
constexpr int64_t kRateMinNs = 200'000;
constexpr int64_t kRateWindowNs = 16'000'000;

void erase_slot(std::vector<uint16_t>& list, size_t slot) {
  std::erase(list, static_cast<uint16_t>(slot));  // never allocates
}

}  // namespace

ThreadCounters::ThreadCounters(CounterSource& source, RecordQueue& queue, raw::TargetId target, size_t slots,
                               ThreadCountersOptions options)
    : source_(source), queue_(queue), target_(target), options_(options), slots_(slots) {
  active_.reserve(slots);
  changed_.reserve(slots);
  contending_.reserve(slots);
}

bool ThreadCounters::take_switch_token(int64_t t) {
  constexpr double kBurst = 64;
  if (switch_tokens_at_ >= 0 && t > switch_tokens_at_) {
    switch_tokens_ = std::min(
        kBurst, switch_tokens_ + static_cast<double>(t - switch_tokens_at_) / 1e9 * options_.switches_per_s);
  }
  switch_tokens_at_ = std::max(switch_tokens_at_, t);
  if (switch_tokens_ < 1) return false;
  switch_tokens_ -= 1;
  return true;
}

void ThreadCounters::read_switches(size_t slot, int64_t t) {
  Slot& s = slots_[slot];
  ++switch_reads_;
  s.next_switches_ns = t + options_.switches_period_ns;
  if (const auto c = source_.read_switches(slot)) {
    queue_.push(
        target_,
        raw::ThreadSwitches{.tid = s.tid, .ts = t, .voluntary = c->voluntary, .involuntary = c->involuntary});
  }
}

void ThreadCounters::thread_added(size_t slot, int64_t tid, GilRole role, int64_t at) {
  Slot& s = slots_[slot];
  s = Slot{};
  s.active = true;
  s.tid = tid;
  s.last_read_ns = at;
  source_.thread_added(slot, static_cast<int32_t>(tid));
  // A thread found after the first poll began since (a thread-per-request server starts a thousand a
  // second, and most end within a millisecond or two): it is not read now, so one that ends before its first
  // due read never costs an open of its schedstat (most of those opens found the thread gone already). Its
  // first read is its baseline. (Its switches are still read now, within their own small rate.)
  const bool late = polled_;
  if (!late) {
    const CounterReading r = source_.read(slot, true);
    ++reads_;
    s.sched = r.sched;
    s.perf = r.perf;
  }
  s.segments[0] = {role, at, false};
  s.segment_count = 1;
  emit_window(s, at);                              // an empty window: sets the roles and the start
  active_.push_back(static_cast<uint16_t>(slot));  // capacity reserved: no allocation
  if (contends(role)) {
    s.contending = true;
    contending_.push_back(static_cast<uint16_t>(slot));
  }
  if (take_switch_token(at)) read_switches(slot, at);
}

void ThreadCounters::role_changed(size_t slot, GilRole role, int64_t at) {
  Slot& s = slots_[slot];
  if (!s.active) return;
  if (s.segment_count == s.segments.size()) read_now(slot, std::max(at, s.last_read_ns));
  Segment& last = s.segments[s.segment_count - 1];
  if (last.role == role) return;
  // A change dated before the last read (the sampler dates some back to a first doubt) starts at that read:
  // what was read before is attributed already.
  at = std::max(at, s.last_read_ns);
  if (at <= last.since || (s.segment_count == 1 && at <= s.last_read_ns)) {
    last.role = role;
    last.starts = true;
    last.since = std::max(last.since, at);
  } else {
    s.segments[s.segment_count++] = {role, at, true};
  }
  s.read_in_role = false;
  if (contends(role) != s.contending) {
    s.contending = contends(role);
    if (s.contending) {
      contending_.push_back(static_cast<uint16_t>(slot));
    } else {
      erase_slot(contending_, slot);
    }
  }
  if (!s.changed) {
    s.changed = true;
    changed_.push_back(static_cast<uint16_t>(slot));
  }
}

void ThreadCounters::after_poll(int64_t t_now) {
  polled_ = true;
  // A thread that changes role at nearly every poll (one that drops the GIL around every write) is read at
  // most every change_read_gap_ns: its changes in between become segments of one stretch, split the same way.
  size_t kept = 0;
  for (const uint16_t slot : changed_) {
    Slot& s = slots_[slot];
    if (s.active && t_now - s.last_read_ns < options_.change_read_gap_ns) {
      changed_[kept++] = slot;
      continue;
    }
    s.changed = false;
    if (s.active) read_now(slot, t_now);
  }
  changed_.resize(kept);  // never grows: no allocation
  // The holder and the waiters, so that the stretch before their next change is short and its rate known
  // (the holder's in particular: it runs).
  const size_t n = contending_.size();
  size_t done = 0;
  for (size_t k = 0;
       k < n && k < 4 * options_.in_role_reads_per_poll && done < options_.in_role_reads_per_poll; ++k) {
    contending_cursor_ = (contending_cursor_ + 1) % n;
    const uint16_t slot = contending_[contending_cursor_];
    Slot& s = slots_[slot];
    const bool waiting = s.segments[s.segment_count - 1].role == raw::GilRole::kWaiting;
    const int64_t gap = waiting && s.read_in_role ? options_.in_role_wait_gap_ns : options_.in_role_gap_ns;
    if (t_now - s.last_read_ns >= gap) {
      read_now(slot, t_now, false);
      s.read_in_role = true;
      ++done;
    }
  }
  if (active_.empty()) return;
  // Everyone else, one at a time.
  if (t_now >= next_sweep_ns_) {
    for (size_t k = 0; k < 8 && k < active_.size(); ++k) {
      sweep_cursor_ = (sweep_cursor_ + 1) % active_.size();
      const uint16_t slot = active_[sweep_cursor_];
      if (!slots_[slot].contending && t_now - slots_[slot].last_read_ns >= options_.steady_period_ns) {
        read_now(slot, t_now);
        break;
      }
    }
    next_sweep_ns_ = t_now + options_.sweep_gap_ns;
  }
  switch_cursor_ = (switch_cursor_ + 1) % active_.size();
  const uint16_t slot = active_[switch_cursor_];
  if (t_now >= slots_[slot].next_switches_ns && take_switch_token(t_now)) read_switches(slot, t_now);
}

void ThreadCounters::thread_removed(size_t slot, int64_t at) {
  Slot& s = slots_[slot];
  if (!s.active) return;
  // Never read (a thread that began and ended between two due reads): nothing to measure against.
  const bool read_before = s.sched.has_value() || s.perf.has_value();
  if (read_before) read_now(slot, std::max(at, s.last_read_ns));
  end_hold(s);
  emit_window(s, s.last_read_ns);
  if (take_switch_token(at)) read_switches(slot, at);
  source_.thread_removed(slot);
  s.active = false;
  erase_slot(active_, slot);
  if (s.contending) erase_slot(contending_, slot);
  if (s.changed) erase_slot(changed_, slot);
  s.changed = false;
  s.contending = false;
}

void ThreadCounters::end_hold(Slot& s) {
  if (!s.in_hold) return;
  s.in_hold = false;
  if (s.hold_delay_ns >= raw::kPreemptedHoldMinNs) {
    raw::CounterSample& w = s.window[static_cast<size_t>(GilRole::kHolding)];
    ++w.preempted_holds;
    w.preempted_ns += s.hold_delay_ns;
  }
  s.hold_delay_ns = 0;
}

void ThreadCounters::emit_window(Slot& s, int64_t t) {
  for (raw::CounterSample& w : s.window) {
    const bool any = w.time_ns > 0 || w.count > 0 || w.holds > 0 || w.preempted_holds > 0;
    if (any && t > s.window_start_ns) {
      w.tid = s.tid;
      w.ts = s.window_start_ns;
      w.dur = t - s.window_start_ns;
      queue_.push(target_, w);  // a full queue is counted by the queue
    }
  }
  for (size_t r = 0; r < s.window.size(); ++r) {
    s.window[r] = raw::CounterSample{};
    s.window[r].role = static_cast<GilRole>(r);
  }
  s.window_start_ns = t;
}

void ThreadCounters::add_piece(Slot& s, const Segment& seg, int64_t from, int64_t to, const Split& part,
                               bool sched, uint8_t count) {
  // Holds: one begins where a holding segment starts; it ends where another role (or a retake) begins.
  const bool holding = seg.role == GilRole::kHolding;
  if (!holding || seg.starts) end_hold(s);
  raw::CounterSample& w = s.window[static_cast<size_t>(seg.role)];
  if (holding && seg.starts) {
    s.in_hold = true;
    ++w.holds;
  }
  if (holding && s.in_hold) s.hold_delay_ns += part.run_delay_ns;
  if (sched) {
    w.time_ns += to - from;
    w.cpu_ns += part.cpu_ns;
    w.run_delay_ns += part.run_delay_ns;
    w.slices += static_cast<uint32_t>(part.slices);
  }
  if (count > 0) {
    w.count = count;
    for (size_t i = 0; i < count; ++i) w.values[i] += part.values[i];
  }
}

// The deltas since the last read. The kernel's counts only grow; a smaller value (a new perf group) is no
// delta.
ThreadCounters::Deltas ThreadCounters::deltas_since(const Slot& s, const CounterReading& r, bool with_perf) {
  Deltas d;
  d.sched = r.sched.has_value() && s.sched.has_value();
  if (d.sched) {
    d.cpu_ns = std::max<int64_t>(0, r.sched->cpu_ns - s.sched->cpu_ns);
    d.run_delay_ns = std::max<int64_t>(0, r.sched->run_delay_ns - s.sched->run_delay_ns);
    d.slices = r.sched->slices >= s.sched->slices ? r.sched->slices - s.sched->slices : 0;
  }
  if (!with_perf) {
    // Scheduler figures only (the holder and the waiters between changes: a perf read costs a call on the
    // thread's CPU). Its counts come with the next full read, which shares them out with this stretch's CPU.
    d.count = s.perf ? s.perf->count : 0;
  } else if (r.perf && s.perf && r.perf->count == s.perf->count) {
    const uint64_t enabled =
        r.perf->enabled_ns >= s.perf->enabled_ns ? r.perf->enabled_ns - s.perf->enabled_ns : 0;
    const uint64_t running =
        r.perf->running_ns >= s.perf->running_ns ? r.perf->running_ns - s.perf->running_ns : 0;
    // Multiplexed (the PMU shared with others): scaled to the enabled time, as perf stat does. A stretch in
    // which the group never counted while the thread ran says nothing.
    if (running > 0 || enabled == 0) {
      d.count = r.perf->count;
      for (size_t i = 0; i < d.count; ++i) {
        uint64_t v = r.perf->values[i] >= s.perf->values[i] ? r.perf->values[i] - s.perf->values[i] : 0;
        if (running > 0 && running < enabled) v = scale_u(v, enabled, running);
        d.values[i] = v;
      }
    }
  }
  return d;
}

// A stretch without a change: what the thread's rate in its role is.
void ThreadCounters::learn_rate(Slot& s, int64_t cpu_ns, int64_t span) {
  RoleRate& rate = s.rates[static_cast<size_t>(s.segments[0].role)];
  rate.cpu_ns += cpu_ns;
  rate.time_ns += span;
  if (rate.time_ns > kRateWindowNs) {
    rate.cpu_ns /= 2;
    rate.time_ns /= 2;
  }
}

// Each role's expected CPU over its part of the stretch, at the rate the thread ran in that role (the
// stretch's own average for a role without one yet); the CPU read is shared out in proportion. A running
// thread's schedstat lags (up to a tick) and catches up at a switch, so what was read is rescaled rather than
// handed to one side.
void ThreadCounters::share_cpu(const Slot& s, const Edges& edge, int64_t cpu, Parts& parts) {
  const size_t n = s.segment_count;
  const int64_t span = edge[n] - edge[0];
  std::array<double, 4> expect{};
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const RoleRate& rate = s.rates[static_cast<size_t>(s.segments[i].role)];
    const double rho = rate.time_ns >= kRateMinNs
                           ? static_cast<double>(rate.cpu_ns) / static_cast<double>(rate.time_ns)
                           : static_cast<double>(cpu) / static_cast<double>(span);
    expect[i] = rho * static_cast<double>(edge[i + 1] - edge[i]);
    sum += expect[i];
  }
  int64_t given = 0;
  for (size_t i = 1; i < n; ++i) {
    // Nothing expected anywhere (every role known to sleep, yet CPU was read): by time.
    const double share =
        sum > 0 ? expect[i] / sum : static_cast<double>(edge[i + 1] - edge[i]) / static_cast<double>(span);
    parts[i].cpu_ns = std::min(cpu - given, static_cast<int64_t>(share * static_cast<double>(cpu)));
    given += parts[i].cpu_ns;
  }
  parts[0].cpu_ns = cpu - given;
}

// Counters count while the thread runs: split as its CPU time is (by time when it had none), the stretches
// read without them since the last full read (all in the first role) included.
void ThreadCounters::share_counts(Slot& s, const Edges& edge, const Deltas& d, bool with_perf, Parts& parts) {
  const size_t n = s.segment_count;
  const int64_t span = edge[n] - edge[0];
  if (!with_perf) {
    s.perf_pending_cpu_ns += d.cpu_ns;
    s.perf_pending_ns += span;
    return;
  }
  const auto cpu_base = static_cast<uint64_t>(s.perf_pending_cpu_ns + d.cpu_ns);
  const auto time_base = static_cast<uint64_t>(s.perf_pending_ns + span);
  for (size_t v = 0; v < d.count; ++v) {
    uint64_t given = 0;
    for (size_t i = 1; i < n; ++i) {
      parts[i].values[v] =
          cpu_base > 0 ? scale_u(d.values[v], static_cast<uint64_t>(parts[i].cpu_ns), cpu_base)
                       : scale_u(d.values[v], static_cast<uint64_t>(edge[i + 1] - edge[i]), time_base);
      given += parts[i].values[v];
    }
    parts[0].values[v] = d.values[v] - std::min(d.values[v], given);
  }
  s.perf_pending_cpu_ns = 0;
  s.perf_pending_ns = 0;
}

void ThreadCounters::read_now(size_t slot, int64_t t, bool with_perf) {
  Slot& s = slots_[slot];
  const size_t n = s.segment_count;
  with_perf = with_perf || n > 1;  // a stretch with a change is split: its counters are needed now
  const CounterReading r = source_.read(slot, with_perf);
  ++reads_;
  const int64_t from = s.last_read_ns;
  if (t <= from) {
    // No time passed: keep the baseline, keep only the role the thread is in now.
    s.segments[0] = s.segments[n - 1];
    s.segment_count = 1;
    return;
  }
  const Deltas d = deltas_since(s, r, with_perf);
  if (r.sched) s.sched = r.sched;
  if (with_perf) s.perf = r.perf;
  s.last_read_ns = t;

  // Where each segment lies in [from, t].
  Edges edge{};
  edge[0] = from;
  for (size_t i = 1; i < n; ++i) edge[i] = std::clamp(s.segments[i].since, edge[i - 1], t);
  edge[n] = t;
  Parts parts{};
  if (n == 1) {
    parts[0].cpu_ns = d.cpu_ns;
    if (d.sched) learn_rate(s, d.cpu_ns, t - from);
  } else {
    share_cpu(s, edge, d.cpu_ns, parts);
  }
  parts[0].run_delay_ns = d.run_delay_ns;
  parts[0].slices = d.slices;
  share_counts(s, edge, d, with_perf, parts);
  for (size_t i = 0; i < n; ++i) {
    // A zero-length segment still starts (or ends) a hold.
    if (edge[i + 1] > edge[i] || s.segments[i].starts) {
      add_piece(s, s.segments[i], edge[i], edge[i + 1], parts[i], d.sched, d.count);
    }
  }
  if (t - s.window_start_ns >= options_.window_ns) emit_window(s, t);
  // The role the thread is in now goes on; its start is counted already.
  s.segments[0] = s.segments[n - 1];
  s.segments[0].starts = false;
  s.segment_count = 1;
}

// ---- /proc and perf
// --------------------------------------------------------------------------------------------

ProcCounterSource::ProcCounterSource(pid_t pid, size_t slots, PerfSlots* perf, PerfOpener* opener)
    : pid_(pid), sched_(slots), tids_(slots, 0), generations_(slots, 0), perf_(perf), opener_(opener) {}

void ProcCounterSource::thread_added(size_t slot, int32_t tid) {
  sched_[slot].reset(pid_, tid);
  tids_[slot] = tid;
  if (perf_ != nullptr && opener_ != nullptr) {
    if (++generations_[slot] == 0) ++generations_[slot];  // 0 means "none"
    perf_->set_wanted(static_cast<uint16_t>(slot), generations_[slot]);
    opener_->request_open(*perf_, static_cast<uint16_t>(slot), generations_[slot], tid);
  }
}

void ProcCounterSource::thread_removed(size_t slot) {
  sched_[slot].reset(0, 0);
  tids_[slot] = 0;
  if (perf_ != nullptr && opener_ != nullptr) {
    perf_->set_wanted(static_cast<uint16_t>(slot), 0);
    opener_->request_close(*perf_, static_cast<uint16_t>(slot), generations_[slot]);
  }
}

CounterReading ProcCounterSource::read(size_t slot, bool perf) {
  CounterReading r;
  r.sched = sched_[slot].read();
  if (perf && perf_ != nullptr && perf_->ready(static_cast<uint16_t>(slot), generations_[slot])) {
    PerfReading p;
    if (perf_->read(static_cast<uint16_t>(slot), p)) r.perf = p;
  }
  return r;
}

std::optional<SwitchCounts> ProcCounterSource::read_switches(size_t slot) {
  if (tids_[slot] == 0) return std::nullopt;
  return read_task_switches(pid_, tids_[slot]);
}

}  // namespace gilspy::sampler
