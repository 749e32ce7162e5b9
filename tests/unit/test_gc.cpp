// The garbage collector on the timeline (issue 9): the sampler's GC tracker driven through fake memory
// (a 3.11 interpreter whose GC state the test edits between polls), the decoding of 3.14's incremental counts
// and 3.15's ring buffers, the raw lines, the summary, the trace's nesting and the live view's figures.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <variant>
#include <vector>

#include "cli/gc_summary_lines.hpp"
#include "cli/top/gc_format.hpp"
#include "cli/top/top_model.hpp"
#include "convert/chrome_trace.hpp"
#include "convert/gc_trace.hpp"
#include "cpython_layouts/layout.hpp"
#include "raw/gc_lines.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"
#include "sampler/gc/gc_sample.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "support/fake_memory_reader.hpp"
#include "support/fake_target.hpp"
#include "support/trace_check.hpp"

using namespace gilspy;
using namespace gilspy::sampler;

// Named per file, so that the unity build can put test files together.
namespace unit_gc {
using namespace gilspy::sampler::fake;
namespace {

// The fake 3.11 interpreter with two threads (100, 101), 100 holding the GIL throughout, and a GC state at
// interp + layout.gc.offset.
struct GcTarget : FakeTarget {
  int64_t collections[3] = {0, 0, 0}, collected[3] = {0, 0, 0};

  // near_gil: the GC state 512 bytes after the GIL (as in 3.12+'s interpreter struct): read in the GIL's
  // region.
  explicit GcTarget(bool near_gil = false) {
    interp.gc_addr = near_gil ? kGil + 512 : kInterp + layout.gc.offset;
    tids = {100, 101};
    set_threads({0, 1});
    gil(1, tstate(0), 1);
    for (int g = 0; g < 3; ++g) {
      mem.put(generation(g), layout.gc.generation_threshold, g == 0 ? 700 : 10);
    }
    enabled(true);
  }
  uint64_t gc(uint32_t off) const { return interp.gc_addr + off; }
  uint64_t generation(int g) const { return gc(layout.gc.generations + g * layout.gc.generation_stride); }
  uint64_t stats_entry(int g) const { return gc(layout.gc.stats + g * layout.gc.stats_stride); }
  void waiters(uint32_t n) {
    mem.put<uint32_t>(kGil + layout.gil.cond + layouts::kGlibc.cond_wrefs.off, n << 3);
  }
  void enabled(bool on) { mem.put(interp.gc_addr, layout.gc.enabled, on ? 1 : 0); }
  void collecting(bool on) { mem.put(interp.gc_addr, layout.gc.collecting, on ? 1 : 0); }
  void count(int g, int32_t n) { mem.put(generation(g), layout.gc.generation_count, n); }
  // `n` collections of generation g ended, freeing `freed` objects in all.
  void collected_now(int g, int64_t n, int64_t freed) {
    collections[g] += n;
    collected[g] += freed;
    mem.put(stats_entry(g), layout.gc.stats_collections, collections[g]);
    mem.put(stats_entry(g), layout.gc.stats_collected, collected[g]);
  }
};

// Thread 100 + `thread` (0 or 1) takes the GIL, the `switches`-th hand-off; the other one waits in take_gil.
void hand_gil(GcTarget& t, ScriptedTasks& tasks, uint64_t switches, int thread) {
  t.mem.put(kGil, t.layout.gil.last_holder, kTstates + static_cast<uint64_t>(thread) * 0x1000);
  t.mem.put(kGil, t.layout.gil.switch_number, switches);
  tasks.state[100 + thread] = TaskState::kOtherSyscall;
  tasks.state[101 - thread] = TaskState::kGilCond;
}

// The tests poll every microsecond: read the GC state at each of them.
const SamplerOptions kEveryPoll{.gc_read_period_ns = 0};

template <class Kind>
std::vector<Kind> all_of(const std::vector<raw::Record>& records) {
  std::vector<Kind> out;
  for (const auto& r : records) {
    if (const auto* x = std::get_if<Kind>(&r)) out.push_back(*x);
  }
  return out;
}

// Every counter move, counted once: timed collections with a generation plus untimed ones, per generation.
std::vector<uint64_t> counted(const std::vector<raw::Record>& events) {
  std::vector<uint64_t> n(3, 0);
  for (const auto& c : all_of<raw::GcCollection>(events)) {
    if (c.generation >= 0) ++n[static_cast<size_t>(c.generation)];
  }
  for (const auto& u : all_of<raw::GcUntimed>(events)) n[static_cast<size_t>(u.generation)] += u.n;
  return n;
}

// The Chrome trace convert makes of a raw file (pid 1, Python 3.12.1) whose events `write` writes.
std::string converted_trace(const std::function<void(raw::Writer&)>& write) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "gilspy_gc_trace_XXXXXX").string();
  REQUIRE(::mkdtemp(dir.data()) != nullptr);
  const std::string raw_path = dir + "/GIL_1_rank_0.json", trace_path = dir + "/GIL_1_rank_0.trace.json";
  raw::Meta meta;
  meta.gilspy_version = "test";
  meta.pid = 1;
  meta.python_version = "3.12.1";
  meta.monotonic_ns = 1'000'000'000;
  meta.realtime_ns = 1'700'000'000'123'456'789;
  meta.rate_hz = 10000;
  {
    raw::Writer w(raw_path, meta);
    write(w);
  }
  gilspy::convert::convert_to_chrome_trace({raw_path}, trace_path);
  std::ifstream in(trace_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove_all(dir, ec);
  return text;
}

}  // namespace

