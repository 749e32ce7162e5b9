// gilspy top, window aggregation: synthetic event streams whose figures are worked out by hand in the
// comments, so a wrong clip, a double count or a lost stretch shows as a wrong number.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "cli/top/top_model.hpp"

namespace top = gilspy::top;
using top::Role;

// Named per file, so that the unity build can put test files together.
namespace unit_top_model {
namespace {

constexpr int64_t ms(double v) {
  return static_cast<int64_t>(v * 1'000'000);
}
constexpr uint32_t kId = 7;
constexpr int64_t kTid = 101, kTid2 = 102;

top::TopModel model_with_thread(int64_t start = 0) {
  top::TopModel m(start);
  m.add_process({kId, 4242, "python3 train.py", "3.12.1", 3, start});
  m.thread_started(kId, kTid, "MainThread", start);
  return m;
}

const top::ThreadRow* find(const top::TopSnapshot& s, int64_t tid) {
  for (const auto& p : s.processes) {
    for (const auto& t : p.threads) {
      if (t.tid == tid) return &t;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("top model: shares, holds per second, mean and longest in one window") {
  auto m = model_with_thread();
  m.hold(kId, kTid, ms(0), ms(200));
  m.wait(kId, kTid, ms(200), ms(300));
  m.hold(kId, kTid, ms(600), ms(100));
  const auto s = m.snapshot(ms(1000));
  REQUIRE(s.processes.size() == 1);
  const auto& p = s.processes[0];
  CHECK(p.pid == 4242);
  CHECK(p.command == "python3 train.py");
  CHECK(p.python_version == "3.12.1");
  CHECK(p.rank == 3);
  const auto* t = find(s, kTid);
  REQUIRE(t);
  CHECK(t->name == "MainThread");
  CHECK_FALSE(t->ended);
  // 300 ms held, 300 ms waited, 400 ms released out of a 1 s lifetime.
  CHECK(t->interval.hold_share == doctest::Approx(0.3));
  CHECK(t->interval.wait_share == doctest::Approx(0.3));
  CHECK(t->interval.released_share == doctest::Approx(0.4));
  CHECK(t->interval.holds == 2);
  CHECK(t->interval.holds_per_s == doctest::Approx(2.0));
  CHECK(t->interval.mean_hold_ns == ms(150));
  CHECK(t->interval.longest_hold_ns == ms(200));
  CHECK(t->interval.longest_wait_ns == ms(300));
  CHECK(p.interval.gil_busy_share == doctest::Approx(0.3));
  CHECK(p.total.gil_busy_share == doctest::Approx(0.3));
}

TEST_CASE("top model: a thread's share is of its lifetime inside the window") {
  auto m = model_with_thread();
  m.thread_started(kId, kTid2, "worker", ms(500));
  m.hold(kId, kTid2, ms(600), ms(250));
  const auto s = m.snapshot(ms(1000));
  const auto* t = find(s, kTid2);
  REQUIRE(t);
  CHECK(t->interval.lifetime_ns == ms(500));
  CHECK(t->interval.hold_share == doctest::Approx(0.5));                   // 250 of 500 ms
  CHECK(t->interval.holds_per_s == doctest::Approx(2.0));                  // 1 hold in half a second
  CHECK(s.processes[0].interval.gil_busy_share == doctest::Approx(0.25));  // of the process's 1 s
}

TEST_CASE("top model: an interval straddling two windows is split between them") {
  auto m = model_with_thread();
  const auto s1 = m.snapshot(ms(1000));
  CHECK(find(s1, kTid)->interval.hold_share == 0.0);
  m.hold(kId, kTid, ms(800), ms(600));  // [0.8 s, 1.4 s], arrives when it ends, in the second window
  const auto s2 = m.snapshot(ms(2000));
  const auto* t = find(s2, kTid);
  CHECK(s2.interval_start_ns == ms(1000));
  CHECK(t->interval.hold_share == doctest::Approx(0.4));  // the 400 ms after 1 s, of 1 s
  CHECK(t->interval.holds == 1);
  CHECK(t->interval.longest_hold_ns == ms(600));       // a hold's length is its full length
  CHECK(t->total.hold_share == doctest::Approx(0.3));  // all 600 ms of 2 s
  CHECK(s2.processes[0].total.gil_busy_share == doctest::Approx(0.3));
}

TEST_CASE("top model: an open long hold is counted in each window it spans, and once") {
  auto m = model_with_thread();
  m.open_state(kId, kTid, Role::kHolding, ms(500), ms(900));
  auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(0.5));  // [0.5, 1.0]
  CHECK(find(s, kTid)->interval.longest_hold_ns == ms(500));          // open for 500 ms so far
  CHECK(find(s, kTid)->interval.holds == 0);                          // not completed yet

  m.open_state(kId, kTid, Role::kHolding, ms(500), ms(1900));
  s = m.snapshot(ms(2000));
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(1.0));
  CHECK(s.processes[0].interval.gil_busy_share == doctest::Approx(1.0));

  m.hold(kId, kTid, ms(500), ms(1800));  // completes at 2.3 s
  m.wait(kId, kTid, ms(2300), ms(200));
  m.open_state(kId, kTid, Role::kHolding, ms(500), ms(2200));  // a stale report that crossed the completion
  s = m.snapshot(ms(3000));
  const auto* t = find(s, kTid);
  CHECK(t->interval.hold_share == doctest::Approx(0.3));  // only [2.0, 2.3] is new
  CHECK(t->interval.wait_share == doctest::Approx(0.2));
  CHECK(t->interval.holds == 1);
  CHECK(t->interval.longest_hold_ns == ms(1800));
  CHECK(t->total.hold_share == doctest::Approx(1.8 / 3.0));  // exactly the 1.8 s hold, not more
  CHECK(s.processes[0].total.gil_busy_share == doctest::Approx(1.8 / 3.0));

  s = m.snapshot(ms(4000));  // nothing open any more: the stale report must not keep crediting
  CHECK(find(s, kTid)->interval.hold_share == 0.0);
  CHECK(find(s, kTid)->total.hold_share == doctest::Approx(1.8 / 4.0));
}

TEST_CASE("top model: an open interval first reported late still adds up exactly in the totals") {
  auto m = model_with_thread();
  m.snapshot(ms(1000));  // the hold began at 0.2 s but nobody said so yet
  m.open_state(kId, kTid, Role::kHolding, ms(200), ms(1500));
  auto s = m.snapshot(ms(2000));
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(1.0));
  m.hold(kId, kTid, ms(200), ms(2200));  // [0.2, 2.4]
  s = m.snapshot(ms(3000));
  const auto* t = find(s, kTid);
  CHECK(t->interval.hold_share == doctest::Approx(0.4));     // [2.0, 2.4]
  CHECK(t->total.hold_share == doctest::Approx(2.2 / 3.0));  // the whole hold, once
}

TEST_CASE("top model: an open wait that turns into a hold") {
  auto m = model_with_thread();
  m.open_state(kId, kTid, Role::kWaiting, ms(0), ms(950));
  auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->interval.wait_share == doctest::Approx(1.0));
  CHECK(find(s, kTid)->interval.longest_wait_ns == ms(1000));
  m.wait(kId, kTid, ms(0), ms(1250));
  m.open_state(kId, kTid, Role::kHolding, ms(1250), ms(1900));
  s = m.snapshot(ms(2000));
  const auto* t = find(s, kTid);
  CHECK(t->interval.wait_share == doctest::Approx(0.25));
  CHECK(t->interval.hold_share == doctest::Approx(0.75));
  CHECK(t->interval.released_share == doctest::Approx(0.0));
  CHECK(t->total.wait_share == doctest::Approx(1.25 / 2.0));
}

TEST_CASE("top model: a released open state stops the crediting") {
  auto m = model_with_thread();
  m.open_state(kId, kTid, Role::kHolding, ms(0), ms(400));
  m.hold(kId, kTid, ms(0), ms(500));
  m.open_state(kId, kTid, Role::kReleased, ms(500), ms(900));
  const auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(0.5));
  CHECK(find(s, kTid)->interval.released_share == doctest::Approx(0.5));
}

