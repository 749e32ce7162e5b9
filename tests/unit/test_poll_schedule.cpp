// The adaptive poll schedule on synthetic activity, and the parsing behind the poll thread's placement.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sampler/proc/task_cpu.hpp"
#include "sampler/schedule/cpu_budget.hpp"
#include "sampler/schedule/poll_schedule.hpp"
#include "sampler/target/threads.hpp"

using namespace gilspy::sampler;

// Named per file, so that the unity build can put test files together.
namespace unit_poll_schedule {
namespace {
constexpr int64_t kDense = 100'000;
constexpr int64_t kMs = 1'000'000;

ScheduleOptions options() {
  return {.dense_ns = kDense,
          .adaptive = true,
          .linger_ns = kMs / 2,
          .sparse_max_ns = 2 * kMs,
          .due_lead_ns = kMs / 2,
          .due_grace_ns = kMs};
}

// One tick: the activity of a single target seen at `now`; returns the step chosen.
int64_t tick(PollSchedule& s, const PollActivity& a, int64_t now) {
  s.begin_tick();
  s.add(a, now);
  return s.next_step(now);
}
}  // namespace

TEST_CASE("schedule: a fixed schedule always steps by the period") {
  ScheduleOptions o = options();
  o.adaptive = false;
  PollSchedule s(o);
  for (int64_t now = 0; now < 10 * kMs; now += kDense) CHECK(tick(s, {}, now) == kDense);
}

TEST_CASE("schedule: a steady GIL backs off by doubling up to the ceiling") {
  PollSchedule s(options());
  int64_t now = 0;
  std::vector<int64_t> steps;
  for (int i = 0; i < 8; ++i) {
    steps.push_back(tick(s, {}, now));
    now += steps.back();
  }
  CHECK(steps[0] == 2 * kDense);
  CHECK(steps[1] == 4 * kDense);
  CHECK(steps[2] == 8 * kDense);
  CHECK(steps[3] == 16 * kDense);
  CHECK(steps[4] == 2 * kMs);
  CHECK(steps[7] == 2 * kMs);
}

TEST_CASE("schedule: an unexpected change is polled densely for the linger time, then backs off") {
  PollSchedule s(options());
  int64_t now = 0;
  for (int i = 0; i < 6; ++i) now += tick(s, {}, now);  // sparse by now
  PollActivity a;
  a.last_change_ns = now;
  CHECK(tick(s, a, now) == kDense);
  const int64_t changed_at = now;
  now += kDense;
  while (now < changed_at + kMs / 2) {
    CHECK(tick(s, a, now) == kDense);
    now += kDense;
  }
  CHECK(tick(s, a, now) == 2 * kDense);
}

TEST_CASE("schedule: polls densely around a forced switch that is due, and never sleeps past the window") {
  PollSchedule s(options());
  PollActivity a;
  a.switch_due_ns = 5 * kMs;
  int64_t now = 0;
  int64_t last_sparse_end = 0;
  while (now < a.switch_due_ns - kMs / 2) {
    const int64_t step = tick(s, a, now);
    last_sparse_end = now + step;
    now += step;
  }
  CHECK(last_sparse_end == now);
  CHECK(now == a.switch_due_ns - kMs / 2);  // the last sparse step was cut to land on the window's start
  for (; now < a.switch_due_ns + kMs; now += kDense) CHECK(tick(s, a, now) == kDense);
  // A holder that never drops (a long C call): past the grace period the schedule backs off again.
  CHECK(tick(s, a, now) == 2 * kDense);
}

TEST_CASE("schedule: expected forced switches keep the ceiling; surprises halve it, quiet steps restore it") {
  PollSchedule s(options());
  int64_t now = 0;
  for (int i = 0; i < 6; ++i) now += tick(s, {}, now);
  REQUIRE(s.ceiling() == 2 * kMs);

  // A change found on a sparse poll inside the window of the switch that was expected: not a surprise.
  PollActivity expected;
  expected.last_change_ns = now;
  expected.expected_due_ns = now;
  tick(s, expected, now);
  CHECK(s.surprises() == 0);
  CHECK(s.ceiling() == 2 * kMs);

  for (int i = 0; i < 6; ++i) now += tick(s, {}, now);
  PollActivity surprise;
  surprise.last_change_ns = now;  // a change nobody expected, found after a long step
  tick(s, surprise, now);
  CHECK(s.surprises() == 1);
  CHECK(s.ceiling() == kMs);

  // Quiet steps at the ceiling raise it again, up to the maximum.
  for (int i = 0; i < 40; ++i) now += tick(s, {}, now + kMs);
  CHECK(s.ceiling() == 2 * kMs);
}

TEST_CASE("task cpu: the processor field is read after the command name, whatever the name holds") {
  std::string fields;
  for (int f = 3; f <= 52; ++f) fields += " " + std::to_string(f == 39 ? 7 : f);
  CHECK(parse_stat_processor("1234 (python3)" + fields) == 7);
  CHECK(parse_stat_processor("1234 (a) b (c) 9 9)" + fields) == 7);  // spaces and parentheses in the name
  CHECK(parse_stat_processor("1234 (python3) R 1 2") == -1);         // cut short
  CHECK(parse_stat_processor("garbage") == -1);
}

TEST_CASE("thread walker: every version's thread state fields fit the one region read per node") {
  for (const char* v : {"3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"}) {
    CAPTURE(v);
    const auto layout = gilspy::layouts::layout_for(*gilspy::elf::parse_version_text(v));
    CHECK_NOTHROW(ThreadWalker(1, layout, 0x1000));
  }
}

TEST_CASE("cpu budget: the floor rises while the poll thread is over budget and falls back when well under") {
  CpuBudget b(0.04, kDense);
  CHECK(b.floor() == kDense);
  for (int i = 0; i < 50; ++i) b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs / 10);  // 10 % of a core
  CHECK(b.floor() == 2 * kMs);                                                              // capped
  int64_t before = b.floor();
  b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs * 35 / 1000);  // 3.5 %: within budget, not well under
  CHECK(b.floor() == before);
  for (int i = 0; i < 50; ++i) b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs / 100);  // 1 %
  CHECK(b.floor() == kDense);

  CpuBudget none(0, kDense);
  none.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs);
  CHECK(none.floor() == kDense);
}