TEST_CASE("gc tracker: a collection seen running, its generation from the counter, its waiters") {
  for (const bool near_gil : {false, true}) {
    CAPTURE(near_gil);
    GcTarget t(near_gil);
    ScriptedTasks tasks;
    RecordQueue q(4096);
    ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
    tasks.state[101] = TaskState::kGilCond;
    t.waiters(1);
    t.count(0, 650);
    s.poll(1000);
    t.collecting(true);
    t.count(0, 0);
    s.poll(2000);  // began in (1000, 2000): at 1500
    CHECK(s.activity().collecting);
    t.collected_now(2, 1, 50);  // the counter moves while `collecting` is still 1
    s.poll(3000);
    t.collecting(false);
    s.poll(4000);  // ended in (3000, 4000): at 3500
    CHECK_FALSE(s.activity().collecting);
    t.collected_now(0, 3, 7);  // three collections between two polls
    s.poll(5000);
    t.enabled(false);
    s.poll(6000);
    // The poll's one read: the GIL (with the GC state when it lies beside it), the last holder's identity
    // word, and the GC state when it does not.
    CHECK(t.mem.last_regions() == (near_gil ? 2u : 3u));
    s.finish(7000);
    const auto events = drain(q);

    const auto c = all_of<raw::GcCollection>(events);
    REQUIRE(c.size() == 1);
    CHECK(c[0].ts == 1500);
    CHECK(c[0].dur == 2000);
    CHECK(c[0].generation == 2);
    CHECK(c[0].collected == 50);
    CHECK(c[0].tid == 100);
    CHECK(c[0].hold_lead == 500);  // 100 was seen holding from the first poll (1000)
    CHECK(c[0].held_dur == 2000);
    CHECK(c[0].waiters == 1);
    CHECK(c[0].wait_ns == 2000);  // 101 waited through it
    const auto u = all_of<raw::GcUntimed>(events);
    REQUIRE(u.size() == 1);
    CHECK(u[0].generation == 0);
    CHECK(u[0].n == 3);
    CHECK(u[0].collected == 7);
    CHECK(u[0].ts == 4000);
    CHECK(u[0].window == 1000);
    const auto settings = all_of<raw::GcSettings>(events);
    REQUIRE(settings.size() == 2);
    CHECK(settings[0].enabled);
    CHECK(settings[0].threshold[0] == 700);
    CHECK_FALSE(settings[1].enabled);
    CHECK(settings[1].ts == 5500);
    const auto counts = all_of<raw::GcCounts>(events);
    REQUIRE(counts.size() >= 3);
    CHECK(counts[0].count[0] == 650);
    CHECK(counts[1].count[0] == 0);  // at the start
    CHECK(counted(events) == std::vector<uint64_t>{3, 0, 1});
  }
}

TEST_CASE("gc tracker: a counter read lower than before (a ring entry from a lap ago) counts nothing") {
  // 3.15 moves a ring buffer's index before it writes the entry there: one reading sees an old entry. The
  // next, right one must not count the lap between them as collections.
  GcTarget t;
  ScriptedTasks tasks;
  RecordQueue q(4096);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
  t.collected_now(0, 40, 400);
  s.poll(1000);
  t.mem.put(t.stats_entry(0), t.layout.gc.stats_collections, 30);  // the stale entry: 10 collections ago
  s.poll(2000);
  t.collected_now(0, 1, 3);  // the real entry, one collection on
  s.poll(3000);
  s.finish(4000);
  CHECK(counted(drain(q)) == std::vector<uint64_t>{1, 0, 0});
}

TEST_CASE("gc tracker: back-to-back collections in one stretch are split where the first counter moved") {
  GcTarget t;
  ScriptedTasks tasks;
  RecordQueue q(4096);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
  s.poll(1000);
  t.collecting(true);
  s.poll(2000);  // A began at 1500
  t.collected_now(2, 1, 10);
  s.poll(3000);  // A's counter moved: A ended in (2000, 3000); B, or A's stop callbacks, runs now
  t.collected_now(0, 1, 1);
  s.poll(4000);  // B ended too: so A ended at 2500 and B began there
  t.collecting(false);
  s.poll(5000);
  s.finish(6000);
  const auto events = drain(q);
  const auto c = all_of<raw::GcCollection>(events);
  REQUIRE(c.size() == 2);
  CHECK(c[0].generation == 2);
  CHECK(c[0].ts == 1500);
  CHECK(c[0].dur == 1000);
  CHECK(c[1].generation == 0);
  CHECK(c[1].ts == 2500);
  CHECK(c[1].dur == 2000);
  CHECK(counted(events) == std::vector<uint64_t>{1, 0, 1});
}

