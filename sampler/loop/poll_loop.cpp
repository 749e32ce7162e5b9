#include "sampler/loop/poll_loop.hpp"

#include "sampler/schedule/cpu_budget.hpp"
#include "sampler/schedule/poller_placement.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <vector>

#include "base/error.hpp"

namespace gilspy::sampler {

const char* to_string(PollerScheduling s) {
  switch (s) {
    case PollerScheduling::kRealtime:
      return "SCHED_FIFO";
    case PollerScheduling::kNice:
      return "nice -10";
    case PollerScheduling::kNormal:
      return "normal";
  }
  return "normal";
}

namespace {

void sleep_until(int64_t deadline_ns) {
  timespec ts{static_cast<time_t>(deadline_ns / 1'000'000'000),
              static_cast<long>(deadline_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

PollLoop::PollLoop(PollLoopOptions options, RecordQueue& queue) : options_(options), queue_(queue) {
  targets_.reserve(options_.max_targets);
  commands_.reserve(options_.max_targets);
}

void PollLoop::add(ProcessSampler& sampler) {
  std::lock_guard lock(commands_mutex_);
  if (targets_added_ >= options_.max_targets) {
    throw Error(ErrorKind::kUsage,
                "too many targets for one recording (at most " + std::to_string(options_.max_targets) + ")");
  }
  ++targets_added_;
  commands_.push_back({Command::Kind::kAddTarget, &sampler});  // capacity reserved: no allocation
  commands_pending_.store(true, std::memory_order_release);
}

void PollLoop::take_commands() {
  std::lock_guard lock(commands_mutex_);
  for (const Command& c : commands_) {
    switch (c.kind) {
      case Command::Kind::kAddTarget:
        // at most max_targets, reserved: no allocation
        targets_.push_back({.sampler = c.sampler,
                            .live = true,
                            .late_before = counters_.late.load(std::memory_order_relaxed),
                            .missed_before = counters_.missed.load(std::memory_order_relaxed)});
        ++live_count_;
        break;
    }
  }
  commands_.clear();  // keeps its capacity
  commands_pending_.store(false, std::memory_order_relaxed);
}

// Each live target's counters; one that ended had its last ones at its end (a child's recording ends there,
// not at the session's).
void PollLoop::emit_stats(int64_t now) {
  for (const Target& t : targets_) {
    if (t.live) emit_target_stats(t, now);
  }
}

void PollLoop::emit_target_stats(const Target& t, int64_t now) {
  const uint64_t late = counters_.late.load(std::memory_order_relaxed);
  const uint64_t missed = counters_.missed.load(std::memory_order_relaxed);
  t.sampler->emit_stats(now, late - t.late_before, missed - t.missed_before);
}

int64_t PollLoop::next_step(int64_t now, Pacing& p) {
  constexpr int64_t kPlacementRecheckNs = 10'000'000;  // holders also move between CPUs without a hand-off
  p.schedule.begin_tick();
  bool handoff = false;  // a holder may have changed CPU only at a hand-off (or at the recheck below)
  for (const Target& t : targets_) {
    if (!t.live) continue;
    const PollActivity& a = t.sampler->activity();
    p.schedule.add(a, now);
    handoff = handoff || a.last_handoff_ns == now;
  }
  if ((handoff || now >= p.next_placement_check) && p.placement.due(now)) {
    for (size_t i = 0; i < targets_.size(); ++i) {
      p.holder_cpus[i] = targets_[i].live ? targets_[i].sampler->holder_cpu(now) : -1;
    }
    p.placement.update(std::span(p.holder_cpus).first(targets_.size()), now);
    counters_.placement_moves.store(p.placement.moves(), std::memory_order_relaxed);
    p.next_placement_check = now + kPlacementRecheckNs;
  }
  coverage_step(now, p);
  const int64_t floor = p.budget.update(now);
  p.schedule.set_floor(floor, p.budget.saturated());
  return p.schedule.next_step(now);
}

void PollLoop::coverage_step(int64_t now, Pacing& p) {
  constexpr int64_t kWindowNs =
      250'000'000;                        // a decision soon after attaching, on ~1000 hand-offs of a server
  constexpr uint64_t kMinHandoffs = 200;  // a window with fewer says nothing (and polls cost little then)
  constexpr double kLow = 0.08, kRecovered = 0.16;  // apart, so that a workload does not flip every second
  // Meanwhile half the budget, and polls up to 16 ms apart to keep to it: a server's polls are the dearest
  // (the threads that came and went since the last one are walked, their counters read and closed),
  // and on a machine its clients keep busy every % of a core gilspy takes is a % of the requests.
  constexpr int64_t kLowCoverageMaxFloorNs = 16'000'000;
  constexpr double kLowCoverageBudgetScale = 0.5;
  // Only the budget's floor moves: with no budget (a fixed rate, --cpu-budget 0) there is nothing to
  // decide, and nothing to count in the summary.
  if (options_.cpu_budget_in_force() <= 0) return;
  if (p.coverage_since >= 0 && now - p.coverage_since < kWindowNs) return;
  uint64_t seen = 0, total = 0;
  for (const Target& t : targets_) {
    seen += t.sampler->counters().handoffs_seen.load(std::memory_order_relaxed);
    total += t.sampler->counters().handoffs_total.load(std::memory_order_relaxed);
  }
  if (p.coverage_since >= 0 && total - p.total_then >= kMinHandoffs) {
    const double coverage =
        static_cast<double>(seen - p.seen_then) / static_cast<double>(total - p.total_then);
    if (coverage < kLow) p.low_coverage = true;
    if (coverage > kRecovered) p.low_coverage = false;
  } else if (p.coverage_since >= 0) {
    // Few hand-offs (a server gone quiet, then CPU-bound work: 5 ms switches): not a flood of unseen
    // ones, and polls that find them cost little; back to the usual schedule.
    p.low_coverage = false;
  }
  if (p.coverage_since < 0) p.normal_max_floor = p.budget.max_floor();
  p.budget.set_max_floor(p.low_coverage ? std::max(p.normal_max_floor, kLowCoverageMaxFloorNs)
                                        : p.normal_max_floor);
  p.budget.set_scale(p.low_coverage ? kLowCoverageBudgetScale : 1.0);
  p.coverage_since = now;
  p.seen_then = seen;
  p.total_then = total;
}

void PollLoop::stack_work(int64_t deadline, Pacing& p) {
  constexpr int64_t kMarginNs = 30'000;     // left before the next poll: a read in flight ends in time
  constexpr int64_t kBurstNs = 20'000'000;  // the bucket holds at most this much
  const int64_t now = monotonic_ns();
  if (p.stack_refilled_ns == 0) p.stack_refilled_ns = now;
  p.stack_tokens_ns = std::min<int64_t>(
      kBurstNs, p.stack_tokens_ns + static_cast<int64_t>(static_cast<double>(now - p.stack_refilled_ns) *
                                                         p.stack_share * p.budget.scale()));
  p.stack_refilled_ns = now;
  if (p.stack_tokens_ns <= 0) return;
  const int64_t until =
      std::min({deadline - kMarginNs, now + options_.stacks.max_per_tick_ns, now + p.stack_tokens_ns});
  if (until <= now) return;
  // 1 ms of the bucket (some 20 stack reads) is kept for holders and waiters: --all-threads' other threads
  // use only what is beyond it, so that a thousand idle threads read again and again never leave a hold
  // without its stack.
  constexpr int64_t kKeptForRolesNs = 1'000'000;
  const bool spare = p.stack_tokens_ns > kKeptForRolesNs;
  for (const Target& t : targets_) {
    if (!t.live || !t.sampler->wants_stack_work(now, spare)) continue;
    const int64_t start = monotonic_ns();
    if (start >= until) break;
    t.sampler->stack_work(until, spare);
    const int64_t used = monotonic_ns() - start;
    p.stack_tokens_ns -= used;
    p.budget.exclude(used);
  }
}

StopReason PollLoop::run(std::span<ProcessSampler* const> samplers, const std::atomic<bool>& stop) {
  for (ProcessSampler* s : samplers) add(*s);
  return run(stop);
}

double PollLoopOptions::stack_cpu_share() const {
  if (!stacks.enabled) return 0.0;
  const double budget = cpu_budget_in_force();
  return budget > 0 ? std::min(stacks.cpu_share, budget / 2) : stacks.cpu_share;
}

StopReason PollLoop::run(const std::atomic<bool>& stop) {
  take_poller_scheduling();
  const int64_t period = std::max<int64_t>(1, static_cast<int64_t>(1e9 / options_.rate_hz));
  Pacing pacing = start_pacing(period);
  const int64_t start = monotonic_ns();
  Timeline time = start_timeline(start, period);
  counters_.start_ns = start;
  const int64_t cpu_start = process_cpu_ns();
  const StopReason reason = poll_until_stopped(stop, time, pacing);
  const int64_t t_end = std::min(monotonic_ns(), time.end);
  take_commands();  // a target added after the last tick still gets its end and its counters
  for (const Target& t : targets_) t.sampler->finish(t_end);
  emit_stats(t_end);
  counters_.last_ns = t_end;
  counters_.cpu_ns = process_cpu_ns() - cpu_start;
  return reason;
}

void PollLoop::take_poller_scheduling() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // 1 ns: the default 50 µs slack would blur a 100 µs period
  sched_param param{};
  param.sched_priority = sched_get_priority_min(SCHED_FIFO);
  // Not in busy mode: a real-time thread that never sleeps is throttled by the kernel for 50 ms of every
  // second (sched_rt_runtime_us), a hole in the recording; a spinning thread at a high nice is not.
  if (options_.realtime && !options_.busy && pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0) {
    counters_.scheduling = PollerScheduling::kRealtime;
  } else if (options_.nice != 0 &&
             ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), options_.nice) == 0) {
    counters_.scheduling = PollerScheduling::kNice;
  }
}

PollLoop::Pacing PollLoop::start_pacing(int64_t period) const {
  // The budget is gilspy's whole CPU: stack reads get their share of it, the polls the rest.
  const double stack_share = options_.stack_cpu_share();
  return {
      .schedule = PollSchedule(
          {.dense_ns = period, .adaptive = options_.adaptive, .sparse_max_ns = options_.sparse_max_ns}),
      .placement = PollerPlacement(options_.placement),
      .budget = CpuBudget(options_.cpu_budget_in_force(), period, 2'000'000, stack_share),
      .holder_cpus = std::vector<int>(options_.max_targets, -1),  // before the loop: the loop never allocates
      .stack_share = stack_share,
  };
}

// Each poll stands for a window of the schedule's step, at a random point inside it (stratified sampling):
// the windows tile time whatever length the schedule picks next, the sample's place in its window is
// independent of what the target does, so a thread's time in each state is estimated without bias at any
// rate, and a periodic thread cannot alias with the polls. What changed since the last poll is dated at the
// window's start.
PollLoop::Timeline PollLoop::start_timeline(int64_t start, int64_t period) const {
  const int64_t stats_period = std::max<int64_t>(1, static_cast<int64_t>(options_.stats_period_s * 1e9));
  return {
      .period = period,
      .end = options_.duration_s > 0 ? start + static_cast<int64_t>(options_.duration_s * 1e9) : INT64_MAX,
      .window = start,
      .step = period,
      .deadline = start,
      .stats_period = stats_period,
      .next_stats = start + stats_period,
      .jitter = std::mt19937_64(static_cast<uint64_t>(start))};  // no allocation, in the loop or here
}

StopReason PollLoop::poll_until_stopped(const std::atomic<bool>& stop, Timeline& time, Pacing& pacing) {
  while (true) {
    if (stop.load(std::memory_order_relaxed)) return StopReason::kStopped;
    if (commands_pending_.load(std::memory_order_acquire)) take_commands();
    if (!options_.busy) sleep_until(time.deadline);
    int64_t now = monotonic_ns();
    while (now < time.deadline) now = monotonic_ns();  // busy mode
    if (now >= time.end) return StopReason::kDuration;
    count_lateness(now, time);
    poll_targets(now, time.window);
    if (live_count_ == 0 && options_.stop_when_targets_gone) return StopReason::kTargetsGone;
    if (now >= time.next_stats) {
      emit_stats(now);
      time.next_stats += time.stats_period;
    }
    if (pacing.budget.floor() > time.period) counters_.budget_limited.fetch_add(1, std::memory_order_relaxed);
    if (pacing.low_coverage) counters_.low_coverage.fetch_add(1, std::memory_order_relaxed);
    plan_next_poll(now, time, pacing);
    if (options_.stacks.enabled) stack_work(time.deadline, pacing);
  }
}

void PollLoop::count_lateness(int64_t now, const Timeline& time) {
  const int64_t lateness = now - time.deadline;
  if (lateness > time.step / 5) counters_.late.fetch_add(1, std::memory_order_relaxed);
  counters_.lateness.add(lateness);
  if (time.step == time.period) counters_.dense_polls.fetch_add(1, std::memory_order_relaxed);
  if (lateness > counters_.max_lateness_ns.load(std::memory_order_relaxed))
    counters_.max_lateness_ns = lateness;
}

void PollLoop::poll_targets(int64_t now, int64_t window) {
  for (Target& t : targets_) {
    if (t.live && !t.sampler->poll(now, window)) {
      t.live = false;
      --live_count_;
      emit_target_stats(t, now);
    }
  }
  counters_.polls.fetch_add(1, std::memory_order_relaxed);
  counters_.last_ns = now;
}

void PollLoop::plan_next_poll(int64_t now, Timeline& time, Pacing& pacing) {
  time.window += time.step;  // the next window begins where this one ends...
  time.step = next_step(now, pacing);
  const int64_t after = monotonic_ns();
  if (after - time.window >= time.step) {
    // We ran over whole windows: skip them, and say so.
    const int64_t skipped = (after - time.window) / time.step;
    counters_.missed.fetch_add(static_cast<uint64_t>(skipped), std::memory_order_relaxed);
    time.window += skipped * time.step;
  }
  // ...and its poll comes at a random point inside it
  time.deadline = time.window +
                  std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(0, time.step - 1))(time.jitter);
}

}  // namespace gilspy::sampler