TEST_CASE("top model: reset restarts the totals") {
  auto m = model_with_thread();
  m.hold(kId, kTid, ms(0), ms(900));
  auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->total.hold_share == doctest::Approx(0.9));
  m.reset(ms(2000));
  m.hold(kId, kTid, ms(1500), ms(1000));  // [1.5, 2.5]: only the half after the reset counts
  s = m.snapshot(ms(3000));
  const auto* t = find(s, kTid);
  CHECK(s.totals_start_ns == ms(2000));
  CHECK(s.interval_start_ns == ms(2000));
  CHECK(t->total.lifetime_ns == ms(1000));
  CHECK(t->total.hold_share == doctest::Approx(0.5));
  CHECK(t->total.holds == 1);
  CHECK(t->total.longest_hold_ns == ms(1000));
  CHECK(s.processes[0].total.gil_busy_share == doctest::Approx(0.5));
}

TEST_CASE("top model: ended threads stay, flagged, for 3 snapshots, then disappear") {
  auto m = model_with_thread();
  m.thread_started(kId, kTid2, "worker", ms(0));
  m.hold(kId, kTid2, ms(100), ms(100));
  m.thread_ended(kId, kTid2, ms(500));
  auto s = m.snapshot(ms(1000));
  const auto* t = find(s, kTid2);
  REQUIRE(t);
  CHECK(t->ended);
  CHECK(t->interval.lifetime_ns == ms(500));
  CHECK(t->interval.hold_share == doctest::Approx(0.2));  // 100 of its 500 ms
  for (int i = 2; i <= 3; ++i) {
    s = m.snapshot(ms(1000 * i));
    REQUIRE(find(s, kTid2));
    CHECK(find(s, kTid2)->ended);
    CHECK(find(s, kTid2)->interval.lifetime_ns == 0);
  }
  s = m.snapshot(ms(4000));
  CHECK(find(s, kTid2) == nullptr);
  CHECK(find(s, kTid) != nullptr);
  CHECK(s.processes[0].threads.size() == 1);
}