TEST_CASE(
    "gc tracker: a collector whose start callback handed the GIL over is still the collector, on its lane in "
    "the hold the collection ran in") {
  GcTarget t;
  ScriptedTasks tasks;
  RecordQueue q(4096);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
  auto hand_to = [&, switches = uint64_t{1}](int thread) mutable { hand_gil(t, tasks, ++switches, thread); };
  tasks.state[101] = TaskState::kGilCond;
  t.waiters(1);
  s.poll(1000);  // 100 holds, 101 waits
  // 100 sets `collecting`; its start callback (Python code) hands the GIL to 101 before the next poll.
  t.collecting(true);
  hand_to(1);
  s.poll(2000);  // began at 1500, seen with 101 holding
  s.poll(3000);
  hand_to(0);  // back to 100 at 3500: the collection proper
  for (int64_t at = 4000; at <= 6000; at += 1000) s.poll(at);
  t.collected_now(1, 1, 9);
  s.poll(7000);  // its counter moved while 100 held the GIL throughout (6000, 7000]
  t.collecting(false);
  s.poll(8000);  // ended at 7500
  s.finish(9000);
  const auto events = drain(q);
  const auto c = all_of<raw::GcCollection>(events);
  REQUIRE(c.size() == 1);
  CHECK(c[0].tid == 100);
  CHECK(c[0].ts == 1500);
  CHECK(c[0].dur == 6000);
  CHECK(c[0].generation == 1);
  CHECK(c[0].held_from == 2000);  // its hold from 3500
  CHECK(c[0].held_dur == 4000);
  CHECK(c[0].hold_lead == 0);
  CHECK(c[0].waiters == 2);     // 100 while 101 ran (1500-3500), 101 through the collection proper
  CHECK(c[0].wait_ns == 6000);  // (3500-7500)

  // On 100's lane inside its hold from 3500; the whole collection on the GC lane.
  const std::string text = converted_trace([&](raw::Writer& w) {
    w.write(raw::ThreadStart{.tid = 100, .ts = 0, .tstate = 1, .name = "MainThread", .ns_tid = 0});
    w.write(raw::ThreadStart{.tid = 101, .ts = 0, .tstate = 2, .name = "spinner", .ns_tid = 0});
    for (const auto& r : events) w.write(r);
    w.finish({{"duration_ns", 9000}});
  });
  const auto check = gilspy::test::check_chrome_trace(text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems[0]));
  const auto doc = nlohmann::json::parse(text);
  std::vector<double> on_lane, holds_100;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e["name"] == "gc" && e["tid"] == 100) on_lane.push_back(e["ts"].get<double>());
    if (e["name"] == "hold_gil" && e["tid"] == 100) holds_100.push_back(e["ts"].get<double>());
  }
  REQUIRE(on_lane.size() == 1);
  REQUIRE(holds_100.size() == 2);
  CHECK(on_lane[0] == doctest::Approx(holds_100[1]));  // starts with the hold from 3500
}

TEST_CASE(
    "gc tracker: a collector that hands the GIL over in its start and stop callbacks is named though the "
    "other thread held more of the collection") {
  // The e2e gc_timeline test on a loaded machine (CI): the spinner held 14.6 ms in the start callback and
  // more after the stop callback, the collector its 5.8 ms and the 19.8 ms of the collection proper. `late`:
  // the poll that sees the counter move came late, past its window's start (6500), so the hand-off in it is
  // dated at the poll before (7000): that hold began inside the window all the same.
  for (const bool late : {false, true}) {
    CAPTURE(late);
    GcTarget t;
    ScriptedTasks tasks;
    RecordQueue q(4096);
    ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
    auto hand_to = [&, switches = uint64_t{1}](int thread) mutable {
      hand_gil(t, tasks, ++switches, thread);
    };
    tasks.state[101] = TaskState::kGilCond;
    t.waiters(1);
    s.poll(1000);  // 100 holds, 101 waits
    t.collecting(true);
    hand_to(1);  // 100's start callback hands the GIL to 101, which holds it 4000 ns
    for (int64_t at = 2000; at <= 5000; at += 1000) s.poll(at);
    hand_to(0);  // back to 100 at 5500: the collection proper, 2000 ns
    s.poll(6000);
    s.poll(7000);
    t.collected_now(2, 1, 3);  // its counter moves, and its stop callback hands the GIL to 101 at 7500
    hand_to(1);
    s.poll(8000, late ? 6500 : -1);
    s.poll(9000);
    s.poll(10000);
    hand_to(0);  // back to 100 at 10500, which ends the collection
    s.poll(11000);
    t.collecting(false);
    s.poll(12000);  // ended at 11500
    s.finish(13000);
    const auto c = all_of<raw::GcCollection>(drain(q));
    REQUIRE(c.size() == 1);
    CHECK(c[0].generation == 2);
    CHECK(c[0].tid == 100);         // 101 held 7000 ns of it, 100 3000
    CHECK(c[0].held_from == 4000);  // the collection proper: its hold from 5500 to 7500 (7000)
    CHECK(c[0].held_dur == (late ? 1500 : 2000));
    CHECK(c[0].hold_lead == 0);
  }
}

TEST_CASE(
    "gc tracker: a counter that moved before the stretch was seen, stop callbacks, and the recording's end") {
  GcTarget t;
  ScriptedTasks tasks;
  RecordQueue q(4096);
  ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
  s.poll(1000);
  // Between two polls: a gen-0 collection ran entirely, and a gen-1 one ran and is in its stop callbacks.
  t.collected_now(0, 1, 0);
  t.collected_now(1, 1, 4);
  t.collecting(true);
  s.poll(2000);
  t.collecting(false);
  s.poll(3000);  // no counter moved inside the stretch: it was the tail of one that had moved (the oldest)
  // Its stop callbacks seen: the counter moved at a poll that still read 1, then nothing moved again.
  t.collecting(true);
  s.poll(4000);
  t.collected_now(0, 1, 2);
  s.poll(5000);
  t.collecting(false);
  s.poll(6000);
  // Still running at the end: no generation yet.
  t.collecting(true);
  s.poll(7000);
  s.finish(8000);
  const auto events = drain(q);
  const auto c = all_of<raw::GcCollection>(events);
  REQUIRE(c.size() == 3);
  CHECK(c[0].generation == 1);
  CHECK(c[0].collected == 4);
  CHECK(c[1].generation == 0);
  CHECK(c[1].ts == 3500);
  CHECK(c[1].dur == 2000);  // to the end of its callbacks
  CHECK(c[2].generation == -1);
  CHECK(c[2].ts == 6500);
  CHECK(c[2].dur == 1500);
  CHECK(counted(events) == std::vector<uint64_t>{2, 1, 0});
}

