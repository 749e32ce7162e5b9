// convert --merge-into: GIL lanes added to real PyTorch profiler (Kineto) traces (tests/data/kineto, from
// HTA) and to an Ascend-shaped trace_view.json of our own. Each time: the output parses, every original event
// and top-level member is there unchanged and in order (traceEvents first), the GIL lanes sit in the
// profiler's process on tids of their own, a hold lands inside the profiler slice it was recorded in; .gz in
// and out; the errors (not a trace, no matching pid) and --pid-map, a container's pid, a second merge.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/gzip_io.hpp"
#include "convert/merge_lanes.hpp"
#include "convert/merge_trace.hpp"
#include "raw/raw_format.hpp"
#include "support/damage.hpp"
#include "support/trace_check.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace cv = gilspy::convert;
namespace fs = std::filesystem;
using gilspy::Error;
using gilspy::ErrorKind;
using ojson = nlohmann::ordered_json;

// Named per file, so that the unity build can put test files together.
namespace unit_merge_trace {
namespace {

using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

const fs::path kKineto = fs::path(GILSPY_SOURCE_DIR) / "tests" / "data" / "kineto";

// A file's text, gunzipped if it is gzip.
std::string text_of(const std::string& path) {
  cv::InputBytes in(path);
  std::string text;
  char buf[1 << 15];
  for (size_t n; (n = in.read(buf, sizeof buf)) > 0;) text.append(buf, n);
  return text;
}

raw::Meta meta_for(int64_t pid, int64_t realtime_ns) {
  raw::Meta m;
  m.gilspy_version = "0.1.0";
  m.pid = pid;
  m.python_version = "3.11.9";
  m.hostname = "h";
  m.monotonic_ns = 1'000'000;
  m.realtime_ns = realtime_ns;
  m.rate_hz = 1000;
  return m;
}

void write_raw(const std::string& path, const raw::Meta& m, const std::vector<raw::Record>& records) {
  raw::Writer w(path, m);
  for (const auto& r : records) w.write(r);
  w.finish({{"duration_ns", 2'000'000}, {"threads", nlohmann::json::array()}});
}

// A recording of `tid` (named as gilspy names a thread that is not the main one) holding the GIL for 1 ms at
// 0.5 ms, waiting from 2 ms for 0.5 ms; a second thread, the main one, holding from 1.5 ms.
std::vector<raw::Record> two_threads(int64_t pid, int64_t tid, int64_t ns_tid = 0, int64_t ns_pid = 0) {
  return {raw::ThreadStart{.tid = pid, .ts = 0, .tstate = 1, .name = "MainThread", .ns_tid = ns_pid},
          raw::ThreadStart{.tid = tid,
                           .ts = 0,
                           .tstate = 2,
                           .name = "thread " + std::to_string(tid) + " (worker)",
                           .ns_tid = ns_tid},
          raw::Hold{.tid = tid, .ts = 500'000, .dur = 1'000'000},
          raw::Hold{.tid = pid, .ts = 1'500'000, .dur = 400'000},
          raw::Wait{.tid = tid, .ts = 2'000'000, .dur = 500'000},
          raw::Waiters{.ts = 2'000'000, .n = 1},
          raw::Waiters{.ts = 2'500'000, .n = 0},
          raw::ThreadEnd{.tid = tid, .ts = 3'000'000},
          raw::ThreadEnd{.tid = pid, .ts = 3'000'000}};
}

// A trace's ts in ns (numbers are µs; Ascend writes strings), exactly for strings.
int64_t ts_ns(const ojson& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const size_t dot = s.find('.');
    return std::stoll(s.substr(0, dot)) * 1000 + std::stoll(s.substr(dot + 1));
  }
  if (v.is_number_integer()) return v.get<int64_t>() * 1000;  // absolute µs: past what a double holds in ns
  return std::llround(v.get<double>() * 1000.0);
}

struct Fixture {
  std::string file;
  int64_t pid;      // the program's process
  int64_t base_ns;  // baseTimeNanoseconds, or 0 (absolute µs)
};

// The longest "X" slice of the program's process on one of its threads (not the process lane): the window a
// recording is placed in.
const ojson* longest_slice(const ojson& events, int64_t pid) {
  const ojson* best = nullptr;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X" || !e["pid"].is_number_integer() || e["pid"] != pid) continue;
    if (!e["tid"].is_number_integer() || e["tid"] == 0) continue;
    if (best == nullptr || e["dur"].get<double>() > (*best)["dur"].get<double>()) best = &e;
  }
  return best;
}

struct Merged {
  ojson before, after;
  std::string text;
  size_t original_events = 0;
  std::vector<const ojson*> gil;  // the events gilspy added
};

// `pid`: the profiler's process the lanes went into, as the trace writes it (a number, or a string pid).
Merged check_merge(const std::string& original_path, const std::string& output, const ojson& pid) {
  Merged m;
  const std::string original = text_of(original_path);
  m.text = text_of(output);
  m.before = ojson::parse(original);
  m.after = ojson::parse(m.text);
  const bool object = m.before.is_object();
  const ojson& events_before = object ? m.before["traceEvents"] : m.before;
  const ojson& events_after = object ? m.after["traceEvents"] : m.after;
  m.original_events = events_before.size();
  REQUIRE(events_after.size() > events_before.size());
  // Every original event, unchanged and in order, then gilspy's.
  for (size_t i = 0; i < events_before.size(); ++i) {
    CAPTURE(i);
    REQUIRE(events_after[i] == events_before[i]);
  }
  for (size_t i = events_before.size(); i < events_after.size(); ++i) m.gil.push_back(&events_after[i]);
  if (object) {
    // traceEvents first, then every other member in its order, then "gilspy".
    std::vector<std::string> keys_before, keys_after;
    for (const auto& [k, v] : m.before.items()) {
      if (k != "traceEvents") keys_before.push_back(k);
    }
    for (const auto& [k, v] : m.after.items()) keys_after.push_back(k);
    REQUIRE(!keys_after.empty());
    CHECK(keys_after.front() == "traceEvents");
    CHECK(keys_after.back().rfind("gilspy", 0) == 0);
    CHECK(std::vector<std::string>(keys_after.begin() + 1, keys_after.end() - 1) == keys_before);
    for (const auto& k : keys_before) CHECK(m.after[k] == m.before[k]);
  }
  // The members as text, byte for byte: HTA finds the rank with a regex on "rank": N.
  if (original.find("\"rank\": ") != std::string::npos) CHECK(m.text.find("\"rank\": ") != std::string::npos);
  // The structural rules on gilspy's events.
  const auto shared = gilspy::test::check_chrome_trace(m.text, {.merged = true});
  std::string problems;
  for (const auto& p : shared.problems) problems += p + "\n";
  CHECK_MESSAGE(shared.ok(), problems);
  CHECK(shared.events > 0);
  // The GIL lanes in the profiler's process, never on a tid the profiler uses.
  std::set<int64_t> profiler_tids;
  for (const auto& e : events_before) {
    if (e.contains("pid") && e["pid"] == pid && e.contains("tid") && e["tid"].is_number_integer()) {
      profiler_tids.insert(e["tid"].get<int64_t>());
    }
  }
  for (const ojson* e : m.gil) {
    CAPTURE(e->dump());
    CHECK((*e)["pid"] == pid);
    const std::string ph = (*e)["ph"];
    CHECK((ph == "X" || ph == "I" || ph == "C" || ph == "M"));
    if (ph != "C") CHECK(profiler_tids.count((*e)["tid"].get<int64_t>()) == 0);
    if (ph == "M") CHECK((*e)["name"] != "process_name");  // the process is the profiler's, named already
  }
  return m;
}

std::vector<const ojson*> named(const Merged& m, const std::string& ph, const std::string& name) {
  std::vector<const ojson*> out;
  for (const ojson* e : m.gil) {
    if ((*e)["ph"] == ph && (*e)["name"] == name) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "merge: each real Kineto trace gets GIL lanes in its process, inside the slice they were recorded in") {
  const std::vector<Fixture> fixtures = {
      {"rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 1074, 1719853884000000000},
      {"benchmark_result_493459_1694039959_trace.json.gz", 493459, 0},
      {"triton_example.json.gz", 3100453, 1727743122000000000},  // its ProfilerStep#1 (13 s)
  };
  for (const auto& f : fixtures) {
    CAPTURE(f.file);
    TempDir dir;
    const std::string trace = (kKineto / f.file).string();
    const ojson original = ojson::parse(text_of(trace));
    const ojson* slice = longest_slice(original["traceEvents"], f.pid);
    REQUIRE(slice != nullptr);
    const int64_t tid = (*slice)["tid"].get<int64_t>();
    const int64_t slice_start_ns = f.base_ns + ts_ns((*slice)["ts"]);
    const int64_t slice_dur_ns = ts_ns((*slice)["dur"]);
    REQUIRE(slice_dur_ns > 4'000'000);
    // The recording starts 1 µs into that slice (its clock anchor inside the trace's window).
    const std::string rec = dir / "GIL_rec.json";
    const int64_t worker = tid == f.pid ? f.pid + 1 : tid;
    write_raw(rec, meta_for(f.pid, slice_start_ns + 1000), two_threads(f.pid, worker));
    const std::string out = dir / "merged.json";
    const auto report = cv::merge_into_trace({rec}, out, {.trace = trace});
    CHECK(report.input_gzip);
    CHECK_FALSE(report.output_gzip);
    CHECK(report.absolute_times == (f.base_ns == 0));
    REQUIRE(report.merged.size() == 1);
    CHECK(report.merged[0].matched);
    CHECK(report.merged[0].matched_by == "pid");
    CHECK(report.merged[0].overlaps);
    CHECK(report.convert.inputs[0].trace_pid == f.pid);
    const Merged m = check_merge(trace, out, f.pid);

    // Lanes: "GIL <tid> (<name>)" on kGilTidBase + tid (free in these traces), sorted beside the thread.
    std::map<int64_t, std::string> lanes;
    for (const ojson* e : named(m, "M", "thread_name")) lanes[(*e)["tid"]] = (*e)["args"]["name"];
    CHECK(lanes[cv::kGilTidBase + worker] == "GIL " + std::to_string(worker) + " (worker)");
    CHECK(lanes[cv::kGilTidBase + f.pid] == "GIL " + std::to_string(f.pid) + " (MainThread)");
    CHECK(lanes.count(cv::kGilTidBase + cv::kWaitersTid) == 1);
    for (const ojson* e : named(m, "M", "thread_sort_index")) {
      if ((*e)["tid"] == cv::kGilTidBase + worker) CHECK((*e)["args"]["sort_index"] == worker);
    }
    // The worker's hold: recorded 0.5 ms after the anchor, i.e. 501 µs into the profiler's slice, for 1 ms.
    const auto holds = named(m, "X", "hold_gil");
    REQUIRE(holds.size() == 2);
    const ojson* h = (*holds[0])["tid"] == cv::kGilTidBase + worker ? holds[0] : holds[1];
    const double tolerance_ns = f.base_ns == 0 ? 500 : 1;  // absolute µs: doubles 0.25 µs apart
    const int64_t hold_ns = (f.base_ns + ts_ns((*h)["ts"]));
    CHECK(std::abs(static_cast<double>(hold_ns - (slice_start_ns + 501'000))) <= tolerance_ns);
    CHECK(hold_ns > slice_start_ns);
    CHECK(hold_ns + ts_ns((*h)["dur"]) < slice_start_ns + slice_dur_ns);
    CHECK(std::abs(static_cast<double>(ts_ns((*h)["dur"]) - 1'000'000)) <= tolerance_ns);
    // What was merged, at the end.
    const ojson& about = m.after.back();
    CHECK(about["inputs"][0]["merged_by"] == "pid");
    CHECK(about["inputs"][0]["trace_pid"] == f.pid);
  }
}

TEST_CASE("merge: .json.gz in and out; the gzip output is the plain output compressed") {
  TempDir dir;
  const std::string trace = (kKineto / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").string();
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(1074, 1719853884000000000 + 1212075548353304000), two_threads(1074, 3553));
  const std::string plain = dir / "merged.json", gz = dir / "merged.json.gz";
  cv::merge_into_trace({rec}, plain, {.trace = trace});
  const auto report = cv::merge_into_trace({rec}, gz, {.trace = trace});
  CHECK(report.output_gzip);
  const std::string gz_bytes = text_of(gz);  // gunzipped by text_of...
  std::ifstream raw_gz(gz, std::ios::binary);
  const int b0 = raw_gz.get(), b1 = raw_gz.get();
  CHECK(b0 == 0x1f);  // ...the file itself is gzip
  CHECK(b1 == 0x8b);
  CHECK(gz_bytes == text_of(plain));
  // A plain .json trace merges too (input by content, not by name), here the gunzipped fixture.
  const std::string unzipped = dir / "trace.json";
  spit(unzipped, text_of(trace));
  const std::string out2 = dir / "merged2.json";
  const auto r2 = cv::merge_into_trace({rec}, out2, {.trace = unzipped});
  CHECK_FALSE(r2.input_gzip);
  check_merge(unzipped, out2, 1074);
}

TEST_CASE("merge: an Ascend-shaped trace_view.json (bare array, ts strings) gets string-ts GIL events") {
  TempDir dir;
  const int64_t pid = 31337, tid = 31340;
  // Shaped as torch_npu writes it (../shared/design.md section 6): a "Python" process with pid = OS pid and
  // threads "Thread <tid>", CANN and hardware processes on synthetic 32-bit pids, ts strings of absolute µs.
  const std::string trace = dir / "trace_view.json";
  spit(trace, R"([
{"name": "process_name", "pid": 31337, "tid": 0, "ph": "M", "args": {"name": "Python"}},
{"name": "thread_name", "pid": 31337, "tid": 31340, "ph": "M", "args": {"name": "Thread 31340"}},
{"name": "aten::matmul", "pid": 31337, "tid": 31340, "ts": "1736405443863674.400", "dur": 5000.25, "ph": "X", "args": {"Sequence number": 7}},
{"name": "process_name", "pid": 2147483000, "tid": 0, "ph": "M", "args": {"name": "CANN"}},
{"name": "AscendCL@aclnnMatmul", "pid": 2147483000, "tid": 31340, "ts": "1736405443863680.100", "dur": 12.5, "ph": "X"},
{"name": "process_name", "pid": 2147483001, "tid": 0, "ph": "M", "args": {"name": "Ascend Hardware"}},
{"name": "MatMulV2", "pid": 2147483001, "tid": 2, "ts": "1736405443863690.000", "dur": 80.0, "ph": "X"}
]
)");
  const int64_t anchor = 1736405443863674400 + 1000;  // 1 µs into aten::matmul
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(pid, anchor), two_threads(pid, tid));
  const std::string out = dir / "trace_view.merged.json";
  const auto report = cv::merge_into_trace({rec}, out, {.trace = trace});
  CHECK(report.shape == cv::TraceShape::kArray);
  CHECK(report.absolute_times);
  CHECK(report.trace_events == 7);
  const Merged m = check_merge(trace, out, pid);
  CHECK(m.after.is_array());
  for (const ojson* e : m.gil) {
    if ((*e)["ph"] != "M") CHECK((*e)["ts"].is_string());
  }
  // Exact, as strings: the worker's hold at anchor + 0.5 ms.
  const auto holds = named(m, "X", "hold_gil");
  REQUIRE(holds.size() == 2);
  const ojson* h = (*holds[0])["tid"] == cv::kGilTidBase + tid ? holds[0] : holds[1];
  CHECK((*h)["ts"] == "1736405443864175.400");
  // In its window: after aten::matmul starts, before it ends.
  CHECK(ts_ns((*h)["ts"]) > 1736405443863674400);
  CHECK(ts_ns((*h)["ts"]) + ts_ns((*h)["dur"]) < 1736405443863674400 + 5000250);
}

// PyTorch 1.13's legacy profiler (Debian's python3-torch, no Kineto), as EventList.export_chrome_trace writes
// it: "[", each event followed by ", ", the last ", " cut off, "]"; the program on the string pid "CPU
// functions", tids the profiler's own small thread numbers, ts in µs after the profiler started; a CUDA
// kernel's flow pair and slice on "CUDA functions".
const char* const kLegacyTrace =
    R"([{"name": "aten::ones", "ph": "X", "ts": 12.345, "dur": 30.125, "tid": 1, "pid": "CPU functions", )"
    R"("args": {}}, {"name": "train_step", "ph": "X", "ts": 100.0, "dur": 5000.0, "tid": 1, "pid": "CPU )"
    R"(functions", "args": {}}, {"name": "aten::add", "ph": "X", "ts": 150.5, "dur": 20.0, "tid": 2, )"
    R"("pid": "CPU functions", "args": {}}, {"name": "aten::add", "ph": "s", "ts": 150.5, "tid": 2, "pid": )"
    R"("CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}, {"name": "aten::add", "ph": "f", "ts": )"
    R"(160.0, "tid": 0, "pid": "CUDA functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}, {"name": )"
    R"("vectorized_add", "ph": "X", "ts": 160.0, "dur": 8.0, "tid": 0, "pid": "CUDA functions", "args": {}}])";

TEST_CASE("merge: PyTorch's legacy trace: refused without --align-at, saying why; placed with it") {
  TempDir dir;
  const std::string trace = dir / "legacy.json";
  spit(trace, kLegacyTrace);
  const int64_t pid = 5150, tid = 5151;
  const int64_t zero_ns = 1765100000123456000;  // the profiler's start, time.time_ns()
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(pid, zero_ns + 101'000), two_threads(pid, tid));  // 1 µs into train_step
  const std::string out = dir / "merged.json";
  // Times after the profiler's start cannot be placed on the recording's clock: said so, nothing written.
  try {
    cv::merge_into_trace({rec}, out, {.trace = trace});
    FAIL("merged a trace with relative times without --align-at");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kBadInput);
    const std::string what = e.what();
    CHECK(what.find("--align-at NS") != std::string::npos);
    CHECK(what.find("legacy profiler") != std::string::npos);
    CHECK(what.find("0.012 ms") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out));
  // With the start, or with an event's start: the lanes in "CPU functions", ts in µs after the start.
  for (const cv::TimeAnchor& anchor : {cv::TimeAnchor{.marker = "", .ns = zero_ns},
                                       cv::TimeAnchor{.marker = "train_step", .ns = zero_ns + 100'000}}) {
    CAPTURE(anchor.marker);
    const auto report = cv::merge_into_trace({rec}, out, {.trace = trace, .align_at = anchor});
    CHECK(report.shape == cv::TraceShape::kArray);
    CHECK(report.aligned_by_option);
    CHECK(report.convert.base_time_ns == zero_ns);
    REQUIRE(report.merged.size() == 1);
    CHECK(report.merged[0].matched_by == "legacy");
    CHECK(report.merged[0].trace_pid_text == "CPU functions");
    CHECK(report.merged[0].overlaps);
    const Merged m = check_merge(trace, out, "CPU functions");
    const auto holds = named(m, "X", "hold_gil");
    REQUIRE(holds.size() == 2);
    const ojson* h = (*holds[0])["tid"] == cv::kGilTidBase + tid ? holds[0] : holds[1];
    CHECK((*h)["ts"].is_number());
    CHECK(ts_ns((*h)["ts"]) == 601'000);  // 101 µs + 0.5 ms, inside train_step [100, 5100) µs
    CHECK(ts_ns((*h)["dur"]) == 1'000'000);
  }
  // A marker the trace lacks is named.
  try {
    cv::merge_into_trace({rec}, out, {.trace = trace, .align_at = cv::TimeAnchor{.marker = "sync", .ns = 5}});
    FAIL("aligned on a marker the trace lacks");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("no event named \"sync\"") != std::string::npos);
  }
}

TEST_CASE("merge: --pid-map names a string pid; two recordings into a legacy trace are not guessed") {
  TempDir dir;
  const std::string trace = dir / "legacy.json";
  spit(trace, kLegacyTrace);
  const int64_t zero_ns = 1765100000123456000;
  const std::string a = dir / "GIL_a.json", b = dir / "GIL_b.json";
  write_raw(a, meta_for(700, zero_ns + 101'000), two_threads(700, 701));
  raw::Meta meta_b = meta_for(800, zero_ns + 101'000);
  meta_b.rank = 1;
  write_raw(b, meta_b, two_threads(800, 801));
  const cv::TimeAnchor start{.marker = "", .ns = zero_ns};
  // Which of the two the profiler saw is not for gilspy to guess: no match, the processes named as written.
  try {
    cv::merge_into_trace({a, b}, dir / "x.json", {.trace = trace, .align_at = start});
    FAIL("guessed which recording the legacy trace is of");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("whose processes are \"CPU functions\"") != std::string::npos);
  }
  const std::string out = dir / "merged.json";
  const auto report = cv::merge_into_trace(
      {a, b}, out, {.trace = trace, .pid_map = {{800, "CPU functions"}}, .align_at = start});
  REQUIRE(report.merged.size() == 2);
  CHECK_FALSE(report.merged[0].matched);  // rank 0: pid 700, a process of its own
  CHECK(report.merged[1].matched_by == "--pid-map");
  const ojson after = ojson::parse(text_of(out));
  std::set<std::string> pids;
  for (size_t i = 6; i < after.size(); ++i) pids.insert(after[i]["pid"].dump());
  CHECK(pids == std::set<std::string>{"\"CPU functions\"", "700"});
  CHECK_THROWS_AS(
      cv::merge_into_trace({a}, dir / "y.json",
                           {.trace = trace, .pid_map = {{700, "GPU functions"}}, .align_at = start}),
      Error);
}

TEST_CASE("merge: --align-at is NS or NAME@NS") {
  CHECK(cv::parse_align_at("1765100000123456000").ns == 1765100000123456000);
  CHECK(cv::parse_align_at("1765100000123456000").marker.empty());
  const auto named_anchor = cv::parse_align_at("step@1@7");  // a name may hold '@': the last one splits
  CHECK(named_anchor.marker == "step@1");
  CHECK(named_anchor.ns == 7);
  for (const char* bad : {"", "x", "@5", "step@", "step@x", "0", "-5", "12.5", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(cv::parse_align_at(bad), Error);
  }
}

TEST_CASE(
    "merge: no recording matches a process of the trace: nothing written, the message points at --pid-map") {
  TempDir dir;
  const std::string trace = (kKineto / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").string();
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(4242, 1719853884000000000 + 1212075548353304000), two_threads(4242, 4243));
  const std::string out = dir / "merged.json";
  try {
    cv::merge_into_trace({rec}, out, {.trace = trace});
    FAIL("merged a recording of no process of the trace");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kBadInput);
    const std::string what = e.what();
    CHECK(what.find("4242") != std::string::npos);
    CHECK(what.find("1074 (pyper:trainer:8:2)") != std::string::npos);
    CHECK(what.find("--pid-map GILPID:TRACEPID") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out));
  // --pid-map says which process it is: then the lanes go there, named by the recording's tids.
  const auto report = cv::merge_into_trace({rec}, out, {.trace = trace, .pid_map = {{4242, "1074"}}});
  CHECK(report.merged[0].matched_by == "--pid-map");
  const Merged m = check_merge(trace, out, 1074);
  CHECK_FALSE(named(m, "X", "hold_gil").empty());
  // A map to a pid the trace lacks is an error too.
  CHECK_THROWS_AS(cv::merge_into_trace({rec}, dir / "x.json", {.trace = trace, .pid_map = {{4242, "999"}}}),
                  Error);
  CHECK_THROWS_AS(cv::parse_pid_map("12"), Error);
  CHECK_THROWS_AS(cv::parse_pid_map("a:1"), Error);
  CHECK_THROWS_AS(cv::parse_pid_map("12:"), Error);
  CHECK(cv::parse_pid_map("12:34") == std::pair<int64_t, std::string>{12, "34"});
  CHECK(cv::parse_pid_map("12:CPU functions") == std::pair<int64_t, std::string>{12, "CPU functions"});
}

TEST_CASE(
    "merge: a container's recording matches the profiler's pid in its own namespace, lanes by namespace "
    "tid") {
  TempDir dir;
  const std::string trace = (kKineto / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").string();
  // On the host the target is 880001 (threads 880001, 880007); inside its namespace, where the profiler ran,
  // it is 1074 (threads 1074, 3553).
  raw::Meta meta = meta_for(880001, 1719853884000000000 + 1212075548353304000);
  meta.ns_pid = 1074;
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta, two_threads(880001, 880007, 3553, 1074));
  const std::string out = dir / "merged.json";
  const auto report = cv::merge_into_trace({rec}, out, {.trace = trace});
  CHECK(report.merged[0].matched_by == "ns_pid");
  const Merged m = check_merge(trace, out, 1074);
  std::map<int64_t, std::string> lanes;
  for (const ojson* e : named(m, "M", "thread_name")) lanes[(*e)["tid"]] = (*e)["args"]["name"];
  CHECK(lanes[cv::kGilTidBase + 3553] == "GIL 3553 (worker)");
  CHECK(lanes[cv::kGilTidBase + 1074] == "GIL 1074 (MainThread)");
  // The Python name, read after the thread started, names the merged lane (it was lost: "GIL 3553 (worker)"
  // stayed the OS name).
  std::vector<raw::Record> named_later = two_threads(880001, 880007, 3553, 1074);
  named_later.insert(
      named_later.begin() + 2,
      raw::ThreadName{.tid = 880007, .ts = 100, .name = "preprocess", .text_id = 0, .os_name = ""});
  write_raw(rec, meta, named_later);
  cv::merge_into_trace({rec}, dir / "named.json", {.trace = trace});
  const Merged n = check_merge(trace, dir / "named.json", 1074);
  lanes.clear();
  for (const ojson* e : named(n, "M", "thread_name")) lanes[(*e)["tid"]] = (*e)["args"]["name"];
  CHECK(lanes[cv::kGilTidBase + 3553] == "GIL 3553 (preprocess)");
  // --pid-namespace host: the host pid only, which the trace does not have.
  CHECK_THROWS_AS(
      cv::merge_into_trace({rec}, dir / "y.json", {.trace = trace, .pid_namespace = cv::PidNamespace::kHost}),
      Error);
}

TEST_CASE("merge: merging into a merged trace keeps both, on tids apart, under gilspy and gilspy_2") {
  TempDir dir;
  const std::string trace = (kKineto / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").string();
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(1074, 1719853884000000000 + 1212075548353304000), two_threads(1074, 3553));
  const std::string once = dir / "once.json.gz", twice = dir / "twice.json";
  cv::merge_into_trace({rec}, once, {.trace = trace});
  cv::merge_into_trace({rec}, twice, {.trace = once});
  const Merged m = check_merge(once, twice, 1074);
  CHECK(m.after.contains("gilspy"));
  CHECK(m.after.contains("gilspy_2"));
  std::set<int64_t> lanes;
  for (const ojson* e : named(m, "M", "thread_name")) lanes.insert((*e)["tid"].get<int64_t>());
  CHECK(lanes.count(cv::kGilTidBase + 3553 + 10'000'000) == 1);  // the first merge's lane is taken
}

TEST_CASE("merge: what is not a framework trace is refused, naming it, and nothing is written") {
  TempDir dir;
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(1074, 1719853884000000000), two_threads(1074, 3553));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.json", ""},
      {"garbage.json", "hello, this is not JSON\n"},
      {"scalar.json", "42\n"},
      {"no_events.json", R"({"schemaVersion": 1, "deviceProperties": []})"},
      {"events_not_array.json", R"({"traceEvents": {"a": 1}})"},
      {"cut.json", R"({"traceEvents": [{"ph": "X", "pid": 1074, "tid": 1, "ts": 1, "dur": 2},)"},
      {"bad_event.json", R"({"traceEvents": [{"ph": "X", "pid": 1074 "tid": 1}]})"},
      {"trailing.json", R"({"traceEvents": []} {"x": 1})"},
      {"deep.json", "[" + std::string(300, '[') + std::string(300, ']') + "]"},
      {"not_gzip.json.gz", std::string("\x1f\x8b\x08\x00garbage", 12)},
  };
  for (const auto& [name, text] : cases) {
    CAPTURE(name);
    const std::string trace = dir / name;
    spit(trace, text);
    const std::string out = dir / "merged.json";
    try {
      cv::merge_into_trace({rec}, out, {.trace = trace});
      FAIL("merged into something that is not a trace");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kBadInput);
      CHECK(std::string(e.what()).find(name) != std::string::npos);
    }
    CHECK_FALSE(fs::exists(out));
  }
  // The recording given as the trace: an object without traceEvents.
  try {
    cv::merge_into_trace({rec}, dir / "m.json", {.trace = rec});
    FAIL("merged into a raw recording");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("has no \"traceEvents\"") != std::string::npos);
  }
  CHECK_THROWS_AS(cv::merge_into_trace({rec}, dir / "m.json", {.trace = dir / "missing.json"}), Error);
}

TEST_CASE("merge: a gzip bomb is refused in one line, its memory bounded, nothing written") {
  TempDir dir;
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(1074, 1719853884000000000), two_threads(1074, 3553));
  // One event holding an 80 MiB string: ~80 KB of gzip. The scanner holds an event whole while it parses it.
  const std::string bomb = dir / "bomb.json.gz";
  {
    cv::OutputBytes out(bomb, 0600, true);
    out.write(R"({"traceEvents": [{"ph": "X", "pid": 1074, "tid": 1, "ts": 1, "dur": 2, "name": ")");
    const std::string chunk(size_t{1} << 20, 'a');
    for (int i = 0; i < 80; ++i) out.write(chunk);
    out.write("\"}]}");
    out.commit();
  }
  CHECK(fs::file_size(bomb) < (size_t{1} << 20));
  const std::string out = dir / "merged.json";
  try {
    cv::merge_into_trace({rec}, out, {.trace = bomb});
    FAIL("merged a gzip bomb");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kBadInput);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("bomb.json.gz") != std::string::npos);
    CHECK(what.find("longer than 64 MiB") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out));
  // However it is spread, what a compressed input expands to is bounded (here 1 MiB, 100 times).
  cv::InputBytes in(bomb, {.min_bytes = 1 << 20, .max_ratio = 100});
  std::vector<char> buf(1 << 16);
  try {
    while (in.read(buf.data(), buf.size()) > 0) {
    }
    FAIL("read all of a gzip bomb");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kBadInput);
    CHECK(std::string(e.what()).find("expands more than 100 times") != std::string::npos);
  }
}