TEST_CASE("top model: a reused thread id starts afresh") {
  auto m = model_with_thread();
  m.thread_started(kId, kTid2, "old", ms(0));
  m.hold(kId, kTid2, ms(0), ms(400));
  m.thread_ended(kId, kTid2, ms(400));
  m.thread_started(kId, kTid2, "new", ms(600));
  const auto s = m.snapshot(ms(1000));
  const auto* t = find(s, kTid2);
  CHECK(t->name == "new");
  CHECK_FALSE(t->ended);
  CHECK(t->interval.hold_share == 0.0);
  CHECK(t->interval.lifetime_ns == ms(400));
}

TEST_CASE("top model: waiters are averaged over time") {
  auto m = model_with_thread();
  m.waiters(kId, ms(0), 0);
  m.waiters(kId, ms(250), 2);
  m.waiters(kId, ms(750), 0);
  auto s = m.snapshot(ms(1000));
  REQUIRE(s.processes[0].interval.mean_waiters);
  CHECK(*s.processes[0].interval.mean_waiters == doctest::Approx(1.0));  // 2 waiters for half the time
  CHECK(*s.processes[0].interval.max_waiters == 2);
  m.waiters(kId, ms(1500), 4);
  s = m.snapshot(ms(2000));
  CHECK(*s.processes[0].interval.mean_waiters == doctest::Approx(2.0));  // 0 for 0.5 s, then 4 for 0.5 s
  CHECK(*s.processes[0].interval.max_waiters == 4);
  CHECK(*s.processes[0].total.mean_waiters == doctest::Approx(1.5));  // (1 s x 1 + 1 s x 2) / 2 s
  s = m.snapshot(ms(3000));
  CHECK(*s.processes[0].interval.mean_waiters == doctest::Approx(4.0));  // carried over
  CHECK(*s.processes[0].interval.max_waiters == 4);
}

TEST_CASE("top model: no waiter count, no waiter figures") {
  auto m = model_with_thread();
  const auto s = m.snapshot(ms(1000));
  CHECK_FALSE(s.processes[0].interval.mean_waiters);
  CHECK_FALSE(s.processes[0].interval.max_waiters);
  CHECK_FALSE(s.processes[0].interval.poll_rate_hz);  // no stats tick either
}

TEST_CASE("top model: poll statistics become rates, coverage and a warning when the sampler falls behind") {
  auto m = model_with_thread();
  m.stats(kId, ms(1000), {10000, 10, 0, 90, 100}, {{"gc collections", 3, ""}});
  auto s = m.snapshot(ms(1000));
  auto& p = s.processes[0];
  CHECK(*p.interval.poll_rate_hz == doctest::Approx(10000));
  CHECK(*p.interval.handoffs_per_s == doctest::Approx(100));
  CHECK(*p.interval.coverage == doctest::Approx(0.9));
  CHECK(p.interval.late_polls == 10);
  CHECK(p.warning.empty());  // 10 late of 10000 is fine
  REQUIRE(p.extra.size() == 1);
  CHECK(p.extra[0].label == "gc collections");
  CHECK(p.extra[0].value == 3);

  m.stats(kId, ms(2000), {15000, 400, 200, 140, 200}, {});
  s = m.snapshot(ms(2000));
  auto& q = s.processes[0];
  CHECK(*q.interval.poll_rate_hz == doctest::Approx(5000));
  CHECK(*q.interval.coverage == doctest::Approx(0.5));  // 50 of 100 hand-offs seen
  CHECK(q.interval.late_polls == 390);
  CHECK(q.interval.missed_polls == 200);
  CHECK(*q.total.poll_rate_hz == doctest::Approx(7500));
  CHECK(*q.total.coverage == doctest::Approx(0.7));
  CHECK(q.warning.find("behind") != std::string::npos);
  CHECK(q.extra.size() == 1);  // a tick without extras keeps the last ones

  s = m.snapshot(ms(6000));  // four seconds without statistics
  CHECK(s.processes[0].warning.find("no poll statistics") != std::string::npos);
  CHECK_FALSE(s.processes[0].interval.poll_rate_hz);
}