TEST_CASE(
    "gc tracker: off with --no-gc, for a layout without a GC state, and for a state that does not look "
    "right") {
  GcTarget t;
  ScriptedTasks tasks;
  RecordQueue q(4096);
  {
    ProcessSampler s(t.interp, t.mem, tasks, q, 0, SamplerOptions{.read_gc = false});
    s.poll(1000);
    CHECK(s.gc().why_off() == "not read (--no-gc)");
  }
  {
    Interpreter no_gc = t.interp;
    no_gc.layout.gc.known = false;
    no_gc.layout.gc.why_unknown = "free-threaded builds keep a different GC state";
    ProcessSampler s(no_gc, t.mem, tasks, q, 0, kEveryPoll);
    s.poll(1000);
    CHECK(s.gc().why_off().find("free-threaded") != std::string::npos);
  }
  t.mem.put(t.interp.gc_addr, t.layout.gc.enabled, 12345);
  {
    ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
    s.poll(1000);
    s.poll(2000);
    CHECK(s.gc().why_off().find("does not look right") != std::string::npos);
  }
  const auto events = drain(q);
  CHECK(all_of<raw::GcSettings>(events).empty());
  CHECK(all_of<raw::GcCounts>(events).empty());
}

TEST_CASE(
    "gc sample: 3.14.0-3.14.4's incremental counts follow visited_space; 3.15's stats come from ring "
    "buffers") {
  layouts::GcLayout inc;
  inc.enabled = 12;
  inc.generations = 24;
  inc.stats = 120;
  inc.collecting = 192;
  inc.incremental = true;
  inc.visited_space = 232;
  std::vector<uint8_t> state(inc.read_size(), 0);
  auto put32 = [&](std::vector<uint8_t>& b, uint32_t off, int32_t v) { std::memcpy(b.data() + off, &v, 4); };
  auto put64 = [&](std::vector<uint8_t>& b, uint32_t off, int64_t v) { std::memcpy(b.data() + off, &v, 8); };
  put32(state, 12, 1);
  put32(state, 24 + 20, 5);   // young.count
  put32(state, 48 + 20, 6);   // old[0].count
  put32(state, 72 + 20, 7);   // old[1].count
  put32(state, 232, 1);       // visited_space: old[1] is being visited
  put64(state, 120 + 48, 9);  // generation_stats[2].collections
  auto s = decode_gc(state, {}, inc);
  CHECK(s.count[0] == 5);
  CHECK(s.count[1] == 7);
  CHECK(s.count[2] == 6);
  CHECK(s.collections[2] == 9);
  CHECK(s.plausible());

  layouts::GcLayout ring;
  ring.enabled = 0;
  ring.generations = 8;
  ring.collecting = 112;
  ring.stats = 104;
  ring.stats_home = layouts::GcStatsHome::kRing;
  ring.stats_stride = 64;
  ring.stats_collections = 16;
  ring.stats_collected = 24;
  ring.stats_uncollectable = 32;
  ring.ring_size = 1112;
  ring.ring_buffer[0] = 0;
  ring.ring_items[0] = 11;
  ring.ring_index[0] = 704;
  for (int g = 1; g < 3; ++g) {
    ring.ring_buffer[g] = 712 + static_cast<uint32_t>(g - 1) * 200;
    ring.ring_items[g] = 3;
    ring.ring_index[g] = ring.ring_buffer[g] + 192;
  }
  std::vector<uint8_t> st(ring.read_size(), 0), rb(ring.ring_size, 0);
  put32(st, 0, 1);
  rb[704] = 4;  // the newest young entry is items[4]
  put64(rb, 4 * 64 + 16, 4);
  put64(rb, 4 * 64 + 24, 23);
  rb[904] = 2;
  put64(rb, 712 + 2 * 64 + 16, 2);
  rb[1104] = 1;
  put64(rb, 912 + 64 + 16, 1);
  put64(rb, 912 + 64 + 24, 6);
  s = decode_gc(st, rb, ring);
  CHECK(s.stats_ok);
  CHECK(s.collections[0] == 4);
  CHECK(s.collected[0] == 23);
  CHECK(s.collections[1] == 2);
  CHECK(s.collections[2] == 1);
  CHECK(s.collected[2] == 6);
  rb[904] = 3;  // an index past its buffer: a torn or wrong read
  CHECK_FALSE(decode_gc(st, rb, ring).plausible());
}