TEST_CASE("merge: thread names shortened for GIL lanes") {
  CHECK(cv::short_thread_name(12, "MainThread") == "MainThread");
  CHECK(cv::short_thread_name(12, "thread 12 (worker)") == "worker");
  CHECK(cv::short_thread_name(12, "thread 12") == "");
  CHECK(cv::short_thread_name(12, "thread 13 (x)") == "thread 13 (x)");
}

TEST_CASE("merge: random damage to a trace is merged or refused as kBadInput, never anything else") {
  TempDir dir;
  const std::string original = text_of((kKineto / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").string());
  const std::string rec = dir / "GIL_rec.json";
  write_raw(rec, meta_for(1074, 1719853884000000000 + 1212075548353304000), two_threads(1074, 3553));
  std::mt19937 rng(7);
  const std::string alphabet = "[]{},:\"-0123456789.e \n\\x";
  size_t merged = 0;
  for (int round = 0; round < 400; ++round) {
    const std::string s = gilspy::test::damaged(original, rng, alphabet, 8);
    CAPTURE(round);
    const std::string trace = dir / "t.json", out = dir / "o.json";
    spit(trace, s);
    try {
      cv::merge_into_trace({rec}, out, {.trace = trace});
      ++merged;
      const ojson written = ojson::parse(text_of(out), nullptr, /*allow_exceptions=*/false);
      CHECK_FALSE(written.is_discarded());  // what it writes is JSON
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kBadInput);
      CHECK_FALSE(fs::exists(out));
    }
    fs::remove(out);
  }
  CHECK(merged > 0);
}

}  // namespace unit_merge_trace
