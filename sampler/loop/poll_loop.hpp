#pragma once
// The poll loop: polls every target on absolute deadlines (CLOCK_MONOTONIC, TIMER_ABSTIME, timer slack
// lowered so the kernel does not batch our wake-ups), counts late and missed polls instead of hiding them,
// and at each stats tick (1 s by default) has every target emit its counters and its threads' current state,
// so even a killed recording keeps its counters and a live view can show holds that have not ended. Targets
// can be added while it runs (whole-job recording finds processes as they start) through a small command
// queue that the loop looks at, without locking, at the top of each tick.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <span>
#include <vector>

#include "base/clock.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/queue/record_queue.hpp"
#include "sampler/schedule/cpu_budget.hpp"
#include "sampler/schedule/lateness_histogram.hpp"
#include "sampler/schedule/poll_schedule.hpp"
#include "sampler/schedule/poller_placement.hpp"
#include "sampler/stacks/stack_options.hpp"

namespace gilspy::sampler {

struct PollLoopOptions {
  double rate_hz = 10000;  // adaptive: the rate while something may change; fixed: the rate
  // Poll densely only around changes (poll_schedule.hpp); false: a fixed rate (-r, and always with --busy:
  // target_options.cpp decides it).
  bool adaptive = true;
  int64_t sparse_max_ns = 2'000'000;  // adaptive: the longest step while the GIL's state is steady
  double cpu_budget = 0.05;  // adaptive: gilspy's CPU, stack reads included, a share of one core; 0: none
  bool placement = true;     // keep the poll thread off the CPUs of the GIL holders (poller_placement.hpp)
  double duration_s = 0;     // 0: until stopped or every target is gone
  bool busy = false;         // spin instead of sleeping: highest rates, one core
  // How the poll thread asks to be scheduled. On a machine whose cores the target keeps busy, a poller at the
  // default priority waits behind the target's threads at every wake-up: polls come late, most often right
  // after a hand-off (the woken thread preempts us), which skews every interval boundary. SCHED_FIFO at the
  // lowest real-time priority lets it preempt them for its few microseconds. --busy spins at nice -10
  // instead (a spinning real-time thread is throttled 50 ms a second). Both need CAP_SYS_NICE; without it
  // the loop runs as it is, and says which it got.
  bool realtime = true;
  int nice = -10;
  double stats_period_s = 1.0;  // stats tick (a live view sets its refresh interval)
  size_t max_targets = 256;     // the loop's target table is reserved up front: the loop never allocates
  bool stop_when_targets_gone =
      true;             // false: keep polling (and taking new targets) when every target is gone
  bool read_gc = true;  // each poll also reads the GC state (SamplerOptions::read_gc); hidden --no-gc: not
  // --exact: holds and waits from uprobes (exact/exact_tracer.hpp), set up by the session; with exact_shadow
  // (gilspy check) the polls' holds and waits are written and the probes' only added up beside them.
  bool exact = false;
  bool exact_shadow = false;
  StackOptions stacks{};  // Python stacks and thread names, read between polls (stack_options.hpp)

  // The settings derived from the ones above, each decided here only.
  // The CPU budget in force, a share of one core: cpu_budget while polling adaptively, else 0 (a fixed rate
  // keeps its rate whatever it costs).
  double cpu_budget_in_force() const { return adaptive ? cpu_budget : 0.0; }
  // Stack reads' share of a core: none without stacks; inside a budget, at most half of it (the polls get
  // the rest).
  double stack_cpu_share() const;
};

enum class PollerScheduling { kNormal, kNice, kRealtime };
const char* to_string(PollerScheduling s);

enum class StopReason { kDuration, kStopped, kTargetsGone };

struct LoopCounters {
  std::atomic<uint64_t> polls{0};   // ticks (each polls every live target)
  std::atomic<uint64_t> late{0};    // ticks that started more than a fifth of their step after their deadline
  std::atomic<uint64_t> missed{0};  // deadlines skipped because a tick ran over a whole period
  std::atomic<int64_t> start_ns{0};
  std::atomic<int64_t> last_ns{0};
  std::atomic<int64_t> max_lateness_ns{0};
  LatenessHistogram lateness;  // every tick's lateness (0 when on time): its p99 for the summary
  std::atomic<PollerScheduling> scheduling{PollerScheduling::kNormal};  // what the poll thread got
  std::atomic<uint64_t> dense_polls{0};      // ticks on the dense period (all of them at a fixed rate)
  std::atomic<uint64_t> placement_moves{0};  // times the poll thread changed CPUs to avoid a holder
  std::atomic<uint64_t> budget_limited{0};   // ticks taken while the CPU budget held the peak rate down
  std::atomic<uint64_t> low_coverage{0};     // ticks taken under half the budget, floor up to 16 ms (below)
  // gilspy's CPU (all its threads) from the first tick to the end of run(): what --cpu-budget limits.
  std::atomic<int64_t> cpu_ns{0};
};

class PollLoop {
 public:
  PollLoop(PollLoopOptions options, RecordQueue& queue);

