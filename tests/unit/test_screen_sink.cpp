// The screen sink of `gilspy top`: a snapshot per stats tick, taken once the tick's records are in and before
// any later record; none for the tick polling ends with unless the targets exited; a target whose threads all
// ended is shown ended.
#include <doctest/doctest.h>

#include <vector>

#include "cli/screen_sink.hpp"

namespace cli = gilspy::cli;
namespace raw = gilspy::raw;
namespace top = gilspy::top;

// Named per file, so that the unity build can put test files together.
namespace unit_screen_sink {
namespace {

constexpr int64_t ms(double v) {
  return static_cast<int64_t>(v * 1'000'000);
}

struct Fixture {
  gilspy::sampler::Interpreter interp;
  cli::SessionTarget target;
  gilspy::sampler::LoopCounters counters;
  std::vector<top::TopSnapshot> snaps;
  std::vector<bool> lasts;
  cli::ScreenSink sink{[this](top::TopSnapshot s, bool last) {
    snaps.push_back(std::move(s));
    lasts.push_back(last);
  }};

  Fixture() {
    target.id = 3;
    target.pid = 4242;
    target.command = "python3 train.py";
    target.interp = &interp;
    sink.start(target);
  }
  void rec(const raw::Record& r) { sink.record(target, r); }
  void drain_end(bool polling_ended = false) { sink.stats({counters, 0, polling_ended}); }
  void tick(int64_t ts, int64_t tid, raw::GilRole role, int64_t since) {
    rec(raw::Stats{.ts = ts, .polls = 10});
    rec(raw::ThreadState{.tid = tid, .ts = ts, .role = role, .since = since});
  }
};

const top::ThreadRow& thread(const top::TopSnapshot& s, int64_t tid) {
  for (const auto& t : s.processes.at(0).threads) {
    if (t.tid == tid) return t;
  }
  FAIL("no thread " << tid);
  throw;
}

}  // namespace

TEST_CASE("screen sink: the snapshot closes at the tick, with the open hold, before later records") {
  Fixture f;
  f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
  f.rec(raw::Hold{.tid = 11, .ts = ms(0), .dur = ms(400)});
  f.tick(ms(1000), 11, raw::GilRole::kHolding, ms(600));  // holding since 600 ms, still open at the tick
  f.drain_end();
  CHECK(f.snaps.empty());                                      // the tick's records may still be coming in
  f.rec(raw::Hold{.tid = 11, .ts = ms(600), .dur = ms(500)});  // ends after the tick: the tick is complete
  REQUIRE(f.snaps.size() == 1);
  const auto& s = f.snaps[0];
  CHECK(s.now_ns == ms(1000));
  CHECK(s.processes.at(0).pid == 4242);
  CHECK(thread(s, 11).name == "MainThread");
  CHECK(thread(s, 11).interval.hold_share == doctest::Approx(0.8));  // 400 + 400 of the open hold
  f.drain_end();
  CHECK(f.snaps.size() == 1);
}

TEST_CASE("screen sink: a tick from an earlier drain is shown at the end of the next one") {
  Fixture f;
  f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
  f.tick(ms(1000), 11, raw::GilRole::kReleased, 0);
  f.drain_end();
  CHECK(f.snaps.empty());
  f.drain_end();  // nothing new: the tick was complete
  REQUIRE(f.snaps.size() == 1);
  CHECK(!f.lasts[0]);
}

TEST_CASE("screen sink: the tick polling ends with is not a snapshot, unless the targets exited") {
  SUBCASE("stopped (q, -n, a signal)") {
    Fixture f;
    f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
    f.tick(ms(300), 11, raw::GilRole::kReleased, 0);
    f.drain_end(true);
    f.sink.finish({.stop_reason = "stopped", .end_ns = ms(300), .figures = {}});
    CHECK(f.snaps.empty());
  }
  SUBCASE("target exited") {
    Fixture f;
    f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
    f.rec(raw::Hold{.tid = 11, .ts = 0, .dur = ms(300)});
    f.rec(raw::ThreadEnd{.tid = 11, .ts = ms(300)});
    f.rec(raw::Stats{.ts = ms(300)});
    f.drain_end(true);
    f.sink.finish({.stop_reason = "target exited", .end_ns = ms(300), .figures = {}});
    REQUIRE(f.snaps.size() == 1);
    CHECK(f.lasts[0]);
    CHECK(f.snaps[0].processes.at(0).ended);
    CHECK(thread(f.snaps[0], 11).ended);
    CHECK(thread(f.snaps[0], 11).interval.hold_share == doctest::Approx(1.0));
  }
}

TEST_CASE(
    "screen sink: a target that exits right after a tick ends on that tick's interval, not an empty one") {
  Fixture f;
  f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
  f.rec(raw::Hold{.tid = 11, .ts = 0, .dur = ms(800)});
  f.tick(ms(1000), 11, raw::GilRole::kReleased, ms(800));
  f.drain_end();
  f.drain_end();  // the tick is shown
  REQUIRE(f.snaps.size() == 1);
  f.rec(raw::ThreadEnd{.tid = 11, .ts = ms(1000.2)});
  f.drain_end(true);
  f.sink.finish({.stop_reason = "target exited", .end_ns = ms(1000.5), .figures = {}});
  REQUIRE(f.snaps.size() == 2);
  const top::TopSnapshot& last = f.snaps[1];
  CHECK(f.lasts[1]);
  CHECK(last.processes.at(0).ended);
  CHECK(thread(last, 11).ended);
  // The interval shown is the one before the exit (it had polls), not the 0.5 ms after the tick.
  CHECK(last.interval_start_ns == 0);
  CHECK(last.now_ns == ms(1000));
  CHECK(thread(last, 11).interval.hold_share == doctest::Approx(0.8));
  CHECK(last.processes.at(0).interval.poll_rate_hz.has_value());
  // The totals run to the end.
  CHECK(thread(last, 11).total.hold_share == doctest::Approx(0.8).epsilon(0.01));
}

TEST_CASE("screen sink: one tick of several targets, each with its stack statistics, is one snapshot") {
  Fixture f;
  cli::SessionTarget child = f.target;
  child.id = 4;
  child.pid = 4243;
  f.sink.start(child);
  f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
  f.sink.record(child, raw::ThreadStart{.tid = 21, .ts = ms(100), .name = "MainThread"});
  // The loop's stats tick: each target's Stats, thread states and StackStats, one target after the other.
  f.tick(ms(1000), 11, raw::GilRole::kHolding, 0);
  f.rec(raw::StackStats{.ts = ms(1000)});
  f.sink.record(child, raw::Stats{.ts = ms(1000), .polls = 10});
  f.sink.record(
      child, raw::ThreadState{.tid = 21, .ts = ms(1000), .role = raw::GilRole::kHolding, .since = ms(100)});
  f.sink.record(child, raw::StackStats{.ts = ms(1000)});
  f.drain_end();
  f.drain_end();
  REQUIRE(f.snaps.size() == 1);
  const top::TopSnapshot& s = f.snaps[0];
  REQUIRE(s.processes.size() == 2);
  CHECK(s.processes[0].interval.poll_rate_hz.has_value());
  CHECK(s.processes[1].interval.poll_rate_hz.has_value());
  CHECK(s.processes[1].interval.gil_busy_share == doctest::Approx(0.9));  // held from 100 ms of the 1 s
}

TEST_CASE("screen sink: a target whose threads have all ended is shown ended while polling goes on") {
  Fixture f;
  f.rec(raw::ThreadStart{.tid = 11, .ts = 0, .name = "MainThread"});
  f.rec(raw::ThreadEnd{.tid = 11, .ts = ms(500)});
  f.drain_end();
  f.rec(raw::Stats{.ts = ms(1000)});
  f.drain_end();
  f.drain_end();
  REQUIRE(f.snaps.size() == 1);
  CHECK(f.snaps[0].processes.at(0).ended);
}

}  // namespace unit_screen_sink