TEST_CASE("gc raw lines: each kind round-trips; wrong values are refused naming the event") {
  const raw::GcCollection c{.tid = 7,
                            .ts = 10,
                            .dur = 20,
                            .generation = 1,
                            .collected = 3,
                            .uncollectable = 1,
                            .waiters = 2,
                            .wait_ns = 15,
                            .hold_lead = 5,
                            .held_dur = 15,
                            .held_from = 4};
  CHECK(raw::gc_line(c) == R"(["G",7,10,20,1,3,1,2,15,5,15,4])");
  auto bad = [](const std::string& why) { return Error(ErrorKind::kCorrupt, "event " + why); };
  CHECK(std::get<raw::GcCollection>(raw::gc_record_from_json(nlohmann::json::parse(raw::gc_line(c)), bad)) ==
        c);
  // Format 3's first files had no held_from: their part began with the collection.
  CHECK(std::get<raw::GcCollection>(
            raw::gc_record_from_json(nlohmann::json::parse(R"(["G",7,10,20,1,3,1,2,15,5,20])"), bad))
            .held_from == 0);
  const raw::GcUntimed u{.ts = 1, .window = 2, .generation = 0, .n = 4, .collected = 5, .uncollectable = 0};
  CHECK(std::get<raw::GcUntimed>(raw::gc_record_from_json(nlohmann::json::parse(raw::gc_line(u)), bad)) == u);
  for (const char* wrong : {R"(["G",7,10,20,3,3,1,2,15,5,20])", R"(["G",7,10,20,1,3,1,2,15,5,21])",
                            R"(["G",7,10,20,1,3,1,2,15,5,15,6])", R"(["G",7,10,20,1,3,1,2,15,5,15,-1])",
                            R"(["G",7,10,-1,1,3,1,2,15,5,0])", R"(["GS",1,2,700,10,10])", R"(["GX",1])",
                            R"(["GI",1,2,0])", R"(["GC",1,"a",2,3])"}) {
    CAPTURE(wrong);
    CHECK_THROWS_AS(raw::gc_record_from_json(nlohmann::json::parse(wrong), bad), Error);
  }
}

TEST_CASE("gc summary: collections per generation, pauses, waiting during GC, the long ones, time disabled") {
  raw::SummaryBuilder b;
  b.gc().set_list_threshold(5'000'000);
  b.add(raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 0, .name = "MainThread", .ns_tid = 0});
  b.add(raw::Wait{.tid = 2, .ts = 0, .dur = 40'000'000});
  b.add(raw::GcSettings{.ts = 0, .enabled = true, .threshold = {700, 10, 10}});
  b.add(raw::GcCollection{.tid = 1, .ts = 1'000'000, .dur = 1'000'000, .generation = 0, .wait_ns = 0});
  b.add(raw::GcCollection{.tid = 1,
                          .ts = 10'000'000,
                          .dur = 20'000'000,
                          .generation = 2,
                          .collected = 9,
                          .waiters = 1,
                          .wait_ns = 10'000'000,
                          .hold_lead = 0,
                          .held_dur = 20'000'000});
  b.add(raw::GcUntimed{.ts = 40'000'000, .window = 100, .generation = 0, .n = 5, .collected = 1});
  b.add(raw::GcSettings{.ts = 60'000'000, .enabled = false, .threshold = {700, 10, 10}});
  b.set_end(100'000'000);
  const raw::GcSummary& g = b.gc();
  CHECK(g.collections(0) == 6);
  CHECK(g.timed(0) == 1);
  CHECK(g.collections(2) == 1);
  CHECK(g.pause_ns() == 21'000'000);
  REQUIRE(g.longest().has_value());
  CHECK(g.longest()->generation == 2);
  REQUIRE(g.listed().size() == 1);
  CHECK(g.listed()[0].ts == 10'000'000);
  const auto j = b.to_json(10000, {});
  CHECK(j["gc"]["collections"] == nlohmann::json::array({6, 0, 1}));
  CHECK(j["gc"]["wait_share"].get<double>() == doctest::Approx(0.25));
  CHECK(j["gc"]["time_share"].get<double>() == doctest::Approx(0.21));
  CHECK(j["gc"]["disabled_ns"] == 40'000'000);
  CHECK(j["gc"]["long_collections"].size() == 1);
  raw::SummaryBuilder none;
  CHECK(none.to_json(10000, {})["gc"].is_null());  // never read: null, not zeros
}

TEST_CASE(
    "gc trace: the gc slice nests inside its hold_gil in double arithmetic, far from the clock's origin") {
  // Parent and child ending on the same ns at an offset where the doubles' steps are coarse.
  for (int64_t base : {int64_t{0}, int64_t{4'059'637'649'000}, int64_t{987'654'321'987'654}}) {
    for (int64_t k = 0; k < 200; ++k) {
      const int64_t ps = base + 1'000 + k * 7, cs = ps + k * 13, ce = cs + 10'597'362 + k;
      const int64_t end = gilspy::convert::nested_end_ns(ps, cs, ce);
      CHECK(end <= ce);
      CHECK(end >= ce - 3);
      const std::string text = R"({"traceEvents":[{"ph":"X","name":"hold_gil","pid":1,"tid":2,"ts":)" +
                               gilspy::convert::format_us(ps) + R"(,"dur":)" +
                               gilspy::convert::format_us(gilspy::convert::reader_safe_dur_ns(ps, ce)) +
                               R"(},{"ph":"X","name":"gc","pid":1,"tid":2,"ts":)" +
                               gilspy::convert::format_us(cs) + R"(,"dur":)" +
                               gilspy::convert::format_us(gilspy::convert::reader_safe_dur_ns(cs, end)) +
                               R"(},{"ph":"I","s":"t","name":"drop_gil","pid":1,"tid":2,"ts":)" +
                               gilspy::convert::format_us(ce) + "}]}";
      const auto r = gilspy::test::check_chrome_trace(text);
      CHECK_MESSAGE(r.ok(), (r.problems.empty() ? "" : r.problems[0]));
    }
  }
}

