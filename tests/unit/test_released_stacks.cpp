// record --all-threads downstream of the sampler: stack samples of threads that neither hold nor wait (role
// "r") round-trip through a raw file, make released stretches from their start to the thread's next hold,
// wait or end (or the recording's end), cut where the stack was read again; the summary's "without the GIL"
// sites, --format collapsed's released and all weights, and the trace's without_gil slices with their frames.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/stack_summary_text.hpp"
#include "convert/chrome_trace.hpp"
#include "convert/collapsed.hpp"
#include "convert/speedscope.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"
#include "support/trace_check.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace cv = gilspy::convert;
using nlohmann::json;

// Named per file, so that the unity build can put test files together.
namespace unit_released_stacks {
namespace {

using gilspy::test::read_folded;
using gilspy::test::slurp;
using gilspy::test::TempDir;

constexpr int64_t kMs = 1'000'000;

raw::Meta meta() {
  raw::Meta m;
  m.gilspy_version = "0.2.0";
  m.pid = 600;
  m.python_version = "3.12.1";
  m.monotonic_ns = 1'000'000'000;
  m.realtime_ns = 1'700'000'000'000'000'000;
  m.rate_hz = 10000;
  return m;
}

raw::StackSample released(int64_t tid, int64_t ts, int64_t since, uint32_t stack) {
  return {.tid = tid, .ts = ts, .since = since, .role = raw::GilRole::kReleased, .stack = stack};
}

// C (601) is released from 0 in recv (line 20), read at 0.5 ms; holds [3, 4) ms; released again from 4 ms,
// read at 4.2 ms in recv (line 20) and at 9 ms in recv (line 21); ends at 12 ms. D (602) is released from 0
// in wait_forever (line 30), read at 1 ms, and never holds, waits or ends: its stretch is open at the end.
std::vector<raw::Record> recording() {
  std::vector<raw::Record> v;
  v.push_back(raw::ThreadStart{.tid = 601, .ts = 0, .tstate = 1, .name = "C", .ns_tid = 0});
  v.push_back(raw::ThreadStart{.tid = 602, .ts = 0, .tstate = 2, .name = "D", .ns_tid = 0});
  v.push_back(
      raw::FrameDef{.id = 1, .ts = 0, .qualname = "run", .file = "/s.py", .line = 2, .first_line = 1});
  v.push_back(
      raw::FrameDef{.id = 2, .ts = 0, .qualname = "recv", .file = "/s.py", .line = 20, .first_line = 18});
  v.push_back(
      raw::FrameDef{.id = 3, .ts = 0, .qualname = "recv", .file = "/s.py", .line = 21, .first_line = 18});
  v.push_back(raw::FrameDef{
      .id = 4, .ts = 0, .qualname = "wait_forever", .file = "/s.py", .line = 30, .first_line = 29});
  v.push_back(raw::StackDef{.id = 1, .ts = 0, .truncated = false, .frames = {2, 1}});
  v.push_back(raw::StackDef{.id = 2, .ts = 0, .truncated = false, .frames = {3, 1}});
  v.push_back(raw::StackDef{.id = 3, .ts = 0, .truncated = false, .frames = {4, 1}});
  v.push_back(released(601, kMs / 2, 0, 1));
  v.push_back(released(602, 1 * kMs, 0, 3));
  v.push_back(raw::Hold{.tid = 601, .ts = 3 * kMs, .dur = 1 * kMs});
  v.push_back(released(601, 4 * kMs + kMs / 5, 4 * kMs, 1));
  v.push_back(released(601, 9 * kMs, 4 * kMs, 2));
  v.push_back(raw::ThreadEnd{.tid = 601, .ts = 12 * kMs});
  v.push_back(raw::Stats{.ts = 12 * kMs});
  return v;
}

std::string write(const TempDir& dir) {
  const std::string path = dir / "GIL_600_rank_0.json";
  raw::SummaryBuilder summary;
  for (const auto& r : recording()) summary.add(r);
  summary.set_end(12 * kMs);
  raw::Writer w(path, meta());
  for (const auto& r : recording()) w.write(r);
  w.finish(summary.to_json(10000, {}));
  return path;
}

}  // namespace

TEST_CASE("released stacks: role r round-trips; stretches run to the next hold, the thread's end, the end") {
  TempDir dir;
  const std::string path = write(dir);
  CHECK(*raw::record_line(released(601, 5, 4, 1)) == R"(["K",601,5,4,"r",1])");
  std::ifstream in(path);
  std::vector<raw::Record> back;
  raw::read(
      in, path, [](const raw::Meta&) {}, [&](const raw::Record& r) { back.push_back(r); });
  CHECK(back == recording());

  raw::SummaryBuilder s;
  for (const auto& r : recording()) s.add(r);
  // Before the end is known, D's stretch is open: counted to the end asked for, and left open.
  auto sites = s.stacks().released_sites(10, 6 * kMs);
  REQUIRE(sites.size() == 3);
  CHECK(sites[0].function == "recv");  // C: [0, 3) and [4, 9) at line 20
  CHECK(sites[0].line == 20);
  CHECK(sites[0].released_ns == 8 * kMs);
  CHECK(sites[0].stretches == 2);
  CHECK(sites[0].longest_ns == 5 * kMs);
  CHECK(sites[1].function == "wait_forever");
  CHECK(sites[1].released_ns == 6 * kMs);
  CHECK(sites[2].line == 21);  // C: [9, 12), closed by its end
  CHECK(sites[2].released_ns == 3 * kMs);
  sites = s.stacks().released_sites(10, 12 * kMs);
  REQUIRE(sites.size() == 3);
  CHECK(sites[0].function == "wait_forever");
  CHECK(sites[0].released_ns == 12 * kMs);
  CHECK(sites[0].stretches == 1);
  s.set_end(12 * kMs);
  const json j = s.to_json(10000, {});
  REQUIRE(j["stacks"].contains("released_sites"));
  CHECK(j["stacks"]["released_sites"][0]["function"] == "wait_forever");
  CHECK(j["stacks"]["released_sites"][0]["released_ns"] == 12 * kMs);
  // The summary's table, after the holds' and waits'.
  std::string text;
  gilspy::cli::stack_summary_lines(text, s.stacks(), 12 * kMs, 12 * kMs);
  CHECK(text.find("without the GIL") != std::string::npos);
  CHECK(text.find("wait_forever (/s.py:30)") != std::string::npos);
  // A recording without released samples says nothing of them.
  raw::SummaryBuilder plain;
  plain.add(raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 1, .name = "x", .ns_tid = 0});
  plain.add(raw::Hold{.tid = 1, .ts = 0, .dur = kMs});
  CHECK_FALSE(plain.to_json(10000, {})["stacks"].contains("released_sites"));
}

