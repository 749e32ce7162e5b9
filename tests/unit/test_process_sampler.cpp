// The sampler's reconstruction, driven through fake memory: a made-up interpreter laid out with the 3.11
// table, GIL states set poll by poll, and scripted kernel task states.
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "cpython_layouts/layout.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/loop/poll_loop.hpp"
#include "support/fake_memory_reader.hpp"
#include "support/fake_target.hpp"

using namespace gilspy;
using namespace gilspy::sampler;

// Named per file, so that the unity build can put test files together.
namespace unit_process_sampler {
using namespace gilspy::sampler::fake;
namespace {

struct Interval {
  int64_t tid;
  int64_t start, end;
};

// The fake interpreter with threads `tids` in slots 0, 1, ..., a queue and a sampler polling it: most tests
// start here (`auto& [t, tasks, q, s] = rig;`).
struct Rig {
  FakeTarget t;
  ScriptedTasks tasks;
  RecordQueue q;
  ProcessSampler s;
  explicit Rig(std::vector<int32_t> tids, SamplerOptions options = {}, size_t queue_slots = 1024)
      : t(std::move(tids)), q(queue_slots), s(t.interp, t.mem, tasks, q, 0, options) {}
};

// How many times each tid was announced (ThreadStart) among `records`.
std::map<int64_t, int> starts_per_tid(const std::vector<raw::Record>& records) {
  std::map<int64_t, int> starts;
  for (const auto& r : records) {
    if (const auto* st = std::get_if<raw::ThreadStart>(&r)) ++starts[st->tid];
  }
  return starts;
}

// The Hold or Wait records among `records`.
template <class Kind>
std::vector<Interval> intervals(const std::vector<raw::Record>& records) {
  std::vector<Interval> out;
  for (const auto& r : records) {
    if (const auto* x = std::get_if<Kind>(&r)) out.push_back({x->tid, x->ts, x->ts + x->dur});
  }
  return out;
}

}  // namespace

TEST_CASE("sampler: holds switch between threads at the midpoint between polls") {
  Rig rig{{100, 101}};
  auto& [t, tasks, q, s] = rig;

  t.gil(1, FakeTarget::tstate(0), 1, 1);
  tasks.state[101] = TaskState::kGilCond;
  CHECK(s.poll(1000));
  CHECK(s.poll(2000));
  t.gil(1, FakeTarget::tstate(1), 2, 1);  // 101 took it at some point in (2000, 3000)
  tasks.state[100] = TaskState::kGilCond;
  tasks.state[101] = TaskState::kRunning;
  CHECK(s.poll(3000));
  s.finish(4000);

  const auto events = drain(q);
  const auto holds = intervals<raw::Hold>(events);
  REQUIRE(holds.size() == 2);
  CHECK(holds[0].tid == 100);
  CHECK(holds[0].start == 1000);
  CHECK(holds[0].end == 2500);
  CHECK(holds[1].tid == 101);
  CHECK(holds[1].start == 2500);
  CHECK(holds[1].end == 4000);
  const auto waits = intervals<raw::Wait>(events);
  // 101 waited from the first poll until it took the GIL; 100 waits from the hand-off to the end.
  REQUIRE(waits.size() == 2);
  CHECK(waits[0].tid == 101);
  CHECK(waits[0].end == 2500);
  CHECK(waits[1].tid == 100);
  CHECK(waits[1].start == 2500);
  CHECK(s.counters().handoffs_total.load() == 1);
  CHECK(s.counters().handoffs_seen.load() == 1);
}

TEST_CASE(
    "sampler: unseen hand-offs are counted; of the woken waiters, those the evidence keeps waiting are the "
    "latest to begin") {
  Rig rig{{100, 101, 102, 103}};
  auto& [t, tasks, q, s] = rig;

  t.gil(1, FakeTarget::tstate(0), 10, 2);
  tasks.state[101] = TaskState::kGilCond;
  tasks.state[102] = TaskState::kGilCond;
  s.poll(1000);
  t.gil(1, FakeTarget::tstate(0), 10, 3);  // 103 begins to wait
  tasks.state[103] = TaskState::kGilCond;
  s.poll(1500);
  // 0 -> 2 -> 1 between polls: switch_number +2, one visible change. 102 and 103 both read "running": 102
  // (woken first: it waited longest) took the GIL and runs without it now, 103 was only woken and is still on
  // its way into take_gil. The cond's count (__wrefs) holds 100, asleep, and 103, woken but not yet run:
  // glibc drops a waiter from it only once the waiter runs. One take went to a thread other than the last
  // holder, so one of the two left: the older.
  t.gil(1, FakeTarget::tstate(1), 12, 2);
  tasks.state[100] = TaskState::kGilCond;
  tasks.state[101] = TaskState::kRunning;
  tasks.state[102] = TaskState::kRunning;
  tasks.state[103] = TaskState::kRunning;
  s.poll(2000);
  CHECK(s.counters().handoffs_total.load() == 2);
  CHECK(s.counters().handoffs_seen.load() == 1);
  tasks.state[102] = TaskState::kOtherSyscall;
  tasks.state[103] = TaskState::kGilCond;
  s.poll(3000);
  s.finish(4000);
  const auto waits = intervals<raw::Wait>(drain(q));
  int64_t end_102 = -1, start_103 = -1, end_103 = -1;
  int waits_103 = 0;
  for (const auto& w : waits) {
    if (w.tid == 102) end_102 = w.end;
    if (w.tid == 103) {
      start_103 = w.start;
      end_103 = w.end;
      ++waits_103;
    }
  }
  CHECK(end_102 == 1750);  // between the polls that saw it wait and leave
  CHECK(waits_103 == 1);   // one wait, never interrupted
  CHECK(start_103 == 1250);
  CHECK(end_103 == 4000);
}

TEST_CASE("sampler: a waiter that is the last holder took the GIL even if it now runs") {
  Rig rig{{100, 101}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 1);
  tasks.state[101] = TaskState::kGilCond;
  s.poll(1000);
  t.gil(0, FakeTarget::tstate(1), 2, 0);  // 101 took it and dropped it between two polls
  tasks.state[100] = TaskState::kOtherSyscall;
  tasks.state[101] = TaskState::kRunning;
  s.poll(2000);
  s.finish(3000);
  const auto waits = intervals<raw::Wait>(drain(q));
  REQUIRE(waits.size() == 1);
  CHECK(waits[0].tid == 101);
  CHECK(waits[0].end == 1500);
}

TEST_CASE("sampler: a woken waiter stays waiting while no hand-off went unseen") {
  Rig rig{{100, 101}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 1);
  tasks.state[101] = TaskState::kGilCond;
  s.poll(1000);
  // 100 dropped it; 101 woke up and waits for a CPU to take it: glibc still counts it in the cond's __wrefs
  t.gil(0, FakeTarget::tstate(0), 1, 1);
  tasks.state[100] = TaskState::kOtherSyscall;
  tasks.state[101] = TaskState::kRunning;
  s.poll(2000);
  t.gil(1, FakeTarget::tstate(1), 2, 0);
  s.poll(3000);
  s.finish(4000);
  const auto events = drain(q);
  const auto waits = intervals<raw::Wait>(events);
  REQUIRE(waits.size() == 1);
  CHECK(waits[0].tid == 101);
  CHECK(waits[0].start == 1000);
  CHECK(waits[0].end == 2500);
}

TEST_CASE("sampler: a waiter that runs while nobody is inside the GIL's condition wait has left take_gil") {
  Rig rig{{100, 101, 102}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 1);
  tasks.state[101] = TaskState::kGilCond;
  tasks.state[102] = TaskState::kOtherSyscall;
  s.poll(1000);
  // Between two polls 101 took the GIL, dropped it, and now runs (or waits for a CPU) outside take_gil;
  // 102 took it after and holds it. Nobody is inside the cond wait.
  t.gil(1, FakeTarget::tstate(2), 3, 0);
  tasks.state[100] = TaskState::kOtherSyscall;
  tasks.state[101] = TaskState::kRunning;
  tasks.state[102] = TaskState::kRunning;
  s.poll(2000);
  s.poll(3000);
  // Later it waits again.
  t.gil(1, FakeTarget::tstate(2), 3, 1);
  tasks.state[101] = TaskState::kGilCond;
  s.poll(4000);
  s.finish(5000);
  std::vector<Interval> waits_101;
  for (const auto& w : intervals<raw::Wait>(drain(q))) {
    if (w.tid == 101) waits_101.push_back(w);
  }
  REQUIRE(waits_101.size() == 2);
  CHECK(waits_101[0].start == 1000);
  CHECK(waits_101[0].end == 1500);  // left at the hand-offs nobody saw, not at its next wait
  CHECK(waits_101[1].start == 3500);
}

TEST_CASE("sampler: whatever the target's GIL says, the file gilspy writes reads back with its own reader") {
  // A hostile or broken target: every GIL word random at every poll (a switch_number that jumps by up to
  // 2^64, locked and the cond's count out of range, a last holder that is no thread), and random kernel
  // answers. The records go through the raw writer, the summary through the summary builder, and gilspy's
  // reader must read the whole file back.
  Rig rig{{100, 101, 102}, SamplerOptions{}, 1 << 16};
  auto& [t, tasks, q, s] = rig;
  const auto path = std::filesystem::temp_directory_path() /
                    ("gilspy-unit-hostile-" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(path);
  raw::SummaryBuilder summary;
  std::mt19937_64 rng(20261206);
  raw::Meta meta;
  meta.gilspy_version = "test";
  meta.pid = 1000;
  {
    raw::Writer w(path.string(), meta);
    auto drain_to_file = [&] {
      for (const auto& r : drain(q)) {
        summary.add(r);
        w.write(r);
      }
    };
    const auto& gil = t.layout.gil;
    int64_t now = 1'000'000;
    for (int i = 0; i < 5000; ++i) {
      const uint64_t holder = rng() % 4 == 0 ? rng() : FakeTarget::tstate(rng() % 3);
      t.mem.put<int32_t>(kGil + gil.locked.off, static_cast<int32_t>(rng() % 3 == 0 ? rng() : rng() % 2));
      t.mem.put<uint64_t>(kGil + gil.last_holder.off, holder);
      t.mem.put<uint64_t>(kGil + gil.switch_number.off,
                          rng() % 2 == 0 ? rng() : uint64_t{1} << 62 | rng() % 8);
      t.mem.put<uint32_t>(kGil + gil.cond + layouts::kGlibc.cond_wrefs.off, static_cast<uint32_t>(rng()));
      t.mem.put<uint64_t>(kGil + gil.interval.off, rng() % 2 == 0 ? rng() : 5000);
      for (const int32_t tid : t.tids) tasks.state[tid] = static_cast<TaskState>(rng() % 7);
      now += 1 + static_cast<int64_t>(rng() % 2'000'000);
      s.poll(now);
      if (i % 100 == 0) s.emit_stats(now, rng() % 1000, rng() % 1000);  // gilspy's own counts
      drain_to_file();
    }
    s.finish(now + 1);
    drain_to_file();
    summary.set_end(now + 1);
    w.finish(summary.to_json(1000, {}));
  }
  std::ifstream in(path);
  size_t records = 0;
  raw::ReadResult result;
  CHECK_NOTHROW(result = raw::read(
                    in, path.string(), [](const raw::Meta&) {}, [&](const raw::Record&) { ++records; }));
  CHECK(result.complete);
  CHECK(records > 1000);
  CHECK(result.summary.has_value());
  std::filesystem::remove(path);
}

TEST_CASE(
    "sampler: when the process ends, memory still readable at its pid (reused, same layout) is not its") {
  // A real process stands for the target's pid; the fake memory stays readable after it has ended, as a new
  // Python process with the same layout and no address randomization would make it under the same pid.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  FakeTarget t;
  t.interp.pid = child;
  t.tids = {100, 101};
  t.set_threads({0, 1});
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0);
  t.gil(1, FakeTarget::tstate(0), 1, 1);
  tasks.state[101] = TaskState::kGilCond;
  CHECK(s.poll(1'000'000));
  CHECK(s.poll(100'000'000));  // a periodic check: the process lives
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK_FALSE(s.poll(200'000'000));
  CHECK(s.end_cause() == TargetEnd::kExited);
  const auto holds = intervals<raw::Hold>(drain(q));
  REQUIRE(holds.size() == 1);
  CHECK(holds[0].end == 100'000'000);  // at the last poll of the process itself
}

TEST_CASE("sampler: a hand-off counter that jumps or goes backwards is not counted, and is said to have") {
  // A target writing into its own GIL struct: +2^62, then back. Neither is a count of hand-offs; the holder,
  // which did not change, keeps one hold; the real moves around them count.
  FakeTarget t;
  t.tids = {100, 101};
  t.set_threads({0, 1});
  ScriptedTasks tasks;
  tasks.state[101] = TaskState::kGilCond;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0);
  const uint64_t base = 1000;
  t.gil(1, FakeTarget::tstate(0), base, 1);
  CHECK(s.poll(1'000'000));
  t.gil(1, FakeTarget::tstate(0), base + (uint64_t{1} << 62), 1);
  CHECK(s.poll(2'000'000));
  t.gil(1, FakeTarget::tstate(0), base, 1);  // backwards
  CHECK(s.poll(3'000'000));
  t.gil(1, FakeTarget::tstate(1), base + 1, 1);  // a real hand-off to 101
  tasks.state[100] = TaskState::kGilCond;
  tasks.state[101] = TaskState::kRunning;
  CHECK(s.poll(4'000'000));
  // 1 ms allows up to 20 000 takes: a burst that large is possible, so it counts.
  t.gil(1, FakeTarget::tstate(0), base + 1 + 20'000, 1);
  CHECK(s.poll(5'000'000));
  s.finish(6'000'000);

  CHECK(s.counters().impossible_switch_moves.load() == 2);
  CHECK(s.counters().handoffs_total.load() == 1 + 20'000);
  const auto holds = intervals<raw::Hold>(drain(q));
  REQUIRE(holds.size() == 3);
  CHECK(holds[0].tid == 100);
  CHECK(holds[0].start == 1'000'000);
  CHECK(holds[0].end == 3'500'000);  // one hold through both impossible moves
  CHECK(holds[1].tid == 101);
  CHECK(holds[2].tid == 100);
}

TEST_CASE("sampler: a thread state reused by a new thread never gives the old thread a hold") {
  Rig rig{{100, 101}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(1), 1, 0);
  s.poll(1000);
  t.gil(0, FakeTarget::tstate(1), 1, 0);
  s.poll(2000);
  // Thread 101 exits; a new thread 105 gets the same PyThreadState address and takes the GIL. last_holder
  // and switch_number do not move (CPython only bumps them for a *different* pointer).
  t.tids[1] = 105;
  t.set_threads({0, 1});
  t.gil(1, FakeTarget::tstate(1), 1, 0);
  s.poll(3000);
  s.finish(4000);
  const auto events = drain(q);
  int64_t hold_105 = 0, hold_101_after_exit = 0;
  int64_t end_101 = -1;
  for (const auto& e : events) {
    const auto* end = std::get_if<raw::ThreadEnd>(&e);
    if (end != nullptr && end->tid == 101 && end_101 < 0) end_101 = end->ts;
  }
  REQUIRE(end_101 >= 0);
  for (const auto& h : intervals<raw::Hold>(events)) {
    if (h.tid == 105) hold_105 += h.end - h.start;
    if (h.tid == 101 && h.end > end_101) hold_101_after_exit += h.end - h.start;
  }
  CHECK(hold_105 > 0);
  CHECK(hold_101_after_exit == 0);
}

TEST_CASE("sampler: an unknown holder makes it walk the thread list again") {
  FakeTarget t;
  t.tids = {100, 101};
  t.set_threads({0});
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.walk_period_ns = 1'000'000'000});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000);
  CHECK(s.thread_count() == 1);
  t.set_threads({0, 1});
  t.gil(1, FakeTarget::tstate(1), 2, 0);
  s.poll(2000);
  CHECK(s.thread_count() == 2);
  CHECK(s.counters().unknown_holder_polls.load() == 0);
  s.finish(3000);
  const auto holds = intervals<raw::Hold>(drain(q));
  REQUIRE(holds.size() == 2);
  CHECK(holds[1].tid == 101);
}

TEST_CASE("sampler: while the GIL's state says nothing changed, one waiter a poll is asked, in turn") {
  Rig rig{{100, 101, 102, 103, 104}, SamplerOptions{.walk_period_ns = 1'000'000'000}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 3);
  tasks.state[101] = TaskState::kGilCond;
  tasks.state[102] = TaskState::kGilCond;
  tasks.state[103] = TaskState::kGilCond;
  s.poll(1000);
  const int after_first = tasks.reads;
  for (int i = 2; i < 50; ++i) s.poll(i * 1000);
  CHECK(tasks.reads == after_first + 48);  // nothing changed: one read a poll, not three (nor the idle 104)
  // 103 had been misread (it left, unseen), and 104 began to wait: the cond's count is the same. The turn
  // comes to 103 within three polls; 104 is asked at that poll, when the count has room for it.
  tasks.state[103] = TaskState::kOtherSyscall;
  tasks.state[104] = TaskState::kGilCond;
  for (int i = 50; i < 54; ++i) s.poll(i * 1000);
  s.finish(55000);
  int64_t end_103 = -1, start_104 = -1;
  for (const auto& w : intervals<raw::Wait>(drain(q))) {
    if (w.tid == 103) end_103 = w.end;
    if (w.tid == 104) start_104 = w.start;
  }
  CHECK(end_103 >= 49500);
  CHECK(end_103 <= 51500);
  CHECK(start_104 == end_103);
}

TEST_CASE("sampler: a target that goes away closes every interval and stops") {
  Rig rig{{100}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  CHECK(s.poll(1000));
  CHECK(s.poll(2000));
  t.mem.set_gone(true);
  CHECK_FALSE(s.poll(3000));
  const auto events = drain(q);
  const auto holds = intervals<raw::Hold>(events);
  REQUIRE(holds.size() == 1);
  CHECK(holds[0].end == 2000);
  CHECK(std::holds_alternative<raw::ThreadEnd>(events.back()));
}

TEST_CASE("poll loop: stops at the duration, closes intervals, and emits final counters") {
  FakeTarget t;
  t.tids = {100};
  t.set_threads({0});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  ScriptedTasks tasks;
  RecordQueue q(1 << 14);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0);
  PollLoop loop({.rate_hz = 2000, .duration_s = 0.05, .realtime = false, .nice = 0}, q);
  std::atomic<bool> stop{false};
  ProcessSampler* samplers[] = {&s};
  CHECK(loop.run(samplers, stop) == StopReason::kDuration);
  CHECK(loop.counters().polls.load() > 0);
  const auto events = drain(q);
  REQUIRE(!events.empty());
  REQUIRE(std::holds_alternative<raw::Stats>(events.back()));
  CHECK(std::get<raw::Stats>(events.back()).polls == s.counters().polls.load());
  CHECK(intervals<raw::Hold>(events).size() == 1);
}

namespace {
// Moves the GIL on at each poll's read of it: `per_poll` hand-offs, the holder changing each time (all seen
// when per_poll is 1) or never (none seen: they all came and went between two polls).
// After `quiet_after_ns` (from the first read) the GIL stops changing hands.
struct HandingOffReader final : MemoryReader {
  FakeTarget& t;
  uint64_t per_poll;
  bool holder_changes;
  int64_t quiet_after_ns;
  uint64_t switches = 1;
  size_t polls = 0;
  int64_t first_ns = -1;
  const LoopCounters* loop = nullptr;
  uint64_t low_when_quiet = 0;  // the loop's low-coverage ticks when the hand-offs stopped
  size_t polls_when_quiet = 0;
  HandingOffReader(FakeTarget& target, uint64_t n, bool changes, int64_t quiet_after)
      : t(target), per_poll(n), holder_changes(changes), quiet_after_ns(quiet_after) {}
  size_t read(std::span<const ReadRegion> regions) override {
    if (!regions.empty() && regions[0].remote == kGil) {
      const int64_t now = monotonic_ns();
      if (first_ns < 0) first_ns = now;
      if (now - first_ns < quiet_after_ns) {
        switches += per_poll;
        ++polls;
        t.gil(1, FakeTarget::tstate(holder_changes ? polls % 2 : 0), switches, 1);
      } else if (polls_when_quiet == 0) {
        polls_when_quiet = polls;
        low_when_quiet = loop->low_coverage.load();
      }
    }
    return t.mem.read(regions);
  }
};

struct LowCoverage {
  uint64_t ticks = 0;        // ticks under low coverage, all of the run
  uint64_t ticks_quiet = 0;  // of them, after the hand-offs stopped
  uint64_t polls_quiet = 0;  // polls after the hand-offs stopped
};

LowCoverage low_coverage_polls(uint64_t per_poll, bool holder_changes, double seconds = 0.7,
                               int64_t quiet_after_ns = INT64_MAX) {
  FakeTarget t;
  t.tids = {100, 101};
  t.set_threads({0, 1});
  HandingOffReader reader(t, per_poll, holder_changes, quiet_after_ns);
  ScriptedTasks tasks;
  RecordQueue q(1 << 16);
  ProcessSampler s(t.interp, reader, tasks, q, 0);
  PollLoop loop({.rate_hz = 10000, .duration_s = seconds, .realtime = false, .nice = 0}, q);
  reader.loop = &loop.counters();
  std::atomic<bool> stop{false};
  ProcessSampler* samplers[] = {&s};
  loop.run(samplers, stop);
  const uint64_t ticks = loop.counters().low_coverage.load();
  const uint64_t polls = loop.counters().polls.load();
  if (reader.polls_when_quiet == 0) return {.ticks = ticks};
  return {.ticks = ticks,
          .ticks_quiet = ticks - reader.low_when_quiet,
          .polls_quiet = polls - reader.polls_when_quiet};
}
}  // namespace

TEST_CASE("poll loop: half the budget and polls up to 16 ms apart only while they see few of the hand-offs") {
  // 20 hand-offs between every two polls, none seen: a window of 250 ms is enough to know.
  CHECK(low_coverage_polls(20, false).ticks > 0);
  // One a poll, each seen: polls see everything, and stay as the budget says.
  CHECK(low_coverage_polls(1, true).ticks == 0);
  // The flood stops (a server gone quiet): the first window without enough hand-offs to say ends it, so
  // most of the quiet second is polled as usual (kept low, every one of its ticks would count).
  const LowCoverage stopped = low_coverage_polls(20, false, 1.6, 400'000'000);
  REQUIRE(stopped.ticks > stopped.ticks_quiet);  // it was low before
  REQUIRE(stopped.polls_quiet > 0);
  CHECK(stopped.ticks_quiet < stopped.polls_quiet * 6 / 10);
}

TEST_CASE("record queue: a full queue counts what it drops") {
  RecordQueue q(4);
  for (int i = 0; i < 6; ++i) q.push(0, raw::Waiters{.ts = i, .n = 1});
  CHECK(q.dropped() == 2);
  int popped = 0;
  raw::TargetRecord e;
  while (q.pop(&e)) ++popped;
  CHECK(popped == 4);
}

// Which of [addr, addr + len) is resident, page by page (mincore).
static size_t resident_pages(const void* addr, size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  REQUIRE(mincore(const_cast<void*>(addr), len, v.data()) == 0);
  return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; }));
}

TEST_CASE("record queue: the consumer maps the producer's next slots ahead of it, the rest stays unmapped") {
  constexpr size_t kSlots = 1 << 18;  // the session's ring, ~40 MiB
  RecordQueue q(kSlots);
  if (q.mapped_bytes() == 0) {
    MESSAGE("MADV_POPULATE_WRITE refused here: the ring faults on demand, nothing to check");
    return;
  }
  constexpr size_t kAhead = RecordQueue::kPrefaultAhead;
  CHECK(q.mapped_bytes() == kAhead);  // at construction: the first slots
  // Records in place, the queue still works as a queue.
  raw::TargetRecord e;
  CHECK(q.push(1, raw::Waiters{.ts = 7, .n = 2}));
  REQUIRE(q.pop(&e));
  CHECK(std::get<raw::Waiters>(e.record).ts == 7);
  // The producer past the first window: the consumer maps the next one.
  const size_t slots_in_window = kAhead / sizeof(raw::TargetRecord);
  for (size_t i = 0; i < slots_in_window; ++i) q.push(0, raw::Waiters{.ts = static_cast<int64_t>(i), .n = 1});
  while (q.pop(&e)) {
  }
  q.prefault_ahead();
  CHECK(q.mapped_bytes() >= (slots_in_window + 1) * sizeof(raw::TargetRecord) + kAhead - (size_t{2} << 20));
  CHECK(q.mapped_bytes() <= 3 * kAhead);
  // What it says is mapped is resident; the rest is not yet (the pages are the kernel's to give later).
  const auto* base = static_cast<const char*>(q.slots_begin());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  CHECK(resident_pages(base, q.mapped_bytes()) == q.mapped_bytes() / page);
  const size_t rest = q.slots_bytes() - q.mapped_bytes();
  REQUIRE(rest > 0);
  CHECK(resident_pages(base + q.mapped_bytes(), rest) == 0);
}

TEST_CASE("poll loop: a target added while the loop runs is polled from then on, under its own id") {
  FakeTarget a, b;
  a.tids = {100};
  a.set_threads({0});
  a.gil(1, FakeTarget::tstate(0), 1, 0);
  b.tids = {200};
  b.set_threads({0});
  b.gil(1, FakeTarget::tstate(0), 1, 0);
  ScriptedTasks tasks_a, tasks_b;
  RecordQueue q(1 << 16);
  ProcessSampler sa(a.interp, a.mem, tasks_a, q, 7);
  ProcessSampler sb(b.interp, b.mem, tasks_b, q, 42);
  PollLoop loop({.rate_hz = 2000, .realtime = false, .nice = 0, .stats_period_s = 0.01}, q);
  loop.add(sa);
  std::atomic<bool> stop{false};
  StopReason reason = StopReason::kDuration;
  std::thread poller([&] { reason = loop.run(stop); });
  while (sa.counters().polls.load() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(sb.counters().polls.load() == 0);
  loop.add(sb);
  while (sb.counters().polls.load() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  poller.join();
  CHECK(reason == StopReason::kStopped);

  std::map<raw::TargetId, std::vector<raw::Record>> by_target;
  raw::TargetRecord e;
  while (q.pop(&e)) by_target[e.target].push_back(e.record);
  REQUIRE(by_target.size() == 2);
  const auto holds_a = intervals<raw::Hold>(by_target[7]);
  const auto holds_b = intervals<raw::Hold>(by_target[42]);
  REQUIRE(holds_a.size() == 1);
  REQUIRE(holds_b.size() == 1);
  CHECK(holds_a[0].tid == 100);
  CHECK(holds_b[0].tid == 200);
  CHECK(holds_b[0].start > holds_a[0].start);  // b joined later
  CHECK(holds_a[0].end == holds_b[0].end);     // both closed at the loop's end
  CHECK(std::get<raw::Stats>(by_target[42].back()).polls == sb.counters().polls.load());
}

TEST_CASE("poll loop: a target that ends has its last counters at its end, not at the ticks after it") {
  // A child that exits while the session goes on: its recording spans its own life (the raw summary's
  // duration runs to its last record); before, its counters came at every later tick, to the session's end.
  FakeTarget a, b;
  for (FakeTarget* t : {&a, &b}) {
    t->tids = {100};
    t->set_threads({0});
    t->gil(1, FakeTarget::tstate(0), 1, 0);
  }
  ScriptedTasks tasks_a, tasks_b;
  RecordQueue q(1 << 16);
  ProcessSampler sa(a.interp, a.mem, tasks_a, q, 1);
  ProcessSampler sb(b.interp, b.mem, tasks_b, q, 2);
  PollLoop loop({.rate_hz = 2000, .realtime = false, .nice = 0, .stats_period_s = 0.005}, q);
  loop.add(sa);
  loop.add(sb);
  std::atomic<bool> stop{false};
  std::thread poller([&] { loop.run(stop); });
  while (sb.counters().polls.load() < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  b.mem.set_gone(true);
  const uint64_t a_polls = sa.counters().polls.load();
  while (sa.counters().polls.load() < a_polls + 100)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  poller.join();
  std::map<raw::TargetId, std::vector<raw::Record>> by_target;
  raw::TargetRecord e;
  while (q.pop(&e)) by_target[e.target].push_back(e.record);
  const auto& rb = by_target[2];
  const auto end = std::find_if(
      rb.begin(), rb.end(), [](const raw::Record& r) { return std::holds_alternative<raw::ThreadEnd>(r); });
  REQUIRE(end != rb.end());
  const auto stats_after = std::count_if(
      end, rb.end(), [](const raw::Record& r) { return std::holds_alternative<raw::Stats>(r); });
  CHECK(stats_after == 1);  // its last counters, once
  REQUIRE(std::holds_alternative<raw::Stats>(rb.back()));
  REQUIRE(std::holds_alternative<raw::Stats>(by_target[1].back()));
  // The other target went on ticking for 100 polls (50 ms at 2 kHz) past it.
  CHECK(std::get<raw::Stats>(by_target[1].back()).ts > std::get<raw::Stats>(rb.back()).ts);
}

TEST_CASE("poll loop: each stats tick says where every live thread stands") {
  FakeTarget t;
  t.tids = {100, 101};
  t.set_threads({0, 1});
  t.gil(1, FakeTarget::tstate(0), 1, 1);
  ScriptedTasks tasks;
  tasks.state[101] = TaskState::kGilCond;
  RecordQueue q(1 << 16);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0);
  // Stopped once it has ticked 3 times (every 20 ms), not after a fixed time: a loaded machine (CI's
  // sanitizer build beside a compiler) once gave a 100 ms loop a single tick.
  PollLoop loop({.rate_hz = 2000, .duration_s = 30, .realtime = false, .nice = 0, .stats_period_s = 0.02}, q);
  std::atomic<bool> stop{false};
  ProcessSampler* samplers[] = {&s};
  StopReason reason = StopReason::kDuration;
  std::thread poller([&] { reason = loop.run(samplers, stop); });
  int stats = 0;
  std::map<int64_t, raw::ThreadState> latest;
  std::map<int64_t, int> states_per_tick;  // ThreadState records after the last Stats, by tid
  const auto take = [&](const raw::Record& r) {
    if (const auto* st = std::get_if<raw::ThreadState>(&r)) {
      CHECK(st->ts >= st->since);
      latest[st->tid] = *st;
      ++states_per_tick[st->tid];
    }
    if (std::holds_alternative<raw::Stats>(r)) {
      // The tick before this one (Stats, then the threads): every live thread, once.
      if (stats > 0) CHECK(states_per_tick == std::map<int64_t, int>{{100, 1}, {101, 1}});
      ++stats;
      states_per_tick.clear();
    }
  };
  raw::TargetRecord e;
  while (stats < 3 && poller.joinable() && !stop) {
    if (q.pop(&e)) {
      take(e.record);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  stop = true;
  poller.join();
  while (q.pop(&e)) take(e.record);
  CHECK(reason == StopReason::kStopped);
  CHECK(stats >= 4);  // three ticks, and one at the end
  REQUIRE(latest.size() == 2);
  CHECK(latest[100].role == raw::GilRole::kHolding);
  CHECK(latest[101].role == raw::GilRole::kWaiting);
  CHECK(latest[100].since ==
        latest[101].since);  // both since the first poll: one hold, one wait, never ended
}

TEST_CASE("sampler: a walk cut short by a thread exiting under it ends no thread") {
  FakeTarget t;
  t.tids = {100, 101, 102};
  t.set_threads({2, 1, 0});  // newest first, the main thread (100) last
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.walk_period_ns = 1000});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000);
  CHECK(s.thread_count() == 3);
  // Thread 101 is being freed while we walk: its interp pointer is garbage, the walk stops there.
  t.mem.put(FakeTarget::tstate(1), t.layout.tstate.interp, 0xdeadbeef);
  s.poll(3000);
  CHECK(s.thread_count() == 3);
  // Once the list is consistent again (101 unlinked), 101 ends and the main thread stays.
  t.set_threads({2, 0});
  s.poll(5000);
  CHECK(s.thread_count() == 2);
  s.finish(6000);
  int ends_100 = 0;
  for (const auto& e : drain(q)) {
    const auto* end = std::get_if<raw::ThreadEnd>(&e);
    ends_100 += (end != nullptr && end->tid == 100) ? 1 : 0;
  }
  CHECK(ends_100 == 1);  // only at the end of the recording
}

TEST_CASE("sampler: a GIL that stays unreadable for a second ends the target; a short gap does not") {
  Rig rig{{100}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  CHECK(s.poll(1'000'000));
  t.mem.unmap(kGil);
  CHECK(s.poll(2'000'000));
  CHECK(s.poll(500'000'000));
  t.mem.map(kGil, 0x1000);
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  CHECK(s.poll(600'000'000));  // readable again: the run of failures starts over
  t.mem.unmap(kGil);
  CHECK(s.poll(700'000'000));
  CHECK(s.poll(1'600'000'000));
  CHECK_FALSE(s.poll(1'700'000'000));
  const auto holds = intervals<raw::Hold>(drain(q));
  REQUIRE(!holds.empty());
  CHECK(holds.back().end == 600'000'000);  // closed at the last poll that read the GIL
}

TEST_CASE(
    "sampler: a running waiter for whom the cond's count has no room left take_gil; one it may count stays") {
  // 0 -> 102 -> 0 between two polls: 102 took the GIL, dropped it, and now reads "running". 101 still sleeps
  // in the cond. Returns 102's waits when the cond then counts `counted` waiters.
  auto waits_of_102 = [](uint32_t counted) {
    FakeTarget t;
    t.tids = {100, 101, 102, 103};
    t.set_threads({0, 1, 2, 3});
    ScriptedTasks tasks;
    RecordQueue q(1024);
    ProcessSampler s(t.interp, t.mem, tasks, q, 0);
    t.gil(1, FakeTarget::tstate(0), 1, 2);
    tasks.state[101] = TaskState::kGilCond;
    tasks.state[102] = TaskState::kGilCond;
    tasks.state[103] = TaskState::kOtherSyscall;
    s.poll(1000);
    t.gil(1, FakeTarget::tstate(0), 3, counted);
    tasks.state[102] = TaskState::kRunning;
    s.poll(2000);
    s.finish(3000);
    std::vector<Interval> out;
    for (const auto& w : intervals<raw::Wait>(drain(q))) {
      if (w.tid == 102) out.push_back(w);
    }
    return out;
  };
  // The cond counts one waiter, 101: no room for 102 there, so it left take_gil at the unseen hand-offs.
  const auto left = waits_of_102(1);
  REQUIRE(left.size() == 1);
  CHECK(left[0].end == 1500);
  // It counts two: 102 may be a woken waiter that has not run yet, so it stays waiting.
  const auto stayed = waits_of_102(2);
  REQUIRE(stayed.size() == 1);
  CHECK(stayed[0].end == 3000);
}

TEST_CASE(
    "sampler: a new thread's state still naming its creator, seen in a walk cut short, is not the creator") {
  // 3.8-3.11 give a thread state being set up its creator's ids until the new thread runs; a complete walk
  // sees the creator further down the list and leaves the placeholder out. A walk cut short right after the
  // placeholder cannot: it must not announce the creator a second time.
  FakeTarget t;
  t.tids = {100, 101, 100};  // slot 2: a placeholder made by the main thread (100)
  t.set_threads({1, 0});
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.walk_period_ns = 1000});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000);
  CHECK(s.thread_count() == 2);
  t.set_threads({2, 1, 0});
  t.mem.put(FakeTarget::tstate(2), t.layout.tstate.thread_id, 0x7f0000);  // the creator's too
  t.mem.put(FakeTarget::tstate(1), t.layout.tstate.interp, 0xdeadbeef);   // the walk stops here
  s.poll(3000);
  CHECK(s.thread_count() == 2);
  // The list consistent again, the new thread running under its own tid (102): it is announced, once.
  t.tids = {100, 101, 102};
  t.set_threads({2, 1, 0});
  s.poll(5000);
  CHECK(s.thread_count() == 3);
  s.finish(6000);
  std::map<int64_t, int> starts = starts_per_tid(drain(q));
  CHECK(starts[100] == 1);
  CHECK(starts[101] == 1);
  CHECK(starts[102] == 1);
}

TEST_CASE("sampler: a new thread caught between writing its two ids is not its creator") {
  // 3.11's thread_run stores thread_id, then native_thread_id: a walk in between reads the new thread's own
  // thread_id beside its creator's tid. The creator further down the list has that tid: a placeholder.
  FakeTarget t;
  t.tids = {100, 101, 100};
  t.set_threads({1, 0});
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.walk_period_ns = 1000});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000);
  t.set_threads({2, 1, 0});  // slot 2: its own thread_id (0x7f0002), the creator's tid (100)
  s.poll(3000);
  CHECK(s.thread_count() == 2);
  t.tids = {100, 101, 102};
  t.set_threads({2, 1, 0});
  s.poll(5000);
  CHECK(s.thread_count() == 3);
  s.finish(6000);
  std::map<int64_t, int> starts = starts_per_tid(drain(q));
  CHECK(starts[100] == 1);
  CHECK(starts[102] == 1);
}

TEST_CASE(
    "sampler: after unseen takes every waiter is asked; else one, every one when the cond's count falls "
    "below "
    "them; an idle thread only when the count has room for a new waiter") {
  Rig rig{{100, 101, 102, 103}, SamplerOptions{.walk_period_ns = 1'000'000'000}};
  auto& [t, tasks, q, s] = rig;
  tasks.state[101] = TaskState::kGilCond;
  tasks.state[102] = TaskState::kGilCond;
  tasks.state[103] = TaskState::kOtherSyscall;  // idle: in a read() of its own
  t.gil(1, FakeTarget::tstate(0), 1, 2);
  s.poll(1000);  // the first poll asks about everyone
  CHECK(tasks.reads == 3);
  // A poll with the holder unchanged: its switch count and the cond's count; what has been read by then.
  const auto poll_at = [&](int64_t when, uint64_t switches, uint32_t in_cond) {
    t.gil(1, FakeTarget::tstate(0), switches, in_cond);
    s.poll(when);
    return tasks.reads;
  };
  // Two hand-offs went by unseen (the holder dropped and took the GIL back): any waiter may have taken it.
  // The idle thread may have too, but then it let it go again: released either way, and the count (two, both
  // asleep there) has no room for it.
  CHECK(poll_at(2000, 3, 2) == 5);
  // None since, and the cond holds the two waiters: one is asked, the idle thread not.
  CHECK(poll_at(3000, 3, 2) == 6);
  // One more in the cond than the waiters: the idle thread is asked too, and waits.
  tasks.state[103] = TaskState::kGilCond;
  CHECK(poll_at(4000, 3, 3) == 8);
  // The count falls below the three waiters without a take: every waiter is asked. 102 had left (a misread
  // before: it is in a write() of its own); 103, woken, reads "running" and still waits.
  tasks.state[102] = TaskState::kOtherSyscall;
  tasks.state[103] = TaskState::kRunning;
  CHECK(poll_at(5000, 3, 1) == 11);
  s.finish(6000);
  int64_t end_102 = -1, start_103 = -1, end_103 = -1;
  for (const auto& w : intervals<raw::Wait>(drain(q))) {
    if (w.tid == 102) end_102 = w.end;
    if (w.tid == 103) {
      start_103 = w.start;
      end_103 = w.end;
    }
  }
  CHECK(end_102 == 4500);
  CHECK(start_103 == 3500);
  CHECK(end_103 == 6000);
}

TEST_CASE("walker: before 3.11, one forged thread_id loses that thread, not every thread") {
  // 3.10 keeps no OS id in the thread state: the walker finds each thread's in glibc's struct pthread, at an
  // offset it checks against /proc on its first walk. Two thread states name this process's real threads
  // (their struct pthread faked here); a third's thread_id was forged to point at nothing.
  const layouts::Layout layout = layouts::layout_for(*elf::parse_version_text("3.10.13"));
  REQUIRE(!layout.tstate.native_thread_id);
  constexpr uint64_t kPthreads = 0x80000;
  FakeMemoryReader mem;
  mem.map(kInterp, 0x1000);
  mem.map(kTstates, 0x10000);
  mem.map(kPthreads, 0x10000);
  std::atomic<int32_t> other{0};
  std::atomic<bool> done{false};
  std::thread helper([&] {
    other = static_cast<int32_t>(::gettid());
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (other == 0) std::this_thread::yield();
  const std::vector<int32_t> tids = {static_cast<int32_t>(::gettid()), other.load()};
  const uint64_t forged = 0xdead0000;  // maps nothing
  uint64_t head = 0;
  for (size_t i = 3; i-- > 0;) {
    const uint64_t ts = kTstates + i * 0x1000;
    const uint64_t pthread = i < 2 ? kPthreads + i * 0x1000 : forged;
    if (i < 2) mem.put<int32_t>(pthread + layouts::kGlibc.pthread_tid, tids[i]);
    mem.put(ts, layout.tstate.next, head);
    mem.put(ts, layout.tstate.interp, kInterp);
    mem.put(ts, layout.tstate.thread_id, pthread);
    mem.put(ts, layout.tstate.prev, i > 0 ? ts - 0x1000 : 0);
    head = ts;
  }
  mem.put(kInterp, layout.interp.threads_head, head);
  ThreadWalker w(::getpid(), layout, kInterp);
  std::vector<ThreadRef> out(8);
  const size_t n = w.walk(mem, out);
  done = true;
  helper.join();
  CHECK(w.pthread_tid_offset() == layouts::kGlibc.pthread_tid);
  REQUIRE(n == 2);
  CHECK(out[0].tid == tids[0]);
  CHECK(out[1].tid == tids[1]);
}

TEST_CASE("walker: an unchanged thread list is checked in one read; a changed one is walked node by node") {
  FakeTarget t;
  t.tids = {100, 101, 102, 103};
  t.set_threads({0, 1, 2});
  ThreadWalker w(t.interp.pid, t.layout, kInterp);
  std::vector<ThreadRef> out(8);
  auto tids = [&](size_t n) {
    std::vector<int32_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(out[i].tid);
    return v;
  };
  size_t before = t.mem.reads();
  bool complete = false;
  REQUIRE(w.walk(t.mem, out, nullptr, &complete) == 3);
  CHECK(complete);
  CHECK(t.mem.reads() - before == 4);  // the head, then each node
  before = t.mem.reads();
  REQUIRE(w.walk(t.mem, out, nullptr, &complete) == 3);
  CHECK(complete);
  CHECK(t.mem.reads() - before == 1);
  CHECK(tids(3) == std::vector<int32_t>{100, 101, 102});
  // A new thread (newest first in the list): the check fails, the walk finds it.
  t.set_threads({3, 0, 1, 2});
  before = t.mem.reads();
  REQUIRE(w.walk(t.mem, out, nullptr, &complete) == 4);
  CHECK(t.mem.reads() - before == 1 + 5);
  CHECK(tids(4) == std::vector<int32_t>{103, 100, 101, 102});
  // A thread state reused in place by another thread: the links are the same, the one read gives the new TID.
  t.tids[1] = 201;
  t.set_threads({3, 0, 1, 2});
  before = t.mem.reads();
  REQUIRE(w.walk(t.mem, out, nullptr, &complete) == 4);
  CHECK(t.mem.reads() - before == 1);
  CHECK(tids(4) == std::vector<int32_t>{103, 100, 201, 102});
  // A thread gone: walked again, without it.
  t.set_threads({3, 1, 2});
  REQUIRE(w.walk(t.mem, out, nullptr, &complete) == 3);
  CHECK(complete);
  CHECK(tids(3) == std::vector<int32_t>{103, 201, 102});
}

TEST_CASE("sampler: the holder's CPU is asked only of a thread that has been around for a while") {
  FakeTarget t;
  t.tids = {100, 101};
  t.set_threads({0});
  ScriptedTasks tasks;
  RecordQueue q(1024);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.walk_period_ns = 1'000'000'000});
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1'000'000);
  CHECK(s.holder_cpu(1'000'000) == 1);  // found at attach: old enough
  // A thread that began during the recording (a request's): not worth moving away from yet.
  t.set_threads({1, 0});
  t.gil(1, FakeTarget::tstate(1), 2, 0);
  s.poll(2'000'000);
  const int asked = tasks.cpu_reads;
  CHECK(s.holder_cpu(2'000'000) == -1);
  CHECK(s.holder_cpu(2'000'000 + ProcessSampler::kPlacementMinAgeNs - 1'000'000) == -1);
  CHECK(tasks.cpu_reads == asked);  // not even read
  CHECK(s.holder_cpu(2'000'000 + ProcessSampler::kPlacementMinAgeNs) == 1);
}

TEST_CASE("sampler: a change is dated where the poll's window begins, kept between the two polls") {
  Rig rig{{100, 101}};
  auto& [t, tasks, q, s] = rig;
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000, 1000);
  t.gil(1, FakeTarget::tstate(1), 2, 0);
  s.poll(2000, 1200);  // the poll at 2000 stands for the window from 1200
  t.gil(1, FakeTarget::tstate(0), 3, 0);
  s.poll(3000, 500);  // a window start before the last poll is taken as that poll
  s.finish(4000);
  const auto holds = intervals<raw::Hold>(drain(q));
  REQUIRE(holds.size() == 3);
  CHECK(holds[0].end == 1200);
  CHECK(holds[1].start == 1200);
  CHECK(holds[1].end == 2000);
  CHECK(holds[2].start == 2000);
}

TEST_CASE("sampler: each thread's end carries the standard error of its time in each state") {
  Rig rig{{100, 101, 102}, SamplerOptions{.walk_period_ns = 1'000'000'000}};
  auto& [t, tasks, q, s] = rig;
  tasks.state[101] = TaskState::kOtherSyscall;  // idle all along
  tasks.state[102] = TaskState::kOtherSyscall;
  t.gil(1, FakeTarget::tstate(0), 1, 0);
  s.poll(1000);
  s.poll(2000);  // nothing could change: no error
  t.gil(1, FakeTarget::tstate(0), 3, 0);
  s.poll(3000);  // two takes unseen in a 1000 ns gap: anyone's share of it is unknown, variance 1000²/4
  t.gil(1, FakeTarget::tstate(2), 4, 0);
  s.poll(4000);  // one seen hand-off: 100's and 102's roles changed somewhere in the gap, 1000²/12
  s.finish(5000);
  std::map<int64_t, int64_t> se;
  for (const auto& r : drain(q)) {
    if (const auto* e = std::get_if<raw::ThreadEnd>(&r)) se[e->tid] = e->state_se_ns;
  }
  CHECK(se[101] == 500);  // sqrt(1000²/4)
  const double both = std::sqrt(1000.0 * 1000 / 4 + 1000.0 * 1000 / 12);
  CHECK(se[100] == static_cast<int64_t>(std::llround(both)));
  CHECK(se[102] == static_cast<int64_t>(std::llround(both)));
}

}  // namespace unit_process_sampler
