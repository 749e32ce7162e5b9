// The stack and thread-name records downstream of the sampler: their raw lines round-trip (and bad ones are
// corrupt), a recording's holds and waits are cut at their samples, weighed by how many waited (the summary's
// top holders and wait sites), folded (--format collapsed, each weight), and drawn in the trace (args and
// nested frame slices) in a way the shared trace checker accepts; the checker's nesting rules themselves.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "cli/stack_summary_text.hpp"
#include "convert/chrome_trace.hpp"
#include "convert/collapsed.hpp"
#include "raw/fast_reader.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"
#include "support/trace_check.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace cv = gilspy::convert;
namespace fs = std::filesystem;
using nlohmann::json;

// Named per file, so that the unity build can put test files together.
namespace unit_stack_records {
namespace {

using gilspy::test::read_folded;
using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

raw::Meta meta() {
  raw::Meta m;
  m.gilspy_version = "0.2.0";
  m.pid = 500;
  m.python_version = "3.12.1";
  m.monotonic_ns = 1'000'000'000;
  m.realtime_ns = 1'700'000'000'000'000'000;
  m.rate_hz = 10000;
  return m;
}

constexpr int64_t kMs = 1'000'000;

// Thread A (501) holds [1, 11) ms, sampled at 1 ms (hog at line 5) and at 6 ms (hog at line 7); B (502) waits
// [2, 8) ms, sampled at its start (sleeper, line 12), and holds [11, 12) ms with no sample. One thread waits
// from 2 to 8 ms.
std::vector<raw::Record> recording() {
  std::vector<raw::Record> v;
  v.push_back(raw::ThreadStart{.tid = 501, .ts = 0, .tstate = 1, .name = "thread 501", .ns_tid = 0});
  v.push_back(raw::ThreadStart{.tid = 502, .ts = 0, .tstate = 2, .name = "thread 502", .ns_tid = 0});
  v.push_back(raw::ThreadName{.tid = 501, .ts = 0, .name = "A", .text_id = 0, .os_name = ""});
  v.push_back(raw::ThreadName{.tid = 502, .ts = 0, .name = "B", .text_id = 0, .os_name = "b-os"});
  v.push_back(raw::Waiters{.ts = 0, .n = 0});
  v.push_back(
      raw::FrameDef{.id = 1, .ts = 1 * kMs, .qualname = "run", .file = "/w.py", .line = 1, .first_line = 1});
  v.push_back(
      raw::FrameDef{.id = 2, .ts = 1 * kMs, .qualname = "hog", .file = "/w.py", .line = 5, .first_line = 3});
  v.push_back(raw::StackDef{.id = 1, .ts = 1 * kMs, .truncated = false, .frames = {2, 1}});
  v.push_back(raw::StackSample{
      .tid = 501, .ts = 1 * kMs, .since = 1 * kMs, .role = raw::GilRole::kHolding, .stack = 1});
  v.push_back(raw::Waiters{.ts = 2 * kMs, .n = 1});
  v.push_back(raw::FrameDef{
      .id = 3, .ts = 2 * kMs, .qualname = "sleeper", .file = "/w.py", .line = 12, .first_line = 10});
  v.push_back(raw::StackDef{.id = 2, .ts = 2 * kMs, .truncated = true, .frames = {3, 1}});
  v.push_back(raw::StackSample{
      .tid = 502, .ts = 2 * kMs, .since = 2 * kMs, .role = raw::GilRole::kWaiting, .stack = 2});
  v.push_back(
      raw::FrameDef{.id = 4, .ts = 6 * kMs, .qualname = "hog", .file = "/w.py", .line = 7, .first_line = 3});
  v.push_back(raw::StackDef{.id = 3, .ts = 6 * kMs, .truncated = false, .frames = {4, 1}});
  v.push_back(raw::StackSample{
      .tid = 501, .ts = 6 * kMs, .since = 1 * kMs, .role = raw::GilRole::kHolding, .stack = 3});
  v.push_back(raw::Waiters{.ts = 8 * kMs, .n = 0});
  v.push_back(raw::Wait{.tid = 502, .ts = 2 * kMs, .dur = 6 * kMs});
  v.push_back(raw::Hold{.tid = 501, .ts = 1 * kMs, .dur = 10 * kMs});
  v.push_back(raw::Hold{.tid = 502, .ts = 11 * kMs, .dur = 1 * kMs});
  v.push_back(raw::StackStats{.ts = 12 * kMs,
                              .walks = 4,
                              .samples = 3,
                              .torn = 1,
                              .invalid = 0,
                              .skipped = 0,
                              .truncated = 1,
                              .frames = 8,
                              .bytes = 4000,
                              .read_ns = 100'000,
                              .name_reads = 2,
                              .reused = 1});
  v.push_back(raw::ThreadEnd{.tid = 501, .ts = 12 * kMs});
  v.push_back(raw::ThreadEnd{.tid = 502, .ts = 12 * kMs});
  return v;
}

std::string write(const TempDir& dir, const std::vector<raw::Record>& records) {
  const std::string path = dir / "GIL_500_rank_0.json";
  raw::SummaryBuilder summary;
  for (const auto& r : records) summary.add(r);
  summary.set_end(12 * kMs);
  raw::Writer w(path, meta());
  for (const auto& r : records) w.write(r);
  w.finish(summary.to_json(10000, {}));
  return path;
}

std::vector<raw::Record> read_back(const std::string& path, raw::ReadResult* result = nullptr) {
  std::ifstream in(path);
  std::vector<raw::Record> out;
  const raw::ReadResult r = raw::read(
      in, path, [](const raw::Meta&) {}, [&](const raw::Record& x) { out.push_back(x); });
  if (result != nullptr) *result = r;
  return out;
}

}  // namespace

TEST_CASE("stack records: every kind round-trips through a raw file (format 3); the end marker still ends") {
  TempDir dir;
  const auto records = recording();
  raw::ReadResult r;
  const auto back = read_back(write(dir, records), &r);
  CHECK(r.complete);
  CHECK(r.format_version == 3);
  REQUIRE(back.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    CAPTURE(i);
    CHECK(back[i] == records[i]);
  }
  // The fast line reader vouches for them too (it reads them as the SAX reader does).
  {
    std::ifstream in(dir / "GIL_500_rank_0.json", std::ios::binary);
    size_t n = 0;
    const raw::FastRead fast = raw::read_fast(
        in, "f.json", [](const raw::Meta&) {}, [&](const raw::Record&) { ++n; });
    REQUIRE(fast.result.has_value());
    CHECK(fast.result->complete);
    CHECK(n == records.size());
  }
  // The lines as docs/raw-format.md shows them.
  CHECK(*raw::record_line(records[5]) == R"(["F",1,1000000,"run","/w.py",1,1])");
  CHECK(*raw::record_line(records[11]) == R"(["FS",2,2000000,1,[3,1]])");
  CHECK(*raw::record_line(records[8]) == R"(["K",501,1000000,1000000,"h",1])");
  CHECK(*raw::record_line(records[3]) == R"(["KN",502,0,"B","b-os"])");
  CHECK(raw::record_line(records[20])->rfind(R"(["KC",12000000,4,3,1,0,0,1,8,4000,100000,2,1])", 0) == 0);
  // A KC line of an older gilspy, without `reused`: read as 0.
  const std::string head = std::string("{\"format\":\"gilspy-raw\",\"format_version\":3,\n\"meta\":") +
                           raw::to_json(meta()).dump() + ",\n\"events\":[\n";
  std::istringstream old(head + R"(["KC",12000000,4,3,1,0,0,1,8,4000,100000,2])" +
                         ",\n[\"F\"]],\n\"summary\":{}}\n");
  std::vector<raw::StackStats> costs;
  raw::read(
      old, "old.json", [](const raw::Meta&) {},
      [&](const raw::Record& r) {
        if (const auto* c = std::get_if<raw::StackStats>(&r)) costs.push_back(*c);
      });
  REQUIRE(costs.size() == 1);
  CHECK(costs[0].name_reads == 2);
  CHECK(costs[0].reused == 0);
}

TEST_CASE("stack records: malformed stack lines are corrupt, naming the event") {
  const std::string head = std::string("{\"format\":\"gilspy-raw\",\"format_version\":3,\n\"meta\":") +
                           raw::to_json(meta()).dump() + ",\n\"events\":[\n";
  for (const char* bad : {R"(["F",0,1,"q","f",1,1])", R"(["F",1,1,2,"f",1,1])", R"(["FS",1,1,0,[0]])",
                          R"(["FS",1,1,0,5])", R"(["K",1,1,1,"x",1])", R"(["K",1,1,1,"h",0])",
                          R"(["KN",1,1])", R"(["KZ",1])", R"(["FX",1])", R"(["TT",1])"}) {
    CAPTURE(bad);
    std::istringstream in(head + bad + ",\n[\"F\"]],\n\"summary\":{}}\n");
    try {
      raw::read(
          in, "x.json", [](const raw::Meta&) {}, [](const raw::Record&) {});
      FAIL("accepted");
    } catch (const gilspy::Error& e) {
      CHECK(e.kind() == gilspy::ErrorKind::kCorrupt);
      CHECK(std::string(e.what()).find("event #1") != std::string::npos);
    }
  }
}

TEST_CASE("stack summary text: [no stack sample] comes after the places in the code, and is explained") {
  // 501 holds [0, 20) ms with no sample while 502 waits; 502 holds [20, 25) ms in work() while 501 waits.
  std::vector<raw::Record> v;
  v.push_back(raw::ThreadStart{.tid = 501, .ts = 0, .tstate = 1, .name = "A", .ns_tid = 0});
  v.push_back(raw::ThreadStart{.tid = 502, .ts = 0, .tstate = 2, .name = "B", .ns_tid = 0});
  v.push_back(raw::Waiters{.ts = 0, .n = 1});
  v.push_back(raw::Hold{.tid = 501, .ts = 0, .dur = 20 * kMs});
  v.push_back(raw::Wait{.tid = 502, .ts = 0, .dur = 20 * kMs});
  v.push_back(raw::FrameDef{
      .id = 1, .ts = 20 * kMs, .qualname = "work", .file = "/w.py", .line = 3, .first_line = 2});
  v.push_back(raw::StackDef{.id = 1, .ts = 20 * kMs, .truncated = false, .frames = {1}});
  v.push_back(raw::StackSample{
      .tid = 502, .ts = 20 * kMs, .since = 20 * kMs, .role = raw::GilRole::kHolding, .stack = 1});
  v.push_back(raw::Hold{.tid = 502, .ts = 20 * kMs, .dur = 5 * kMs});
  v.push_back(raw::Wait{.tid = 501, .ts = 20 * kMs, .dur = 5 * kMs});
  v.push_back(raw::Waiters{.ts = 25 * kMs, .n = 0});
  raw::SummaryBuilder s;
  for (const auto& r : v) s.add(r);
  s.set_end(25 * kMs);
  const auto holders = s.stacks().top_holders(10);
  REQUIRE(holders.size() == 2);
  REQUIRE(holders[0].function == "[no stack sample]");  // the bigger share, first by its figures
  std::string text;
  gilspy::cli::stack_summary_lines(text, s.stacks(), 25 * kMs, 10);
  INFO(text);
  const size_t work = text.find("work (/w.py:2)");
  const size_t none = text.find("[no stack sample]");
  REQUIRE(work != std::string::npos);
  REQUIRE(none != std::string::npos);
  CHECK(work < none);
  CHECK(text.find("  [no stack sample]: holds and waits whose stack was not read") != std::string::npos);
}

TEST_CASE("stack summary: holds cut at their samples, weighed by the waiters; wait sites; costs") {
  raw::SummaryBuilder s;
  for (const auto& r : recording()) s.add(r);
  s.set_end(12 * kMs);
  const auto holders = s.stacks().top_holders(10);
  REQUIRE(holders.size() == 2);
  CHECK(holders[0].function == "hog");
  CHECK(holders[0].file == "/w.py");
  CHECK(holders[0].hold_ns == 10 * kMs);
  CHECK(holders[0].contended_ns == 6 * kMs);  // [2, 8) ms: one thread waited
  CHECK(holders[0].longest_ns == 10 * kMs);   // both pieces of the one hold
  CHECK(holders[0].holds == 1);
  CHECK(holders[0].mean_waiters == doctest::Approx(0.6));
  CHECK(holders[1].function == "[no stack sample]");
  CHECK(holders[1].contended_ns == 0);
  const auto sites = s.stacks().wait_sites(10);
  REQUIRE(sites.size() == 1);
  CHECK(sites[0].function == "sleeper");
  CHECK(sites[0].line == 12);
  CHECK(sites[0].wait_ns == 6 * kMs);
  const json j = s.to_json(10000, {});
  CHECK(j["stacks"]["samples"] == 3);
  CHECK(j["stacks"]["bytes_per_stack"] == doctest::Approx(1000.0));
  CHECK(j["stacks"]["top_holders"][0]["function"] == "hog");
  // Names: the Python name, and the OS name it set beside it; the OS's own kept apart.
  CHECK(j["threads"][0]["name"] == "A");
  CHECK(j["threads"][1]["name"] == "B (b-os)");
  CHECK(j["threads"][1]["os_name"] == "thread 502");
}

TEST_CASE("collapsed: folded stacks weighted by hold, contention and wait") {
  TempDir dir;
  const std::string raw_path = write(dir, recording());
  const std::string run = "run (/w.py:1)";
  auto fold = [&](cv::FoldWeight w, const std::string& name) {
    const auto report = cv::convert_to_collapsed({raw_path}, dir / name, {.weight = w});
    CHECK(report.stack_samples == 3);
    return read_folded(dir / name);
  };
  const auto hold = fold(cv::FoldWeight::kHold, "hold.folded");
  CHECK(hold == std::map<std::string, uint64_t>{{run + ";hog (/w.py:5)", 5000},
                                                {run + ";hog (/w.py:7)", 5000},
                                                {"[no stack sample]", 1000}});
  const auto contention = fold(cv::FoldWeight::kContention, "contention.folded");
  CHECK(contention ==
        std::map<std::string, uint64_t>{{run + ";hog (/w.py:5)", 4000}, {run + ";hog (/w.py:7)", 2000}});
  const auto wait = fold(cv::FoldWeight::kWait, "wait.folded");
  CHECK(wait == std::map<std::string, uint64_t>{{run + ";sleeper (/w.py:12)", 6000}});
  CHECK(cv::default_collapsed_path("d/GIL_1_rank_0.json") == "d/GIL_1_rank_0.folded");
  CHECK(cv::default_collapsed_path("d/GIL_1_rank_0.json.partial") == "d/GIL_1_rank_0.folded");
}

TEST_CASE("trace: a hold names its function and carries its stack; frames nest inside it") {
  TempDir dir;
  const std::string raw_path = write(dir, recording());
  const std::string trace = dir / "t.trace.json";
  cv::convert_to_chrome_trace({raw_path}, trace);
  const std::string text = slurp(trace);
  const auto check = gilspy::test::check_chrome_trace(text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems.front()));
  const json doc = json::parse(text);
  std::vector<json> hold_a, frames_a;
  std::map<int64_t, std::string> lanes;
  std::map<int64_t, int> names_per_lane;  // one each: the Python name, not also the start's "thread 501"
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      lanes[e["tid"]] = e["args"]["name"];
      ++names_per_lane[e["tid"]];
    }
    if (e["ph"] != "X" || e["tid"] != 501) continue;
    if (e["name"] == "hold_gil") hold_a.push_back(e);
    if (e["cat"] == "stack") frames_a.push_back(e);
  }
  CHECK(lanes[501] == "A");
  CHECK(lanes[502] == "B (b-os)");
  for (const auto& [tid, n] : names_per_lane)
    CHECK_MESSAGE(n == 1, "lane " << tid << " named " << n << " times");
  REQUIRE(hold_a.size() == 1);
  CHECK(hold_a[0]["args"]["function"] == "hog");
  CHECK(hold_a[0]["args"]["line"] == 5);
  CHECK(hold_a[0]["args"]["samples"] == 2);
  CHECK(hold_a[0]["args"]["stack"] == json::array({"hog (/w.py:5)", "run (/w.py:1)"}));
  // run spans the hold; hog is cut where the second sample was (line 5, then line 7).
  REQUIRE(frames_a.size() == 3);
  CHECK(frames_a[0]["name"] == "run");
  CHECK(frames_a[0]["ts"] == hold_a[0]["ts"]);
  CHECK(frames_a[0]["dur"].get<double>() < hold_a[0]["dur"].get<double>());
  CHECK(frames_a[1]["name"] == "hog");
  CHECK(frames_a[1]["args"]["line"] == 5);
  CHECK(frames_a[2]["args"]["line"] == 7);
  CHECK(frames_a[2]["ts"].get<double>() == doctest::Approx(frames_a[1]["ts"].get<double>() + 5000.0));
  // B's wait names where it waited; its stack was truncated at the depth limit, and says so.
  bool wait_seen = false;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["tid"] == 502 && e["name"] == "take_gil") {
      wait_seen = true;
      CHECK(e["args"]["function"] == "sleeper");
      CHECK(e["args"]["stack_truncated"] == true);
    }
  }
  CHECK(wait_seen);
}

