// Per-thread counters split by GIL role (sampler/thread_counters.hpp), driven by a scripted source: what a
// stretch that spans a role change gives each side, run-queue delay to the role before the change, pieces per
// interval, perf scaling, a thread gone before its last read. And the /proc parsers, --counters names, perf
// on this thread.
#include <doctest/doctest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "raw/counter_kinds.hpp"
#include "sampler/counters/perf_counters.hpp"
#include "sampler/counters/thread_counters.hpp"
#include "sampler/proc/sched_stats.hpp"

using namespace gilspy;
using namespace gilspy::sampler;
using raw::GilRole;

// Named per file, so that the unity build can put test files together.
namespace unit_thread_counters {
namespace {

constexpr int64_t kMs = 1'000'000;
// The split tests poll every 2 ms and read the holder and the waiters at each poll.
constexpr ThreadCountersOptions kEvery2ms{
    .change_read_gap_ns = 0, .in_role_gap_ns = 2 * kMs, .in_role_wait_gap_ns = 2 * kMs};

// Cumulative figures per slot that the test sets between polls.
class ScriptedCounters final : public CounterSource {
 public:
  struct State {
    std::optional<SchedStat> sched = SchedStat{};
    std::optional<PerfReading> perf;
    std::optional<SwitchCounts> switches = SwitchCounts{};
  };
  std::map<size_t, State> slots;
  int reads = 0;
  std::map<size_t, int> reads_of;
  void thread_added(size_t slot, int32_t) override { slots[slot]; }
  void thread_removed(size_t slot) override { slots.erase(slot); }
  CounterReading read(size_t slot, bool perf) override {
    ++reads;
    ++reads_of[slot];
    const State& s = slots.at(slot);
    return {s.sched, perf ? s.perf : std::nullopt};
  }
  std::optional<SwitchCounts> read_switches(size_t slot) override { return slots.at(slot).switches; }
  void run(size_t slot, int64_t cpu, int64_t delay = 0, uint64_t slices = 0) {
    auto& s = *slots.at(slot).sched;
    s.cpu_ns += cpu;
    s.run_delay_ns += delay;
    s.slices += slices;
  }
};

std::vector<raw::CounterSample> samples(RecordQueue& q,
                                        std::vector<raw::ThreadSwitches>* switches = nullptr) {
  std::vector<raw::CounterSample> out;
  raw::TargetRecord r;
  while (q.pop(&r)) {
    if (const auto* c = std::get_if<raw::CounterSample>(&r.record)) out.push_back(*c);
    if (const auto* s = std::get_if<raw::ThreadSwitches>(&r.record); s && switches) switches->push_back(*s);
  }
  return out;
}

int64_t cpu_in(const std::vector<raw::CounterSample>& v, GilRole role) {
  int64_t sum = 0;
  for (const auto& s : v) sum += s.role == role ? s.cpu_ns : 0;
  return sum;
}
int64_t time_in(const std::vector<raw::CounterSample>& v, GilRole role) {
  int64_t sum = 0;
  for (const auto& s : v) sum += s.role == role ? s.time_ns : 0;
  return sum;
}
int64_t delay_in(const std::vector<raw::CounterSample>& v, GilRole role) {
  int64_t sum = 0;
  for (const auto& s : v) sum += s.role == role ? s.run_delay_ns : 0;
  return sum;
}

}  // namespace

TEST_CASE("counters: a holder's CPU stays with its hold, a waiter that sleeps gets none") {
  ScriptedCounters src;
  RecordQueue q(1024);
  ThreadCounters tc(src, q, 0, 8, kEvery2ms);
  tc.thread_added(0, 100, GilRole::kWaiting, 0);
  tc.after_poll(2 * kMs);  // asleep in take_gil
  // It takes the GIL at 3 ms (seen by the poll at 4 ms), computes at full speed, read every 2 ms as a holder.
  tc.role_changed(0, GilRole::kHolding, 3 * kMs);
  src.run(0, 1 * kMs);  // 1 ms of CPU after the take, before the poll at 4 ms
  tc.after_poll(4 * kMs);
  for (int64_t t = 6; t <= 12; t += 2) {
    src.run(0, 2 * kMs);
    tc.after_poll(t * kMs);
  }
  // It drops the GIL at 13 ms (dated 13 ms, seen at 14 ms) and sleeps in take_gil: all of the CPU since the
  // last read (1 ms) was before the drop.
  src.run(0, 1 * kMs, 0, 1);
  tc.role_changed(0, GilRole::kWaiting, 13 * kMs);
  tc.after_poll(14 * kMs);
  for (int64_t t = 16; t <= 22; t += 2) tc.after_poll(t * kMs);  // asleep: nothing grows
  tc.thread_removed(0, 22 * kMs);
  const auto v = samples(q);
  CHECK(cpu_in(v, GilRole::kHolding) == 10 * kMs);
  CHECK(time_in(v, GilRole::kHolding) == 10 * kMs);
  CHECK(cpu_in(v, GilRole::kWaiting) == 0);
  CHECK(time_in(v, GilRole::kWaiting) == 12 * kMs);
  // One piece per interval: the wait before, the hold, the wait after.
  // One window (22 ms): a record per role, the hold counted once, not preempted.
  REQUIRE(v.size() == 2);
  CHECK(v[0].role == GilRole::kWaiting);
  CHECK(v[1].role == GilRole::kHolding);
  CHECK(v[1].ts == 0);
  CHECK(v[1].dur == 22 * kMs);
  CHECK(v[1].holds == 1);
  CHECK(v[1].preempted_holds == 0);
  CHECK(v[1].slices == 1);  // switched out and in again: counted where it ended, with the hold
                            // out and in again: counted where it ended, with the hold
}

TEST_CASE(
    "counters: a waiter that takes the GIL runs from the take: the CPU of the stretch goes to the hold") {
  ScriptedCounters src;
  RecordQueue q(1024);
  ThreadCounters tc(src, q, 0, 8, kEvery2ms);
  tc.thread_added(0, 100, GilRole::kWaiting, 0);
  for (int64_t t = 2; t <= 8; t += 2) tc.after_poll(t * kMs);  // waiting, asleep: rate 0 is learnt
  // Woken at 8.5 ms, waits 0.5 ms for a CPU, takes the GIL at 9 ms (dated 9), computes until the poll at 10.
  src.run(0, 1 * kMs, kMs / 2, 1);
  tc.role_changed(0, GilRole::kHolding, 9 * kMs);
  tc.after_poll(10 * kMs);
  tc.thread_removed(0, 10 * kMs);
  const auto v = samples(q);
  CHECK(cpu_in(v, GilRole::kWaiting) == 0);
  CHECK(cpu_in(v, GilRole::kHolding) == 1 * kMs);
  // It waited in the run queue before it could take the GIL: the delay belongs to the wait.
  CHECK(delay_in(v, GilRole::kWaiting) == kMs / 2);
  CHECK(delay_in(v, GilRole::kHolding) == 0);
}

TEST_CASE("counters: a waiter that spins gets its CPU; without a known rate the split is by time") {
  SUBCASE("spinning waiter") {
    ScriptedCounters src;
    RecordQueue q(1024);
    ThreadCounters tc(src, q, 0, 8, kEvery2ms);
    tc.thread_added(0, 100, GilRole::kWaiting, 0);
    for (int64_t t = 2; t <= 8; t += 2) {
      src.run(0, 2 * kMs);
      tc.after_poll(t * kMs);
    }
    src.run(0, 2 * kMs);
    tc.role_changed(0, GilRole::kHolding, 9 * kMs);
    tc.after_poll(10 * kMs);
    tc.thread_removed(0, 10 * kMs);
    const auto v = samples(q);
    CHECK(cpu_in(v, GilRole::kWaiting) == 9 * kMs);
    CHECK(cpu_in(v, GilRole::kHolding) == 1 * kMs);
  }
  SUBCASE("no rate yet") {
    ScriptedCounters src;
    RecordQueue q(1024);
    ThreadCounters tc(src, q, 0, 8, kEvery2ms);
    tc.thread_added(0, 100, GilRole::kReleased, 0);
    src.run(0, 4 * kMs);
    tc.role_changed(0, GilRole::kWaiting, 3 * kMs);
    tc.after_poll(4 * kMs);
    tc.thread_removed(0, 4 * kMs);
    const auto v = samples(q);
    CHECK(cpu_in(v, GilRole::kReleased) == 3 * kMs);
    CHECK(cpu_in(v, GilRole::kWaiting) == 1 * kMs);
  }
}

TEST_CASE("counters: a long hold comes in 100 ms windows; a dropped-and-retaken GIL starts a new hold") {
  ScriptedCounters src;
  RecordQueue q(4096);
  ThreadCounters tc(src, q, 0, 8);  // the holder read every 4 ms: a window ends at the first read past 100 ms
  tc.thread_added(0, 100, GilRole::kHolding, 0);
  for (int64_t t = 2; t <= 250; t += 2) {
    src.run(0, 2 * kMs);
    tc.after_poll(t * kMs);
  }
  // The same poll sees it drop and take again (the sampler's "same holder, switch_number moved").
  tc.role_changed(0, GilRole::kReleased, 251 * kMs);
  tc.role_changed(0, GilRole::kHolding, 251 * kMs);
  src.run(0, 2 * kMs);
  tc.after_poll(252 * kMs);
  tc.thread_removed(0, 252 * kMs);
  const auto v = samples(q);
  int64_t total = 0;
  uint32_t holds = 0;
  REQUIRE(v.size() == 3);  // windows of about 100 ms: [0, 100], [100, 200], [200, 252]
  for (const auto& s : v) {
    CHECK(s.dur < 103 * kMs);
    CHECK(s.role == GilRole::kHolding);
    total += s.time_ns;
    holds += s.holds;
  }
  CHECK(total == 252 * kMs);
  CHECK(holds == 1);  // the retake; the first hold began before the thread was seen
  CHECK(cpu_in(v, GilRole::kHolding) == 252 * kMs);
}

TEST_CASE(
    "counters: perf counts follow the CPU, come with the next full read, scaled when the PMU was shared") {
  ScriptedCounters src;
  RecordQueue q(1024);
  ThreadCounters tc(src, q, 0, 8);
  PerfReading p;
  p.count = 2;
  src.slots[0].perf = p;
  tc.thread_added(0, 100, GilRole::kWaiting, 0);  // the group is ready: this read is its baseline
  tc.after_poll(4 * kMs);                         // asleep in take_gil; holder and waiters: schedstat only
  tc.after_poll(8 * kMs);
  // Takes the GIL at 9 ms, seen at 10: a full read, the counts of [0, 10] all with the hold's CPU.
  src.run(0, 1 * kMs);
  p.enabled_ns = p.running_ns = 1 * kMs;
  p.values = {100, 300};
  src.slots[0].perf = p;
  tc.role_changed(0, GilRole::kHolding, 9 * kMs);
  tc.after_poll(10 * kMs);
  // Holds, read at 14 and 18 without perf; drops at 19, seen at 20: the counts of [10, 20], counted half the
  // time (the PMU shared), doubled, all to the hold (the wait's rate is 0).
  src.run(0, 4 * kMs);
  tc.after_poll(14 * kMs);
  src.run(0, 4 * kMs);
  tc.after_poll(18 * kMs);
  src.run(0, 1 * kMs);
  p.enabled_ns = 11 * kMs;
  p.running_ns = 6 * kMs;
  p.values = {1100, 3300};
  src.slots[0].perf = p;
  tc.role_changed(0, GilRole::kWaiting, 19 * kMs);
  tc.after_poll(20 * kMs);
  // Gone: schedstat unreadable, the perf group still readable.
  p.enabled_ns = 13 * kMs;
  p.running_ns = 8 * kMs;
  p.values = {1110, 3320};
  src.slots[0].perf = p;
  src.slots[0].sched.reset();
  tc.thread_removed(0, 22 * kMs);
  const auto v = samples(q);
  // One window: the wait (with the gone thread's last counts) and the hold.
  REQUIRE(v.size() == 2);
  CHECK(v[0].role == GilRole::kWaiting);
  CHECK(v[0].count == 2);
  CHECK(v[0].time_ns == 10 * kMs);  // [0, 9] and [19, 20]: the last 2 ms had no scheduler figures
  CHECK(v[0].values[0] == 10);      // 2 ms enabled, 2 ms running: as read
  CHECK(v[0].values[1] == 20);
  CHECK(v[1].role == GilRole::kHolding);
  CHECK(v[1].cpu_ns == 10 * kMs);
  CHECK(v[1].values[0] == 100 + 2000);
  CHECK(v[1].values[1] == 300 + 6000);
}

TEST_CASE(
    "counters: a hold whose holder waited >= 1 ms for a CPU is preempted; its wait is summed over the hold") {
  ScriptedCounters src;
  RecordQueue q(1024);
  ThreadCounters tc(src, q, 0, 8, kEvery2ms);
  tc.thread_added(0, 100, GilRole::kWaiting, 0);
  tc.after_poll(2 * kMs);
  // Hold 1 [3, 13]: preempted twice, 0.6 ms each time (seen at the reads that follow): 1.2 ms in all.
  tc.role_changed(0, GilRole::kHolding, 3 * kMs);
  src.run(0, 1 * kMs);
  tc.after_poll(4 * kMs);
  src.run(0, 1 * kMs, 600'000, 1);
  tc.after_poll(6 * kMs);
  src.run(0, 1 * kMs, 600'000, 1);
  tc.after_poll(8 * kMs);
  src.run(0, 2 * kMs);
  tc.after_poll(10 * kMs);
  src.run(0, 2 * kMs);
  tc.after_poll(12 * kMs);
  src.run(0, 1 * kMs);
  tc.role_changed(0, GilRole::kWaiting, 13 * kMs);
  tc.after_poll(14 * kMs);
  // Hold 2 [15, 19]: one wait of 0.5 ms: not preempted.
  tc.role_changed(0, GilRole::kHolding, 15 * kMs);
  tc.after_poll(16 * kMs);
  src.run(0, 1 * kMs, 500'000, 1);
  tc.after_poll(18 * kMs);
  tc.role_changed(0, GilRole::kWaiting, 19 * kMs);
  tc.after_poll(20 * kMs);
  tc.thread_removed(0, 20 * kMs);
  const auto v = samples(q);
  REQUIRE(v.size() == 2);
  CHECK(v[1].role == GilRole::kHolding);
  CHECK(v[1].holds == 2);
  CHECK(v[1].preempted_holds == 1);
  CHECK(v[1].preempted_ns == 1'200'000);
  CHECK(v[1].run_delay_ns == 1'700'000);
}

TEST_CASE(
    "counters: what is read when: changes at once, the holder every 4 ms, waiters every 50 ms, the rest "
    "every 100 ms") {
  ScriptedCounters src;
  RecordQueue q(1 << 14);
  ThreadCounters tc(src, q, 0, 8);
  tc.thread_added(0, 100, GilRole::kHolding, 0);
  tc.thread_added(1, 101, GilRole::kReleased, 0);
  tc.thread_added(2, 102, GilRole::kWaiting, 0);
  tc.thread_added(3, 103, GilRole::kWaiting, 0);
  src.reads_of.clear();
  for (int64_t t = 1; t <= 1000; ++t) tc.after_poll(t * kMs / 10 * 10);  // a poll every ms for 1 s
  CHECK(src.reads_of[0] >= 240);
  CHECK(src.reads_of[0] <= 260);
  for (const size_t waiter : {2, 3}) {  // at 4 ms (its rate while it waits), then every 50 ms
    CHECK(src.reads_of[waiter] >= 18);
    CHECK(src.reads_of[waiter] <= 22);
  }
  CHECK(src.reads_of[1] >= 9);
  CHECK(src.reads_of[1] <= 11);
  // A change is read at the end of the poll that saw it, unless the thread was read less than 1 ms before.
  src.reads_of.clear();
  tc.role_changed(1, GilRole::kWaiting, 1000 * kMs);
  tc.after_poll(1001 * kMs + 500'000);
  CHECK(src.reads_of[1] == 1);
  tc.role_changed(1, GilRole::kReleased, 1001 * kMs + 600'000);
  tc.after_poll(1002 * kMs);
  CHECK(src.reads_of[1] == 1);  // too soon: left for a later poll
  tc.after_poll(1003 * kMs);
  CHECK(src.reads_of[1] == 2);
  std::vector<raw::ThreadSwitches> sw;
  samples(q, &sw);
  CHECK(sw.size() >= 2);  // each thread's first status read at once (a token each), then about every second
  // A new wait is read 4 ms in, then 50 ms apart again.
  src.reads_of.clear();
  tc.role_changed(2, GilRole::kHolding, 1010 * kMs);
  tc.after_poll(1010 * kMs);
  tc.role_changed(2, GilRole::kWaiting, 1020 * kMs);
  for (int64_t t = 1020; t <= 1100; ++t) tc.after_poll(t * kMs);
  CHECK(src.reads_of[2] == 4);  // the hold, the wait, 4 ms into it, 50 ms after that
}

TEST_CASE("sched stats: schedstat and status parse; garbage does not") {
  const auto s = parse_schedstat("123456 789 42\n");
  REQUIRE(s.has_value());
  CHECK(s->cpu_ns == 123456);
  CHECK(s->run_delay_ns == 789);
  CHECK(s->slices == 42);
  CHECK_FALSE(parse_schedstat("").has_value());
  CHECK_FALSE(parse_schedstat("12 x 3").has_value());
  const char* status =
      "Name:\tpython3\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t7\n";
  const auto c = parse_status_switches(status);
  REQUIRE(c.has_value());
  CHECK(c->voluntary == 150);
  CHECK(c->involuntary == 7);
  CHECK_FALSE(parse_status_switches("Name:\tx\n").has_value());
  // This very thread: its schedstat and status are there and grow.
  const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  TaskSchedStatFile f;
  f.reset(::getpid(), tid);
  const auto a = f.read();
  REQUIRE(a.has_value());
  volatile uint64_t sink = 0;
  for (int i = 0; i < 20'000'000; ++i) sink = sink + static_cast<uint64_t>(i);
  ::usleep(1000);  // switched out: schedstat is up to date after
  const auto b = f.read();
  REQUIRE(b.has_value());
  CHECK(b->cpu_ns > a->cpu_ns);
  CHECK(b->slices > a->slices);
  CHECK(read_task_switches(::getpid(), tid).has_value());
}

TEST_CASE("--counters: software events always, 'all' for every kind, an unknown name lists the valid ones") {
  const auto some = parse_counter_list("cycles,instructions");
  REQUIRE(some.size() == 6);
  CHECK(some[0] == raw::CounterKind::kTaskClock);
  CHECK(some[4] == raw::CounterKind::kCycles);
  CHECK(some[5] == raw::CounterKind::kInstructions);
  CHECK(parse_counter_list("all").size() == raw::kCounterKinds.size());
  CHECK(parse_counter_list("task-clock, cycles,cycles").size() == 5);
  try {
    parse_counter_list("cycles,cyclez");
    FAIL("an unknown name must be refused");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kUsage);
    const std::string what = e.what();
    CHECK(what.find("'cyclez'") != std::string::npos);
    CHECK(what.find("branch-misses") != std::string::npos);
    CHECK(what.find("all") != std::string::npos);
  }
}

TEST_CASE("perf: reasons in words; the software events count on this thread, or the probe says why not") {
  CHECK(perf_open_failure(raw::CounterKind::kCycles, ENOENT).find("not supported") != std::string::npos);
  CHECK(perf_open_failure(raw::CounterKind::kCycles, EACCES).find("perf_event_paranoid") !=
        std::string::npos);
  CHECK(perf_open_failure(raw::CounterKind::kTaskClock, EMFILE).find("descriptor") != std::string::npos);
  const auto all = parse_counter_list("all");
  const CounterPlan plan = probe_counters(all);
  CHECK(plan.kinds.size() + plan.unavailable.size() == all.size());  // each kind counted or named, once
  for (const auto& [name, why] : plan.unavailable) CHECK_FALSE(why.empty());
  if (plan.kinds.empty()) {
    MESSAGE("no perf counter here: " << plan.unavailable.front().second);
    return;
  }
  PerfGroup g;
  REQUIRE(g.open(0, plan.kinds) == 0);
  PerfReading a, b;
  REQUIRE(g.read(a));
  volatile uint64_t sink = 0;
  for (int i = 0; i < 10'000'000; ++i) sink = sink + static_cast<uint64_t>(i);
  REQUIRE(g.read(b));
  CHECK(b.count == plan.kinds.size());
  CHECK(b.enabled_ns > a.enabled_ns);
  if (plan.kinds.front() == raw::CounterKind::kTaskClock) CHECK(b.values[0] > a.values[0]);
}

TEST_CASE("perf: the opener opens a group for a thread, publishes it, and skips a thread gone before") {
  const std::vector<raw::CounterKind> kinds = {raw::CounterKind::kTaskClock};
  if (!probe_counters(kinds).unavailable.empty()) {
    MESSAGE("task-clock cannot be counted here: skipped");
    return;
  }
  PerfSlots slots(kinds, 4);
  PerfOpener opener(64);  // after the slots: stopped before they go (its commands point at them)
  const int32_t tid = static_cast<int32_t>(::syscall(SYS_gettid));
  slots.set_wanted(0, 1);
  opener.request_open(slots, 0, 1, tid);
  slots.set_wanted(1, 1);
  opener.request_open(slots, 1, 1, tid);
  slots.set_wanted(1, 0);  // gone before the opener got to it
  for (int i = 0; i < 200 && !slots.ready(0, 1); ++i) ::usleep(5000);
  REQUIRE(slots.ready(0, 1));
  CHECK_FALSE(slots.ready(1, 1));
  PerfReading r;
  CHECK(slots.read(0, r));
  CHECK(opener.opened() == 1);
  opener.request_close(slots, 0, 1);
}

TEST_CASE(
    "counters: a thread found during the recording is read when due; one that ends before is never read") {
  ScriptedCounters src;
  RecordQueue q(4096);
  ThreadCounters tc(src, q, 0, 8);
  tc.thread_added(0, 100, GilRole::kHolding, 0);  // at the first poll: read at once, the baseline
  CHECK(src.reads_of[0] == 1);
  tc.after_poll(1 * kMs);
  // A thread-per-request server's thread: found, and gone again before any read was due.
  tc.thread_added(1, 101, GilRole::kReleased, 2 * kMs);
  CHECK(src.reads_of[1] == 0);
  tc.after_poll(2 * kMs);
  tc.thread_removed(1, 3 * kMs);
  CHECK(src.reads_of[1] == 0);
  // One that lives on: its first read (its first change, 1 ms on) is only its baseline...
  tc.thread_added(2, 102, GilRole::kReleased, 4 * kMs);
  src.run(2, 7 * kMs);  // what it did before that read is not known to lie in the recording
  tc.role_changed(2, GilRole::kWaiting, 5 * kMs);
  tc.after_poll(6 * kMs);
  CHECK(src.reads_of[2] == 1);
  // ...and what follows is measured as for any thread.
  src.run(2, 3 * kMs);
  tc.role_changed(2, GilRole::kHolding, 8 * kMs);
  tc.after_poll(9 * kMs);
  tc.thread_removed(2, 10 * kMs);
  int64_t cpu_102 = 0;
  for (const auto& s : samples(q)) cpu_102 += s.tid == 102 ? s.cpu_ns : 0;
  CHECK(cpu_102 == 3 * kMs);
}

}  // namespace unit_thread_counters