TEST_CASE(
    "gc top: collections and pauses per window and since start, waiting shares against the threads' waits") {
  top::TopModel m(0);
  m.add_process(
      {.id = 1, .pid = 42, .command = "python x.py", .python_version = "3.12.1", .rank = 0, .start_ns = 0});
  m.thread_started(1, 42, "MainThread", 0);
  m.thread_started(1, 43, "worker", 0);
  m.wait(1, 43, 0, 400'000'000);
  m.gc_collection(1, 2, 100'000'000, 50'000'000, 40'000'000);
  m.gc_untimed(1, 0, 12, 200'000'000);
  auto snap = m.snapshot(1'000'000'000);
  REQUIRE(snap.processes.size() == 1);
  const auto& f = snap.processes[0].interval.gc;
  REQUIRE(f.has_value());
  CHECK(f->collections[0] == 12);
  CHECK(f->collections[2] == 1);
  CHECK(f->timed == 1);
  CHECK(f->pause_ns == 50'000'000);
  CHECK(f->time_share == doctest::Approx(0.05));
  REQUIRE(f->wait_share.has_value());
  CHECK(*f->wait_share == doctest::Approx(0.1));
  const std::string row = top::gc_row_text(*f);
  CHECK(row.find("12/0/1") != std::string::npos);
  CHECK(row.find("50.0ms") != std::string::npos);
  snap = m.snapshot(2'000'000'000);
  REQUIRE(snap.processes[0].interval.gc.has_value());
  CHECK(snap.processes[0].interval.gc->timed == 0);
  CHECK(snap.processes[0].total.gc->collections[0] == 12);
  top::TopModel quiet(0);
  quiet.add_process(
      {.id = 1, .pid = 42, .command = "", .python_version = "3.12.1", .rank = 0, .start_ns = 0});
  CHECK_FALSE(quiet.snapshot(1'000'000'000).processes[0].interval.gc.has_value());  // the GC was never read
  quiet.gc_settings(1, false, 1'100'000'000);  // read, disabled, nothing collected: a row that says so
  const auto disabled = quiet.snapshot(2'000'000'000).processes[0].interval.gc;
  REQUIRE(disabled.has_value());
  CHECK_FALSE(disabled->enabled);
  CHECK(top::gc_row_text(*disabled).find("gc disabled") != std::string::npos);
}

TEST_CASE("gc trace: a recording's collections on the collector's lane, the GC lane, instants and counters") {
  const std::string text = converted_trace([](raw::Writer& w) {
    w.write(raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 1, .name = "MainThread", .ns_tid = 0});
    w.write(raw::ThreadStart{.tid = 2, .ts = 0, .tstate = 2, .name = "worker", .ns_tid = 0});
    w.write(raw::GcSettings{.ts = 0, .enabled = true, .threshold = {2000, 10, 10}});
    w.write(raw::GcCounts{.ts = 10, .count = {5, 1, 0}});
    // Ends with the hold: the collection lasts to the hold's last nanosecond.
    w.write(raw::GcCollection{.tid = 1,
                              .ts = 3'000'123,
                              .dur = 10'597'362,
                              .generation = 2,
                              .collected = 10,
                              .waiters = 1,
                              .wait_ns = 9'000'000,
                              .hold_lead = 2'000'000,
                              .held_dur = 10'597'362});
    w.write(raw::Hold{.tid = 1, .ts = 1'000'123, .dur = 12'597'362});
    w.write(raw::Wait{.tid = 2, .ts = 2'000'000, .dur = 11'597'485});
    // The collector dropped the GIL half way (a finalizer): the thread's slice ends with its hold.
    w.write(raw::GcCollection{.tid = 2,
                              .ts = 14'000'000,
                              .dur = 4'000'000,
                              .generation = 1,
                              .hold_lead = 0,
                              .held_dur = 2'000'000});
    w.write(raw::Hold{.tid = 2, .ts = 14'000'000, .dur = 2'000'000});
    w.write(raw::GcUntimed{.ts = 20'000'000, .window = 100'000, .generation = 0, .n = 3, .collected = 2});
    w.write(raw::GcSettings{.ts = 21'000'000, .enabled = false, .threshold = {2000, 10, 10}});
    w.finish({{"duration_ns", 22'000'000}});
  });
  const auto check = gilspy::test::check_chrome_trace(text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems[0]));
  const auto doc = nlohmann::json::parse(text);
  int lane = 0, thread1 = 0, thread2 = 0, instants = 0, enabled0 = 0, counts = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name == "gc" && e["ph"] == "X" && e["tid"] == gilspy::convert::kGcTid) ++lane;
    if (name == "gc" && e["ph"] == "X" && e["tid"] == 1) {
      ++thread1;
      CHECK(e["args"]["generation"] == 2);
      CHECK(e["args"]["waiters"] == 1);
    }
    if (name == "gc" && e["ph"] == "X" && e["tid"] == 2) {
      ++thread2;
      CHECK(e["dur"].get<double>() == doctest::Approx(2000.0));  // its held part, not the 4 ms
    }
    if (name == "gc" && e["ph"] == "I") {
      ++instants;
      CHECK(e["args"]["count"] == 3);
      CHECK(e["tid"] == gilspy::convert::kGcTid);
    }
    if (name == "gc_enabled" && e["args"]["enabled"] == 0) ++enabled0;
    if (name == "gc_count") ++counts;
    if (name == "thread_name" && e["tid"] == gilspy::convert::kGcTid) CHECK(e["args"]["name"] == "GC");
  }
  CHECK(lane == 2);
  CHECK(thread1 == 1);
  CHECK(thread2 == 1);
  CHECK(instants == 1);
  CHECK(enabled0 == 1);
  CHECK(counts == 1);
}

namespace {

// A hold [1, 10) ms of thread 1 sampled at its start in run > alloc and `second_ms` in in `second` (a stack
// id: 2 run > other, 3 run > alloc > __del__), then `third_ms` in back in run > alloc; a collection begins
// 2 ms into the recording and lasts 5 ms. The trace and its gc slices on the thread's lane and the GC lane.
struct GcNesting {
  std::string text;
  std::optional<nlohmann::json> thread_gc, lane_gc, alloc;
};

GcNesting gc_under_frames(uint32_t second, int64_t second_ms, int64_t third_ms) {
  GcNesting out;
  out.text = converted_trace([&](raw::Writer& w) {
    w.write(raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 1, .name = "MainThread", .ns_tid = 0});
    w.write(raw::FrameDef{.id = 1, .ts = 0, .qualname = "run", .file = "/w.py", .line = 1, .first_line = 1});
    w.write(
        raw::FrameDef{.id = 2, .ts = 0, .qualname = "alloc", .file = "/w.py", .line = 5, .first_line = 4});
    w.write(
        raw::FrameDef{.id = 3, .ts = 0, .qualname = "other", .file = "/w.py", .line = 9, .first_line = 8});
    w.write(raw::FrameDef{
        .id = 4, .ts = 0, .qualname = "__del__", .file = "/w.py", .line = 20, .first_line = 19});
    w.write(raw::StackDef{.id = 1, .ts = 0, .truncated = false, .frames = {2, 1}});
    w.write(raw::StackDef{.id = 2, .ts = 0, .truncated = false, .frames = {3, 1}});
    w.write(raw::StackDef{.id = 3, .ts = 0, .truncated = false, .frames = {4, 2, 1}});
    const auto sample = [&](int64_t ms, uint32_t stack) {
      w.write(raw::StackSample{.tid = 1,
                               .ts = ms * 1'000'000,
                               .since = 1'000'000,
                               .role = raw::GilRole::kHolding,
                               .stack = stack});
    };
    sample(1, 1);
    sample(second_ms, second);
    sample(third_ms, 1);
    w.write(raw::GcCollection{.tid = 1,
                              .ts = 2'000'000,
                              .dur = 5'000'000,
                              .generation = 2,
                              .hold_lead = 1'000'000,
                              .held_dur = 5'000'000});
    w.write(raw::Hold{.tid = 1, .ts = 1'000'000, .dur = 9'000'000});
    w.finish({{"duration_ns", 11'000'000}});
  });
  const auto check = gilspy::test::check_chrome_trace(out.text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems[0]));
  const auto doc = nlohmann::json::parse(out.text);
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e.value("name", "") == "gc") (e["tid"] == 1 ? out.thread_gc : out.lane_gc) = e;
    if (e.value("name", "") == "alloc" && !out.alloc) out.alloc = e;
  }
  return out;
}

}  // namespace

