// The target's CPU totals that gilspy check measures its cost with (sampler/process_cpu.hpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <string>

#include "sampler/proc/process_cpu.hpp"

namespace unit_process_cpu {

using gilspy::sampler::CpuTotals;
using gilspy::sampler::SchedStat;
using gilspy::sampler::TaskCpu;

constexpr int64_t kMs = 1'000'000;

TaskCpu task(int32_t tid, int64_t cpu_ms, uint64_t user_ticks, uint64_t system_ticks) {
  return {tid, SchedStat{.cpu_ns = cpu_ms * kMs}, {user_ticks, system_ticks}};
}

TEST_CASE("process CPU totals: threads that end or start between reads neither lose nor bring time") {
  CpuTotals t;
  t.add(0, {task(1, 500, 45, 5), task(2, 7, 1, 0)});
  // 100 ms later: thread 1 ran 50 ms more (4 ticks user, 1 kernel); thread 2 ended; thread 3 started: 20 ms.
  t.add(100 * kMs, {task(1, 550, 49, 6), task(3, 20, 2, 0)});
  // 100 ms later: 1 ran 100 ms more, 3 ran 60 ms more (all user mode).
  t.add(200 * kMs, {task(1, 650, 59, 6), task(3, 80, 8, 0)});
  t.add(150 * kMs, {});  // out of order: ignored
  REQUIRE(t.points().size() == 3);
  CHECK(t.points()[1].cpu_ns == 70 * kMs);  // the first read's past is not counted
  CHECK(t.points()[1].user_ticks == 6);
  CHECK(t.points()[1].system_ticks == 1);
  CHECK(t.points()[2].cpu_ns == 230 * kMs);
  CHECK(t.most_threads() == 2);
  const auto whole = t.rates(0, 200 * kMs, 0.01);
  REQUIRE(whole);
  CHECK(whole->cpus == doctest::Approx(1.15));
  CHECK(whole->user_cpus == doctest::Approx(0.22 / 0.2));
  CHECK(whole->system_cpus == doctest::Approx(0.01 / 0.2));
  const auto second_half = t.rates(100 * kMs, 200 * kMs, 0.01);
  REQUIRE(second_half);
  CHECK(second_half->cpus == doctest::Approx(1.6));
  const auto inside = t.rates(50 * kMs, 150 * kMs, 0.01);  // interpolated: half of each step
  REQUIRE(inside);
  CHECK(inside->cpus == doctest::Approx((35 + 80) / 100.0));
  CHECK_FALSE(t.rates(0, 300 * kMs, 0.01));  // past the last read
  CHECK_FALSE(t.rates(100 * kMs, 100 * kMs, 0.01));
}

TEST_CASE("stat line: user and kernel ticks, whatever the command name holds") {
  const std::string rest = " S 1 2 3 4 5 6 7 8 9 10 1234 56 0 0 20 0 1 0 100 200 300\n";
  const auto t = gilspy::sampler::parse_stat_times("77 (a) b) (c)" + rest);
  REQUIRE(t);
  CHECK(t->user_ticks == 1234);
  CHECK(t->system_ticks == 56);
  CHECK_FALSE(gilspy::sampler::parse_stat_times("77 (python3) S 1 2"));
  CHECK_FALSE(gilspy::sampler::parse_stat_times("no parenthesis"));
}

TEST_CASE("process CPU totals: this process's own threads, read from /proc") {
  const auto tasks = gilspy::sampler::read_process_cpu(::getpid());
  REQUIRE(tasks);
  REQUIRE_FALSE(tasks->empty());
  bool me = false;
  for (const TaskCpu& task : *tasks) me |= task.tid == ::getpid() && task.stat.cpu_ns > 0;
  CHECK(me);
  CHECK_FALSE(gilspy::sampler::read_process_cpu(0x3fffffff));  // no such process
}

}  // namespace unit_process_cpu