TEST_CASE("released stacks: a stretch begins no earlier than the thread's last hold ended") {
  // The sample's `since` comes from the polls; a hold's end from the probes (--exact) may be later.
  std::vector<raw::StackPiece> got;
  raw::StackPieces pieces([&](const std::vector<raw::StackPiece>& p) {
    if (!p.empty() && p.front().role == raw::GilRole::kReleased) got = p;
  });
  pieces.add(raw::StackDef{.id = 1, .ts = 0, .truncated = false, .frames = {}});
  pieces.add(raw::Hold{.tid = 7, .ts = 0, .dur = 5 * kMs});
  pieces.add(released(7, 6 * kMs, 4 * kMs, 1));
  pieces.add(raw::Wait{.tid = 7, .ts = 8 * kMs, .dur = kMs});
  REQUIRE(got.size() == 1);
  CHECK(got[0].from == 5 * kMs);
  CHECK(got[0].to == 8 * kMs);
  // finish() closes what is open at the end given; nothing twice.
  got.clear();
  pieces.add(released(7, 10 * kMs, 9 * kMs, 1));
  pieces.finish(20 * kMs);
  REQUIRE(got.size() == 1);
  CHECK(got[0].from == 9 * kMs);
  CHECK(got[0].to == 20 * kMs);
  got.clear();
  pieces.finish(30 * kMs);
  CHECK(got.empty());
}

