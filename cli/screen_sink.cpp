#include "cli/screen_sink.hpp"

#include <utility>

namespace gilspy::cli {

top::Role ScreenSink::role_of(raw::GilRole r) {
  switch (r) {
    case raw::GilRole::kHolding:
      return top::Role::kHolding;
    case raw::GilRole::kWaiting:
      return top::Role::kWaiting;
    case raw::GilRole::kReleased:
      return top::Role::kReleased;
  }
  return top::Role::kReleased;
}

ScreenSink::ScreenSink(OnSnapshot on_snapshot) : on_snapshot_(std::move(on_snapshot)) {}

void ScreenSink::start(const SessionTarget& t) {
  if (!anchored_) {
    anchor_ns_ = t.monotonic_ns;
    anchored_ = true;
  }
  // Its sampler's counters are zero when its recording begins: at (about) time 0 for the targets of the
  // start, later for one found while recording.
  model_.add_process(
      {.id = t.id,
       .pid = t.pid,
       .command = t.command,
       .python_version = t.interp->binary.version.text(),
       .rank = t.rank,
       .start_ns = t.attached_ns,
       .exact = t.sampler != nullptr && t.sampler->exact() != nullptr && !t.sampler->exact_shadow()});
  live_[t.id];
  start_functions(t.id);
}

int64_t ScreenSink::now_ns() const {
  return anchored_ ? gilspy::monotonic_ns() - anchor_ns_ : 0;
}

void ScreenSink::take_snapshot(bool last) {
  const int64_t at = *tick_ns_;
  tick_ns_.reset();
  open_function_pieces(at);
  top::TopSnapshot s = model_.snapshot(at);
  if (last && shown_) s = top::keep_last_interval(*shown_, std::move(s));
  shown_ = s;
  on_snapshot_(std::move(s), last);
}

void ScreenSink::flush_tick() {
  if (tick_ns_) take_snapshot(false);
}

void ScreenSink::record(const SessionTarget& t, const raw::Record& r) {
  const uint32_t id = t.id;
  // A tick's records (each target's Stats, its threads' states and its stack statistics, target after target)
  // come together; any other record, or another tick, means the tick is complete.
  const bool part_of_tick =
      tick_ns_ && std::visit(raw::overloaded{[&](const raw::Stats& s) { return s.ts == *tick_ns_; },
                                             [&](const raw::ThreadState& s) { return s.ts == *tick_ns_; },
                                             [&](const raw::StackStats& s) { return s.ts == *tick_ns_; },
                                             [](const auto&) { return false; }},
                             r);
  if (tick_ns_ && !part_of_tick) flush_tick();
  if (const auto f = function_stacks_.find(id); f != function_stacks_.end()) f->second.pieces->add(r);
  Liveness& life = live_[id];
  std::visit(
      raw::overloaded{
          [&](const raw::ThreadStart& x) {
            model_.thread_started(id, x.tid, x.name, x.ts);
            life.threads.insert(x.tid);
          },
          [&](const raw::ThreadEnd& x) {
            model_.thread_ended(id, x.tid, x.ts, x.state_se_ns);
            if (life.threads.erase(x.tid) > 0) life.last_end_ns = x.ts;
          },
          [&](const raw::Hold& x) { model_.hold(id, x.tid, x.ts, x.dur); },
          [&](const raw::Wait& x) { model_.wait(id, x.tid, x.ts, x.dur); },
          [&](const raw::Waiters& x) { model_.waiters(id, x.ts, static_cast<int>(x.n)); },
          [&](const raw::ThreadState& x) {
            model_.open_state(id, x.tid, role_of(x.role), x.since, x.ts, x.state_var_ns2);
          },
          // Known only once the stop has ended: too late for a live view (left to the raw file and trace).
          [](const raw::ProcessStopped&) {},
          [&](const raw::GcCollection& x) { model_.gc_collection(id, x.generation, x.ts, x.dur, x.wait_ns); },
          [&](const raw::GcUntimed& x) { model_.gc_untimed(id, x.generation, x.n, x.ts + x.window); },
          [](const raw::GcCounts&) {},
          [&](const raw::GcSettings& x) { model_.gc_settings(id, x.enabled, x.ts); },
          [&](const raw::ThreadName& x) { model_.thread_named(id, x.tid, x.label()); },
          [&](const raw::FrameDef& x) { stacks_.frame(id, x); },
          [&](const raw::StackDef& x) { stacks_.stack(id, x); },
          [&](const raw::StackSample& x) {
            model_.thread_function(id, x.tid, stacks_.innermost_text(id, x.stack));
          },
          [](const raw::StackStats&) {},
          [&](const raw::CounterSetup& x) { counter_setup(id, x); },
          [&](const raw::CounterSample& x) { counter_sample(id, x); },
          [](const raw::ThreadSwitches&) {},  // totals over a recording: for its summary, not a live window
          [&](const raw::Stats& x) {
            model_.stats(id, x.ts,
                         {.polls = x.polls,
                          .late = x.late,
                          .missed = x.missed,
                          .handoffs_seen = x.handoffs_seen,
                          .handoffs_total = x.handoffs_total});
            if (!tick_ns_) {
              tick_ns_ = x.ts;
              tick_in_this_drain_ = true;
            }
          },
      },
      r);
}

void ScreenSink::stats(const LiveStats& live) {
  // A target none of whose threads lives any more has exited (or its interpreter is gone): say so once.
  for (auto& [id, life] : live_) {
    if (!life.ended && life.threads.empty() && life.last_end_ns >= 0) {
      life.ended = true;
      model_.process_ended(id, life.last_end_ns);
    }
  }
  // The last tick of a run comes when polling stops: finish() decides what to do with it.
  if (live.polling_ended) return;
  // A tick delivered in an earlier drain is complete (the poll thread emits a tick's records in one go); one
  // from this drain may still be coming in, unless a later record already closed it.
  if (tick_ns_ && !tick_in_this_drain_) flush_tick();
  tick_in_this_drain_ = false;
}

void ScreenSink::finish(const SessionEnd& end) {
  if (end.stop_reason != "target exited") return;
  for (auto& [id, life] : live_) {
    if (!life.ended) model_.process_ended(id, life.last_end_ns >= 0 ? life.last_end_ns : end.end_ns);
  }
  tick_ns_ = end.end_ns;
  take_snapshot(true);
}

void ScreenSink::reset() {
  flush_tick();
  model_.reset(now_ns());
}

}  // namespace gilspy::cli
