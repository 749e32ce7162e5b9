// What the counter records become: the summary per thread and role (preempted holds, switches), the raw lines
// and their corrupt forms, the trace's counter tracks (through the shared checker), the end summary's CPU
// table, and top's CPU columns (model, screen at any width, JSON, the key).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/terminal_text.hpp"
#include "cli/counter_table.hpp"
#include "cli/top/cpu_columns.hpp"
#include "cli/top/keys.hpp"
#include "cli/top/top_model.hpp"
#include "cli/top/top_render.hpp"
#include "convert/counter_tracks.hpp"
#include "raw/counter_lines.hpp"
#include "raw/counter_summary.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"

namespace raw = gilspy::raw;
namespace top = gilspy::top;
using gilspy::Error;
using gilspy::ErrorKind;
using raw::GilRole;

// Named per file, so that the unity build can put test files together.
namespace unit_counter_output {
namespace {

constexpr int64_t kMs = 1'000'000;

raw::CounterSetup setup_with_ipc() {
  raw::CounterSetup s;
  s.count = 4;
  s.kinds[0] = raw::CounterKind::kCycles;
  s.kinds[1] = raw::CounterKind::kInstructions;
  s.kinds[2] = raw::CounterKind::kCacheMisses;
  s.kinds[3] = raw::CounterKind::kBranchMisses;
  s.unavailable = {{"ref-cycles", "does not fit in one group"}};
  return s;
}

// One thread's record for one role over a window.
raw::CounterSample piece(int64_t tid, int64_t ts, int64_t dur, GilRole role, int64_t time, int64_t cpu,
                         int64_t delay, uint32_t holds = 0, uint32_t preempted = 0, int64_t preempted_ns = 0,
                         uint64_t cycles = 0, uint64_t instructions = 0) {
  raw::CounterSample s;
  s.tid = tid;
  s.ts = ts;
  s.dur = dur;
  s.role = role;
  s.time_ns = time;
  s.cpu_ns = cpu;
  s.run_delay_ns = delay;
  s.slices = 1;
  s.holds = holds;
  s.preempted_holds = preempted;
  s.preempted_ns = preempted_ns;
  if (cycles > 0) {
    s.count = 4;
    s.values[0] = cycles;
    s.values[1] = instructions;
    s.values[2] = instructions / 100;
    s.values[3] = instructions / 1000;
  }
  return s;
}

}  // namespace

TEST_CASE("counter summary: sums per role, preempted holds, switches over the recording") {
  raw::CounterSummary c;
  c.add(setup_with_ipc());
  // Two windows: 2 holds begin in the first, one ends preempted (4 ms waiting for a CPU) in the second.
  c.add(piece(7, 0, 100 * kMs, GilRole::kHolding, 60 * kMs, 40 * kMs, 18 * kMs, 2, 0, 0, 8'000'000,
              16'000'000));
  c.add(piece(7, 0, 100 * kMs, GilRole::kWaiting, 40 * kMs, 0, 0));
  c.add(piece(7, 100 * kMs, 100 * kMs, GilRole::kHolding, 10 * kMs, 6 * kMs, 4 * kMs, 0, 1, 4 * kMs,
              4'000'000, 8'000'000));
  c.add(raw::ThreadSwitches{.tid = 7, .ts = 0, .voluntary = 100, .involuntary = 10});
  CHECK_FALSE(c.thread(7)->has_switches);  // one reading: nothing over the recording yet (not "0 switches")
  c.add(raw::ThreadSwitches{.tid = 7, .ts = 25 * kMs, .voluntary = 130, .involuntary = 12});
  const auto t = c.thread(7);
  CHECK(t->has_switches);
  REQUIRE(t.has_value());
  CHECK(t->role(GilRole::kHolding).time_ns == 70 * kMs);
  CHECK(t->role(GilRole::kHolding).cpu_ns == 46 * kMs);
  CHECK(t->role(GilRole::kHolding).run_delay_ns == 22 * kMs);
  CHECK(t->role(GilRole::kHolding).counted_ns == 70 * kMs);
  CHECK(t->role(GilRole::kWaiting).time_ns == 40 * kMs);
  CHECK(t->role(GilRole::kWaiting).counted_ns == 0);
  CHECK(t->holds == 2);
  CHECK(t->preempted_holds == 1);
  CHECK(t->preempted_hold_ns == 4 * kMs);
  CHECK(t->voluntary == 30);
  CHECK(t->involuntary == 2);
  REQUIRE(c.index_of(raw::CounterKind::kInstructions).has_value());
  CHECK(t->role(GilRole::kHolding).values[*c.index_of(raw::CounterKind::kInstructions)] == 24'000'000);
  CHECK_FALSE(c.index_of(raw::CounterKind::kRefCycles).has_value());
  const nlohmann::json j = c.to_json();
  CHECK(j["events"].size() == 4);
  CHECK(j["unavailable"]["ref-cycles"] == "does not fit in one group");
  CHECK(j["threads"][0]["roles"]["holding"]["counters"]["instructions"] == 24'000'000);
  CHECK(j["threads"][0]["preempted_holds"] == 1);
  CHECK(j["threads"][0]["voluntary_switches"] == 30);
  CHECK(j["preempted_hold_min_ns"] == raw::kPreemptedHoldMinNs);
}

TEST_CASE(
    "counter lines: written, read back (also by hand); a bad line is corrupt; unknown counter names kept") {
  auto bad = [](const std::string& why) { return Error(ErrorKind::kCorrupt, "event " + why); };
  const raw::CounterSample s = piece(7, 100, 200, GilRole::kWaiting, 150, 10, 20, 0, 0, 0, 5, 6);
  const auto j = nlohmann::json::parse(raw::counter_sample_line(s));
  CHECK(std::get<raw::CounterSample>(raw::counter_record_from_json(j, bad)) == s);
  raw::CounterSample fast;
  CHECK(raw::fast_counter_sample(raw::counter_sample_line(s), fast));
  CHECK(fast == s);
  const raw::CounterSetup setup = setup_with_ipc();
  CHECK(std::get<raw::CounterSetup>(raw::counter_record_from_json(
            nlohmann::json::parse(raw::counter_setup_line(setup)), bad)) == setup);
  const auto future = std::get<raw::CounterSetup>(raw::counter_record_from_json(
      nlohmann::json::parse(R"(["CD",0,["cycles","quantum-flux"],{},9])"), bad));
  CHECK(future.count == 2);
  CHECK(future.kinds[1] == raw::CounterKind::kUnknown);
  for (const char* line : {R"(["C",1,2,-3,"H",0,0,0,0,0,0,0,[]])", R"(["C",1,2,3,"X",0,0,0,0,0,0,0,[]])",
                           R"(["C",1,2,3,"H",0,0,0,0,0,0,0,[-1]])", R"(["C",1,2,3,"H",0,0,0,0,0,0,0,5])",
                           R"(["C",1,2,3,"H",0,0,0,0,0,0,0,[1,2,3,4,5,6,7,8,9]])", R"(["CS",1,2,-5,0])",
                           R"(["CD",0,"cycles"])", R"(["C",1,2,3,"H",0,2000000000000000000,0,0,0,0,0,[]])",
                           R"(["C",1,2,3,"H",0,0,0,4294967296,0,0,0,[]])", R"(["C",1,2,3,"H",0,0,0])"}) {
    CAPTURE(line);
    CHECK_THROWS_AS(raw::counter_record_from_json(nlohmann::json::parse(line), bad), Error);
    CHECK_FALSE(raw::fast_counter_sample(line, fast));
  }
}

TEST_CASE(
    "counter tracks: a point per window with CPU %, cumulative run-queue delay, IPC; 0 at gaps and the end") {
  std::vector<std::pair<int64_t, nlohmann::json>> points;  // ts, the point's args as the trace has them
  gilspy::convert::CounterTracks tracks([&](const gilspy::convert::CounterPoint& p) {
    CHECK(p.name() == "tid " + std::to_string(p.tid));
    std::string args;
    gilspy::convert::JsonWriter w([&](std::string_view text) { args.append(text); });
    w.begin_object();
    p.write_args(w);
    w.end_object();
    w.drain();
    points.emplace_back(p.ts, nlohmann::json::parse(args));
  });
  tracks.setup(setup_with_ipc());
  for (int i = 0; i < 3; ++i) {  // 3 windows of 100 ms, each half holding (all on a CPU), half waiting
    tracks.sample(piece(7, i * 100 * kMs, 100 * kMs, GilRole::kHolding, 50 * kMs, 50 * kMs, 2 * kMs, 0, 0, 0,
                        3000, 6000));
    tracks.sample(piece(7, i * 100 * kMs, 100 * kMs, GilRole::kWaiting, 50 * kMs, 0, 2 * kMs));
  }
  tracks.sample(piece(7, 500 * kMs, 100 * kMs, GilRole::kWaiting, 100 * kMs, 0, 0));  // after a gap
  tracks.finish();
  REQUIRE(points.size() == 3 + 1 + 1 + 1);
  CHECK(points[0].first == 0);
  CHECK(points[0].second["cpu %"] == doctest::Approx(50.0));
  CHECK(points[0].second["run-queue delay ms"] == doctest::Approx(4.0));
  CHECK(points[1].second["run-queue delay ms"] == doctest::Approx(8.0));
  CHECK(points[0].second["IPC"] == doctest::Approx(2.0));
  CHECK(points[3].first == 300 * kMs);  // the gap: 0 where the windows stopped
  CHECK(points[3].second["cpu %"] == 0);
  CHECK(points[4].first == 500 * kMs);
  CHECK(points[4].second["cpu %"] == 0.0);
  CHECK(points.back().first == 600 * kMs);
  CHECK(points.back().second["cpu %"] == 0);
  CHECK(points.back().second.dump() == R"({"cpu %":0})");  // an integer, as it always was
}

TEST_CASE(
    "end summary: the CPU table per thread and role, preempted holds said, counters not counted named") {
  raw::SummaryBuilder b;
  b.add(raw::ThreadStart{.tid = 7, .ts = 0, .tstate = 1, .name = "worker \x1b[31m", .ns_tid = 0});
  b.add(raw::Hold{.tid = 7, .ts = 0, .dur = 10 * kMs});
  b.add(setup_with_ipc());
  b.add(piece(7, 0, 20 * kMs, GilRole::kHolding, 10 * kMs, 6 * kMs, 4 * kMs, 1, 1, 4 * kMs, 8'000'000,
              4'000'000));
  b.add(piece(7, 0, 20 * kMs, GilRole::kWaiting, 10 * kMs, kMs / 10, 0));
  b.add(raw::ThreadEnd{.tid = 7, .ts = 20 * kMs});
  std::string out;
  gilspy::cli::append_counter_table(out, b, 20);
  CAPTURE(out);
  CHECK(out.find("perf: cycles, instructions, cache-misses, branch-misses") != std::string::npos);
  CHECK(out.find("not counted: ref-cycles: does not fit in one group") != std::string::npos);
  CHECK(out.find("1 of 1 holds preempted (4.0 ms waiting for a CPU while holding the GIL)") !=
        std::string::npos);
  CHECK(out.find("holding") != std::string::npos);
  CHECK(out.find("  0.50") != std::string::npos);  // IPC 4M / 8M
  CHECK(out.find('\x1b') == std::string::npos);    // the name escaped
  const nlohmann::json j = b.to_json(10000, {});
  CHECK(j.contains("counters"));
  std::string none;
  gilspy::cli::append_counter_table(none, raw::SummaryBuilder{}, 20);
  CHECK(none.empty());  // a file without counter records (format 2) says nothing
}

TEST_CASE(
    "top: CPU pieces per role into windows and totals, a piece across the window's start split by time") {
  top::TopModel m(0);
  m.add_process(
      {.id = 1, .pid = 100, .command = "python3 x.py", .python_version = "3.12.1", .rank = 0, .start_ns = 0});
  m.thread_started(1, 7, "worker", 0);
  top::CpuPiece hold{.time_ns = 10 * kMs,
                     .cpu_ns = 10 * kMs,
                     .run_delay_ns = 0,
                     .slices = 2,
                     .counted = true,
                     .cycles = 1000,
                     .instructions = 2500,
                     .misses_counted = true,
                     .cache_misses = 5,
                     .branch_misses = 1};
  m.cpu(1, 7, top::Role::kHolding, 0, 10 * kMs, hold);
  m.cpu(1, 999, top::Role::kHolding, 0, 10 * kMs, hold);  // never started: ignored
  auto s = m.snapshot(20 * kMs);
  REQUIRE(s.processes.size() == 1);
  REQUIRE(s.processes[0].threads.size() == 1);
  const top::ThreadRow& t = s.processes[0].threads[0];
  CHECK(t.cpu_interval.role(top::Role::kHolding).cpu_ns == 10 * kMs);
  CHECK(t.cpu_total.role(top::Role::kHolding).cpu_ns == 10 * kMs);
  // Half of this wait lies before the window that starts at 20 ms: the window gets half of it.
  m.cpu(1, 7, top::Role::kWaiting, 15 * kMs, 10 * kMs,
        top::CpuPiece{.time_ns = 10 * kMs, .cpu_ns = 2 * kMs, .run_delay_ns = 4 * kMs, .slices = 4});
  s = m.snapshot(40 * kMs);
  const top::ThreadRow& t2 = s.processes[0].threads[0];
  CHECK(t2.cpu_interval.role(top::Role::kWaiting).time_ns == 5 * kMs);
  CHECK(t2.cpu_interval.role(top::Role::kWaiting).run_delay_ns == 2 * kMs);
  CHECK(t2.cpu_interval.role(top::Role::kHolding).time_ns == 0);
  CHECK(t2.cpu_total.role(top::Role::kWaiting).time_ns == 10 * kMs);

  SUBCASE("rendered at any width, JSON, the key") {
    top::RenderOptions o;
    o.cpu = true;
    o.totals = true;
    for (int width : {20, 40, 60, 80, 100, 160}) {
      o.width = width;
      o.height = 12;
      for (const std::string& line : top::render_screen(s, o)) {
        CHECK(gilspy::display_width(line) <= static_cast<size_t>(width));
      }
    }
    o.width = 160;
    const auto lines = top::render_screen(s, o);
    bool heading = false, row = false;
    for (const auto& l : lines) {
      heading =
          heading || (l.find("HOLD:CPU%") != std::string::npos && l.find("WAIT:CPU%") != std::string::npos);
      // Totals: 10 ms held all on a CPU (100.0), waited 10 ms 20 % on a CPU; IPC 2.5 while holding.
      row = row || (l.find("100.0") != std::string::npos && l.find("20.0") != std::string::npos &&
                    l.find("2.50") != std::string::npos);
    }
    CHECK(heading);
    CHECK(row);
    const std::string batch = top::render_batch(s, top::SortKey::kHold, true, true);
    CHECK(batch.find("HOLD:RUNQ%") != std::string::npos);
    CHECK(top::render_batch(s).find("HOLD:RUNQ%") == std::string::npos);
    const auto j = nlohmann::json::parse(top::render_json(s));
    CHECK(j["processes"][0]["threads"][0]["cpu_total"]["waiting"]["run_delay_s"] == doctest::Approx(0.004));
    CHECK(j["processes"][0]["threads"][0]["cpu_total"]["holding"]["instructions"] == 2500);
    top::RenderOptions v;
    for (const top::Key k : top::decode_keys("c")) CHECK(top::apply_view_key(k, v));
    CHECK(v.cpu);
    CHECK(top::help_text(200).find("c CPU") != std::string::npos);
  }
}

}  // namespace unit_counter_output