TEST_CASE("cpu budget: stack reads' share counts in the total; what they leave goes to the polls") {
  constexpr int64_t w = CpuBudget::kWindowNs;
  // 4 % in all, 2 % of it for stacks. Polls at 3.5 % with no stack reads: within the total.
  CpuBudget idle_stacks(0.04, kDense, 2 * kMs, 0.02);
  idle_stacks.observe(w, w * 35 / 1000, 0);
  CHECK(idle_stacks.floor() == kDense);
  // The same polls while stacks take 1.5 %: 5 % in all, over: the polls' floor rises.
  CpuBudget busy_stacks(0.04, kDense, 2 * kMs, 0.02);
  busy_stacks.observe(w, w * 50 / 1000, w * 15 / 1000);
  CHECK(busy_stacks.floor() > kDense);
  // Stacks past their share (a burst from the bucket): the polls keep share - reserved, 2 %.
  CpuBudget burst(0.04, kDense, 2 * kMs, 0.02);
  burst.observe(w, w * 48 / 1000, w * 30 / 1000);  // polls 1.8 %
  CHECK(burst.floor() == kDense);
  burst.observe(w, w * 52 / 1000, w * 30 / 1000);  // polls 2.2 %
  CHECK(burst.floor() > kDense);
  // A reserve larger than the budget is cut to it; the polls still get a (tiny) part, no division by 0.
  CpuBudget all_reserved(0.02, kDense, 2 * kMs, 0.05);
  all_reserved.observe(w, w * 2 / 100, w * 2 / 100);
  CHECK(all_reserved.floor() == kDense);
  all_reserved.observe(w, w * 3 / 100, w * 2 / 100);
  CHECK(all_reserved.floor() > kDense);
}

TEST_CASE("cpu budget: a scale shrinks the total and the stacks' part alike") {
  constexpr int64_t w = CpuBudget::kWindowNs;
  // 5 % in all, 2 % for stacks; polls at 2 % and stacks at 1 % are within it...
  CpuBudget full(0.05, kDense, 16 * kMs, 0.02);
  full.observe(w, w * 30 / 1000, w * 10 / 1000);
  CHECK(full.floor() == kDense);
  // ...but not within half of it (2.5 %: stacks keep 1 %, the polls 1.5 %).
  CpuBudget half(0.05, kDense, 16 * kMs, 0.02);
  half.set_scale(0.5);
  half.observe(w, w * 30 / 1000, w * 10 / 1000);
  CHECK(half.floor() > kDense);
  // Polls at 1 % under half the budget: well under, the floor falls back.
  for (int i = 0; i < 50; ++i) half.observe(w, w * 20 / 1000, w * 10 / 1000);
  CHECK(half.floor() == kDense);
  // Stacks past their halved share do not take the polls' part below share - reserved (1.5 %).
  CpuBudget burst(0.05, kDense, 16 * kMs, 0.02);
  burst.set_scale(0.5);
  burst.observe(w, w * 44 / 1000, w * 30 / 1000);  // polls 1.4 %
  CHECK(burst.floor() == kDense);
  burst.observe(w, w * 47 / 1000, w * 30 / 1000);  // polls 1.7 %
  CHECK(burst.floor() > kDense);
}

TEST_CASE("schedule: the budget's floor stretches the dense period and every step") {
  PollSchedule s(options());
  s.set_floor(3 * kDense);
  PollActivity a;
  a.last_change_ns = 0;
  CHECK(tick(s, a, 0) == 3 * kDense);  // "dense" is now the floor
  s.set_floor(0);
  CHECK(tick(s, a, 3 * kDense) == kDense);
}

TEST_CASE(
    "cpu budget: saturated while over budget at the highest floor, until well under; then even forced "
    "switches give way") {
  CpuBudget b(0.04, kDense, 2 * kMs);
  for (int i = 0; i < 20 && b.floor() < 2 * kMs; ++i)
    b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs / 10);
  REQUIRE(b.floor() == 2 * kMs);
  CHECK_FALSE(b.saturated());  // reached the top in that window: not yet known to be too little
  b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs / 10);
  CHECK(b.saturated());
  // A window without the peak-rate polls comes in under the budget, but not well under: they stay off, or
  // the next window would be over again.
  b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs * 35 / 1000);
  CHECK(b.saturated());
  b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs * 25 / 1000);  // 2.5 %, under 3/4 of it
  CHECK_FALSE(b.saturated());
  b.observe(CpuBudget::kWindowNs, CpuBudget::kWindowNs * 37 / 1000);  // within it: not saturated again
  CHECK_FALSE(b.saturated());

  PollSchedule s(options());
  PollActivity a;
  a.switch_due_ns = 5 * kMs;
  s.set_floor(kMs, false);
  CHECK(tick(s, a, 5 * kMs) == 2 * kDense);  // a forced switch's window: near the peak rate under a floor
  s.set_floor(kMs, true);
  CHECK(tick(s, a, 5 * kMs + kDense) == kMs);  // saturated: the floor everywhere
}

}  // namespace unit_poll_schedule