TEST_CASE("gc trace: a collection on its thread's lane is whole, or left to the GC lane, never cut short") {
  // A finalizer's frame sampled during the collection (run > alloc > __del__ at 4 ms, alloc again at 6 ms):
  // the collection lies whole in alloc, and __del__ nests inside it.
  GcNesting n = gc_under_frames(3, 4, 6);
  REQUIRE(n.thread_gc);
  REQUIRE(n.lane_gc);
  REQUIRE(n.alloc);
  const double gc_ts = n.thread_gc->at("ts").get<double>();
  const double gc_end = gc_ts + n.thread_gc->at("dur").get<double>();
  const double a_ts = n.alloc->at("ts").get<double>(), a_end = a_ts + n.alloc->at("dur").get<double>();
  CHECK(gc_ts == n.lane_gc->at("ts").get<double>());
  CHECK(n.thread_gc->at("dur").get<double>() == doctest::Approx(5000.0).epsilon(1e-5));  // whole: 5 ms
  CHECK(gc_ts >= a_ts);
  CHECK(gc_end <= a_end);
  // Another frame where the collection began (run > other from 4 ms, while it ran): no level of the lane can
  // hold both whole, so the thread's lane shows no gc rather than one cut at 4 ms; the GC lane has all 5 ms.
  n = gc_under_frames(2, 4, 9);
  CHECK_FALSE(n.thread_gc);
  REQUIRE(n.lane_gc);
  CHECK(n.lane_gc->at("dur").get<double>() == doctest::Approx(5000.0));
}