TEST_CASE("trace without frame slices (convert --no-stacks): the holds keep their stacks in args") {
  TempDir dir;
  const std::string raw_path = write(dir, recording());
  const std::string trace = dir / "t.trace.json";
  cv::convert_to_chrome_trace({raw_path}, trace, {.frame_slices = false});
  const std::string text = slurp(trace);
  const auto check = gilspy::test::check_chrome_trace(text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems.front()));
  int frames = 0, holds = 0;
  const json doc = json::parse(text);
  for (const json& e : doc["traceEvents"]) {
    frames += e.value("cat", "") == "stack" ? 1 : 0;
    if (e["ph"] == "X" && e["tid"] == 501 && e["name"] == "hold_gil") {
      ++holds;
      CHECK(e["args"]["function"] == "hog");
      CHECK(e["args"]["stack"] == json::array({"hog (/w.py:5)", "run (/w.py:1)"}));
    }
  }
  CHECK(frames == 0);
  CHECK(holds == 1);
}

TEST_CASE("trace check: frame slices may nest inside the slice they start in, nothing else may") {
  auto problems = [](const std::string& events) {
    return gilspy::test::check_chrome_trace("{\"traceEvents\":[" + events + "]}").problem_count;
  };
  const std::string hold = R"({"ph":"X","cat":"gil","name":"hold_gil","pid":1,"tid":2,"ts":10.0,"dur":10.0})";
  auto frame = [](double ts, double dur) {
    return R"({"ph":"X","cat":"stack","name":"f","pid":1,"tid":2,"ts":)" + std::to_string(ts) + R"(,"dur":)" +
           std::to_string(dur) + "}";
  };
  CHECK(problems(hold + "," + frame(10.0, 9.998) + "," + frame(10.0, 4.0) + "," + frame(14.0, 5.0)) == 0);
  CHECK(problems(hold + "," + frame(12.0, 9.0)) == 1);   // past the hold's end
  CHECK(problems(hold + "," + frame(10.0, 10.5)) == 1);  // longer than its parent: not inside it
  // A GIL slice inside another is the overlap the check exists for.
  CHECK(problems(hold + R"(,{"ph":"X","cat":"gil","name":"take_gil","pid":1,"tid":2,"ts":12.0,"dur":1.0})") ==
        1);
  // The drop_gil at a hold's end, where the next hold and its frames start.
  CHECK(problems(hold + R"(,{"ph":"I","s":"t","cat":"gil","name":"drop_gil","pid":1,"tid":2,"ts":20.0})" +
                 R"(,{"ph":"X","cat":"gil","name":"hold_gil","pid":1,"tid":2,"ts":20.0,"dur":5.0},)" +
                 frame(20.0, 4.998)) == 0);
}

}  // namespace unit_stack_records