TEST_CASE("released stacks: collapsed by released and all; without_gil slices in the trace") {
  TempDir dir;
  const std::string path = write(dir);
  const std::string run = "run (/s.py:2)";
  cv::convert_to_collapsed({path}, dir / "r.folded", {.weight = cv::FoldWeight::kReleased});
  CHECK(read_folded(dir / "r.folded") ==
        std::map<std::string, uint64_t>{{run + ";recv (/s.py:20)", 8000},
                                        {run + ";recv (/s.py:21)", 3000},
                                        {run + ";wait_forever (/s.py:30)", 12000}});
  cv::convert_to_collapsed({path}, dir / "a.folded", {.weight = cv::FoldWeight::kAll});
  const auto all = read_folded(dir / "a.folded");
  CHECK(all.at("[no stack sample]") == 1000);  // C's hold, not read
  CHECK(all.at(run + ";wait_forever (/s.py:30)") == 12000);

  const std::string trace = dir / "t.trace.json";
  cv::convert_to_chrome_trace({path}, trace);
  const std::string text = slurp(trace);
  const auto check = gilspy::test::check_chrome_trace(text);
  CHECK_MESSAGE(check.ok(), (check.problems.empty() ? "" : check.problems.front()));
  std::map<int64_t, std::vector<json>> without, frames;
  const json doc = json::parse(text);
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto tid = e["tid"].get<int64_t>();
    if (e["name"] == "without_gil") without[tid].push_back(e);
    if (e["cat"] == "stack") frames[tid].push_back(e);
  }
  REQUIRE(without[601].size() == 2);
  CHECK(without[601][0]["ts"] == 0.0);
  CHECK(without[601][0]["args"]["function"] == "recv");
  CHECK(without[601][1]["ts"] == 4000.0);
  CHECK(without[601][1]["args"]["samples"] == 2);
  REQUIRE(without[602].size() == 1);
  CHECK(without[602][0]["args"]["function"] == "wait_forever");
  CHECK(without[602][0]["dur"].get<double>() == doctest::Approx(12000.0).epsilon(1e-6));
  CHECK(frames[602].size() == 2);  // run, wait_forever
  // recv cut at 9 ms (line 20, then 21) under run spanning the stretch.
  CHECK(frames[601].size() == 2 + 3);
}

TEST_CASE("speedscope: one profile per view, weighing what collapsed gives it, frames shared and parsed") {
  TempDir dir;
  const std::string path = write(dir);
  const auto report = cv::convert_to_speedscope({path}, dir / "p.speedscope.json");
  CHECK(report.profiles ==
        std::vector<std::string>{"held while others waited", "held", "waited", "without the GIL"});
  const json doc = json::parse(slurp(dir / "p.speedscope.json"));
  CHECK(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  const json& frames = doc["shared"]["frames"];
  std::map<std::string, json> by_name;
  for (const json& f : frames) by_name[f["name"]] = f;
  CHECK(by_name["recv"]["file"] == "/s.py");
  CHECK(by_name["[no stack sample]"].size() == 1);  // a name only
  const cv::FoldWeight weights[] = {cv::FoldWeight::kContention, cv::FoldWeight::kHold, cv::FoldWeight::kWait,
                                    cv::FoldWeight::kReleased};
  for (size_t i = 0; i < 4; ++i) {
    CAPTURE(i);
    const json& p = doc["profiles"][i];
    cv::convert_to_collapsed({path}, dir / "x.folded", {.weight = weights[i]});
    uint64_t total = 0;
    for (const auto& [stack, us] : read_folded(dir / "x.folded")) total += us;
    CHECK(p["endValue"] == total);
    CHECK(report.totals_us[i] == total);
    CHECK(p["samples"].size() == p["weights"].size());
    for (const json& sample : p["samples"]) {
      for (const json& f : sample) CHECK(f.get<size_t>() < frames.size());
    }
  }
  // Outermost first, as folded lines: the wait_forever stack is run, then wait_forever.
  const json& released_profile = doc["profiles"][3];
  bool seen = false;
  for (size_t k = 0; k < released_profile["samples"].size(); ++k) {
    const json& sample = released_profile["samples"][k];
    if (frames[sample.back().get<size_t>()]["name"] != "wait_forever") continue;
    seen = true;
    CHECK(frames[sample.front().get<size_t>()]["name"] == "run");
    CHECK(released_profile["weights"][k] == 12000);
  }
  CHECK(seen);
  CHECK(cv::default_speedscope_path("d/GIL_1_rank_0.json.partial") == "d/GIL_1_rank_0.speedscope.json");
}

}  // namespace unit_released_stacks