TEST_CASE("trace check: a gc slice on a thread's lane that contradicts the GC lane's is a problem") {
  const auto trace = [](const std::string& thread_gc) {
    return std::string(R"({"traceEvents":[
{"ph":"X","cat":"gil","name":"gc","pid":1,"tid":4194305,"ts":2000.000,"dur":5000.000},
{"ph":"X","cat":"gil","name":"hold_gil","pid":1,"tid":1,"ts":1000.000,"dur":9000.000},
)") + thread_gc +
           "]}";
  };
  const std::string whole =
      R"({"ph":"X","cat":"gil","name":"gc","pid":1,"tid":1,"ts":2000.000,"dur":4999.998})";
  const std::string cut =
      R"({"ph":"X","cat":"gil","name":"gc","pid":1,"tid":1,"ts":2000.000,"dur":2000.000})";
  const std::string part =
      R"({"ph":"X","cat":"gil","name":"gc","pid":1,"tid":1,"ts":2000.000,"dur":2000.000,"args":{"held_part":true}})";
  CHECK(gilspy::test::check_chrome_trace(trace(whole)).ok());
  const auto r = gilspy::test::check_chrome_trace(trace(cut));
  REQUIRE_FALSE(r.ok());
  CHECK(r.problems[0].find("is no collection of the GC lane") != std::string::npos);
  CHECK(gilspy::test::check_chrome_trace(trace(part)).ok());
}

TEST_CASE(
    "gc summary lines: the GC row of record's summary, the long collections, and why the GC was not read") {
  raw::SummaryBuilder b;
  b.gc().set_list_threshold(10'000'000);
  b.add(raw::Wait{.tid = 2, .ts = 0, .dur = 100'000'000});
  b.add(raw::GcSettings{.ts = 0, .enabled = true, .threshold = {700, 10, 10}});
  b.add(raw::GcCollection{.tid = 1,
                          .ts = 2'345'000'000,
                          .dur = 130'000'000,
                          .generation = 2,
                          .collected = 77,
                          .waiters = 3,
                          .wait_ns = 50'000'000});
  b.add(raw::GcCollection{.tid = 1, .ts = 3'000'000'000, .dur = 400'000, .generation = 0});
  b.add(raw::GcUntimed{.ts = 3'100'000'000, .window = 100, .generation = 0, .n = 40});
  b.set_end(10'000'000'000);
  std::string out;
  gilspy::cli::gc_summary_lines(out, b, "");
  CAPTURE(out);
  CHECK(out.find("GC: 42 collections (gen0 41, gen1 0, gen2 1); 2 timed, 40 too short to time") !=
        std::string::npos);
  CHECK(out.find("longest 130.0 ms (gen 2 at 2.345 s)") != std::string::npos);
  CHECK(out.find("50.0 % of all GIL waiting happened during collections") != std::string::npos);
  CHECK(out.find("GC collections of 10.0 ms or longer: 1") != std::string::npos);
  CHECK(out.find("2.345 s    2    130.0 ms        3          77") != std::string::npos);
  std::string off;
  gilspy::cli::gc_summary_lines(off, raw::SummaryBuilder{}, "not read (--no-gc)");
  CHECK(off == "  GC: not read (--no-gc)\n");
}

TEST_CASE(
    "gc tracker: random collecting flags and counter moves: every move counted once, a GC lane that reads") {
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  auto rnd = [&](uint64_t n) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed % n;
  };
  for (int run = 0; run < 40; ++run) {
    GcTarget t;
    ScriptedTasks tasks;
    RecordQueue q(1 << 14);
    ProcessSampler s(t.interp, t.mem, tasks, q, 0, kEveryPoll);
    int64_t moved[3] = {0, 0, 0};
    int64_t now = 1000;
    for (int poll = 0; poll < 400; ++poll) {
      t.collecting(rnd(3) == 0);
      if (poll > 0 && rnd(4) == 0) {  // the first poll is the baseline
        const int g = static_cast<int>(rnd(3));
        const int64_t n = 1 + static_cast<int64_t>(rnd(3));
        t.collected_now(g, n, static_cast<int64_t>(rnd(100)));
        moved[g] += n;
      }
      s.poll(now);
      now += 100 + static_cast<int64_t>(rnd(900));
    }
    t.collecting(false);
    s.poll(now);
    s.finish(now + 1000);
    const auto events = drain(q);
    REQUIRE(q.dropped() == 0);
    const auto got = counted(events);
    const std::vector<uint64_t> want{static_cast<uint64_t>(moved[0]), static_cast<uint64_t>(moved[1]),
                                     static_cast<uint64_t>(moved[2])};
    CHECK_MESSAGE(got == want, "run " << run << ": counted " << got[0] << "/" << got[1] << "/" << got[2]
                                      << ", moved " << moved[0] << "/" << moved[1] << "/" << moved[2]);
    std::string text;  // what GcLanes writes, as the trace has it
    gilspy::convert::JsonWriter json([&](std::string_view t) { text.append(t); });
    gilspy::convert::EventWriter out(json);
    gilspy::convert::GcLanes lanes;
    lanes.begin(out, 1, 0);
    int64_t last_end = 0;
    for (const auto& c : all_of<raw::GcCollection>(events)) {
      CHECK(c.ts >= last_end);  // in order, never overlapping
      last_end = c.ts + c.dur;
      CHECK(c.held_dur <= c.dur);
      lanes.collection(raw::GcCollection{c.tid, c.ts, c.dur, c.generation, c.collected, c.uncollectable,
                                         c.waiters, c.wait_ns, -1, 0});  // the GC lane only: no holds here
    }
    for (const auto& u : all_of<raw::GcUntimed>(events)) lanes.untimed(u);
    json.drain();
    const auto r = gilspy::test::check_chrome_trace(R"({"traceEvents":[)" + text + "]}");
    CHECK_MESSAGE(r.ok(), "run " << run << ": " << (r.problems.empty() ? "" : r.problems[0]));
  }
}

}  // namespace unit_gc