  // From any thread, before or while run() runs: the target is polled from the next tick on (its records
  // carry sampler.target()). The caller keeps the sampler alive until run() has returned. Throws
  // Error(kUsage) past options.max_targets targets.
  void add(ProcessSampler& sampler);

  // Runs on the calling thread until the duration passes, `stop` is set, or every target is gone (see
  // stop_when_targets_gone). Throws what a sampler throws (permission lost).
  StopReason run(const std::atomic<bool>& stop);
  // add() each of `samplers`, then run().
  StopReason run(std::span<ProcessSampler* const> samplers, const std::atomic<bool>& stop);
  const LoopCounters& counters() const { return counters_; }

 private:
  struct Command {
    enum class Kind { kAddTarget } kind = Kind::kAddTarget;
    ProcessSampler* sampler = nullptr;
  };
  struct Target {
    ProcessSampler* sampler = nullptr;
    bool live = true;
    // The loop's late and missed counts when the target joined: its stats count those since then only.
    uint64_t late_before = 0, missed_before = 0;
  };
  // What decides when the next poll comes (the poll thread's, for one run()).
  struct Pacing {
    PollSchedule schedule;
    PollerPlacement placement;
    CpuBudget budget;
    std::vector<int> holder_cpus;  // one per target slot
    int64_t next_placement_check = 0;
    double stack_share = 0;       // of a core: stack reads' part (inside the CPU budget when there is one)
    int64_t stack_tokens_ns = 0;  // time stack reads may still take (a bucket, refilled as time passes)
    int64_t stack_refilled_ns = 0;
    // Hand-offs seen and counted, all targets, at the start of the coverage window (coverage_step()).
    int64_t coverage_since = -1;
    uint64_t seen_then = 0, total_then = 0;
    int64_t normal_max_floor = 0;
    bool low_coverage = false;
  };
  // Where the loop stands in time (the poll thread's, for one run()): each poll's window, its deadline, the
  // stats tick.
  struct Timeline {
    int64_t period = 0;  // the dense period, 1 / rate_hz
    int64_t end = 0;     // the duration's end (INT64_MAX: none)
    int64_t window = 0;  // the current window begins here...
    int64_t step = 0;    // ...and lasts this long (the schedule's step)
    int64_t deadline = 0;
    int64_t stats_period = 0, next_stats = 0;
    std::mt19937_64 jitter;  // where in its window each poll comes
  };
  void take_poller_scheduling();  // timer slack, SCHED_FIFO or nice (PollLoopOptions::realtime)
  Pacing start_pacing(int64_t period) const;
  Timeline start_timeline(int64_t start, int64_t period) const;
  // The ticks, until stopped, the duration's end, or every target gone.
  StopReason poll_until_stopped(const std::atomic<bool>& stop, Timeline& time, Pacing& pacing);
  void count_lateness(int64_t now, const Timeline& time);
  void poll_targets(int64_t now, int64_t window);  // every live target; one that ended is dropped
  // The next window (skipping those a slow tick ran over) and the poll's random deadline in it.
  void plan_next_poll(int64_t now, Timeline& time, Pacing& pacing);
  // Every 250 ms: while the polls see few of the hand-offs that happen (a server's request threads take
  // and drop the GIL within microseconds: 6 % of them seen at 500 Hz), gilspy keeps to half its CPU budget
  // and the budget may space the polls out to kLowCoverageMaxFloorNs; more polls would cost the target CPU
  // and still see few. Back to the usual budget and floor when they see more again, or when a window has
  // too few hand-offs to say.
  void coverage_step(int64_t now, Pacing& p);
  void take_commands();  // poll thread: moves queued commands into effect
  void emit_stats(int64_t now);
  void emit_target_stats(const Target& t, int64_t now);
  // After a tick at `now`: moves the poll thread off the holders' CPUs if due, and returns the next step.
  int64_t next_step(int64_t now, Pacing& p);
  // Between a tick and the next deadline: the targets' stack and name reads, within their own budget
  // (options.stacks.cpu_share of a core, at most half the CPU budget) and never past the deadline; p.budget
  // counts their CPU against its total, the polls getting what they leave.
  void stack_work(int64_t deadline, Pacing& p);

  PollLoopOptions options_;
  RecordQueue& queue_;
  LoopCounters counters_;
  std::vector<Target> targets_;  // poll thread only; capacity max_targets
  size_t live_count_ = 0;

  std::mutex commands_mutex_;
  std::vector<Command> commands_;  // capacity max_targets: add() never reallocates
  size_t targets_added_ = 0;       // under commands_mutex_
  std::atomic<bool> commands_pending_{false};
};

}  // namespace gilspy::sampler