TEST_CASE("top model: an ended process stops counting at its end and goes after 3 snapshots") {
  auto m = model_with_thread();
  m.open_state(kId, kTid, Role::kHolding, ms(0), ms(100));
  m.process_ended(kId, ms(400));
  auto s = m.snapshot(ms(1000));
  REQUIRE(s.processes.size() == 1);
  CHECK(s.processes[0].ended);
  CHECK(s.processes[0].interval.duration_ns == ms(400));
  CHECK(s.processes[0].interval.gil_busy_share == doctest::Approx(1.0));
  CHECK(find(s, kTid)->ended);
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(1.0));
  m.snapshot(ms(2000));
  CHECK(m.snapshot(ms(3000)).processes.size() == 1);
  CHECK(m.snapshot(ms(4000)).processes.empty());
}

TEST_CASE("top model: a late record of a process no longer shown does not bring it back nameless") {
  auto m = model_with_thread();
  m.process_ended(kId, ms(400));
  for (int i = 1; i <= top::kEndedSnapshotsShown; ++i) m.snapshot(ms(1000 * i));
  REQUIRE(m.snapshot(ms(4000)).processes.empty());
  // Its last stats tick and a thread's end, delivered after it was dropped.
  m.stats(kId, ms(4100), {.polls = 10});
  m.thread_ended(kId, kTid, ms(4100));
  CHECK(m.snapshot(ms(5000)).processes.empty());
}

TEST_CASE("top model: events before add_process are kept") {
  top::TopModel m(0);
  m.hold(kId, kTid, ms(0), ms(100));
  m.add_process({kId, 99, "cmd", "3.11.7", 0, -1});
  const auto s = m.snapshot(ms(1000));
  REQUIRE(s.processes.size() == 1);
  CHECK(s.processes[0].pid == 99);
  CHECK(find(s, kTid)->interval.hold_share == doctest::Approx(0.1));
}

TEST_CASE("top model: each window's ±95 comes from the sampler's variance added during it") {
  auto m = model_with_thread();
  // No variance reported yet: not known.
  auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->interval.share_ci95 < 0);
  // By 1.5 s the sampler's running variance is (5 ms)² (its whole life), by 2.9 s (13 ms)².
  m.open_state(kId, kTid, Role::kHolding, ms(1200), ms(1500), 25e12);
  m.open_state(kId, kTid, Role::kHolding, ms(1200), ms(2900), 169e12);
  s = m.snapshot(ms(2000));
  // The window (1 s .. 2 s) holds all 169e12 of it: 1.96 * 13 ms / 1 s.
  CHECK(find(s, kTid)->interval.share_ci95 == doctest::Approx(1.96 * 0.013));
  CHECK(find(s, kTid)->total.share_ci95 == doctest::Approx(1.96 * 0.013 / 2));
  m.open_state(kId, kTid, Role::kHolding, ms(1200), ms(3900), 169e12 + 144e12);
  s = m.snapshot(ms(3000));
  // The next window only what was added since: (12 ms)².
  CHECK(find(s, kTid)->interval.share_ci95 == doctest::Approx(1.96 * 0.012));
}

TEST_CASE("top model: a thread's end brings its final variance into the last window") {
  auto m = model_with_thread();
  m.open_state(kId, kTid, Role::kHolding, ms(0), ms(500), 25e12);  // (5 ms)² by 0.5 s
  auto s = m.snapshot(ms(1000));
  CHECK(find(s, kTid)->interval.share_ci95 == doctest::Approx(1.96 * 0.005));
  m.thread_ended(kId, kTid, ms(1500), 13'000'000);  // (13 ms)² over its life: (12 ms)² of it since
  s = m.snapshot(ms(2000));
  CHECK(find(s, kTid)->interval.share_ci95 == doctest::Approx(1.96 * 0.012 / 0.5));
}

}  // namespace unit_top_model
