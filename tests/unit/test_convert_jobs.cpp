// convert for whole jobs: many GIL_*_rank_*.json in any order come out in rank order (first appearance and
// process_sort_index); a container's recording shows its host pid with its namespace pid beside it, and with
// --pid-namespace target its own pid and tids; gzip I/O round-trips.
#include <doctest/doctest.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/chrome_trace.hpp"
#include "convert/gzip_io.hpp"
#include "raw/raw_format.hpp"
#include "support/trace_check.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace cv = gilspy::convert;
namespace fs = std::filesystem;
using nlohmann::json;

// Named per file, so that the unity build can put test files together.
namespace unit_convert_jobs {
namespace {

using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

std::string write_rank(const TempDir& dir, int64_t pid, int64_t rank, int64_t ns_pid = 0) {
  raw::Meta m;
  m.gilspy_version = "0.1.0";
  m.pid = pid;
  m.rank = rank;
  m.ns_pid = ns_pid;
  m.python_version = "3.12.3";
  m.realtime_ns = 1700000000000000000 + rank * 1000;
  m.rate_hz = 1000;
  const std::string path = dir / ("GIL_" + std::to_string(pid) + "_rank_" + std::to_string(rank) + ".json");
  raw::Writer w(path, m);
  const int64_t worker = pid + 5;
  w.write(raw::ThreadStart{.tid = pid, .ts = 0, .tstate = 1, .name = "MainThread", .ns_tid = ns_pid});
  w.write(raw::ThreadStart{.tid = worker,
                           .ts = 0,
                           .tstate = 2,
                           .name = "thread " + std::to_string(worker),
                           .ns_tid = ns_pid != 0 ? ns_pid + 5 : 0});
  w.write(raw::Hold{.tid = worker, .ts = 100, .dur = 1000});
  w.write(raw::Wait{.tid = pid, .ts = 100, .dur = 1000});
  w.finish({{"duration_ns", 2000}, {"threads", json::array()}});
  return path;
}

}  // namespace

TEST_CASE("convert: ranks given in any order come out in rank order") {
  TempDir dir;
  const std::vector<std::string> inputs = {write_rank(dir, 3002, 2), write_rank(dir, 3000, 0),
                                           write_rank(dir, 3003, 3), write_rank(dir, 3001, 1)};
  const std::string out = dir / "job.trace.json";
  const auto report = cv::convert_to_chrome_trace(inputs, out);
  REQUIRE(report.inputs.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(report.inputs[i].meta.rank == static_cast<int64_t>(i));
  const std::string text = slurp(out);
  CHECK(gilspy::test::check_chrome_trace(text).ok());
  const json doc = json::parse(text);
  std::vector<int64_t> first_seen;
  std::map<int64_t, int64_t> sort_index;
  for (const auto& e : doc["traceEvents"]) {
    const int64_t pid = e["pid"];
    if (std::find(first_seen.begin(), first_seen.end(), pid) == first_seen.end()) first_seen.push_back(pid);
    if (e["name"] == "process_sort_index") sort_index[pid] = e["args"]["sort_index"];
  }
  CHECK(first_seen == std::vector<int64_t>{3000, 3001, 3002, 3003});
  CHECK(sort_index == std::map<int64_t, int64_t>{{3000, 0}, {3001, 1}, {3002, 2}, {3003, 3}});
  for (size_t i = 0; i < 4; ++i) CHECK(doc["otherData"]["inputs"][i]["rank"] == i);
}

TEST_CASE(
    "convert: a container's recording, shown as the host sees it or (--pid-namespace target) as it does") {
  TempDir dir;
  const std::string in = write_rank(dir, 880001, 0, /*ns_pid=*/1);
  // Default: the host's pid and tids, the namespace's beside them.
  const std::string host = dir / "host.trace.json";
  cv::convert_to_chrome_trace({in}, host);
  json doc = json::parse(slurp(host));
  std::map<int64_t, std::string> lanes;
  std::string pname;
  for (const auto& e : doc["traceEvents"]) {
    CHECK(e["pid"] == 880001);
    if (e["name"] == "thread_name") lanes[e["tid"]] = e["args"]["name"];
    if (e["name"] == "process_name") pname = e["args"]["name"];
  }
  CHECK(pname == "python 3.12.3 pid 880001 rank 0 (pid 1 in its PID namespace)");
  CHECK(lanes[880006] == "thread 880006 [tid 6 in its PID namespace]");
  CHECK(doc["otherData"]["inputs"][0]["meta"]["ns_pid"] == 1);
  // target: pid 1, threads 1 and 6, as a profiler inside the container has them.
  const std::string target = dir / "target.trace.json";
  const auto report = cv::convert_to_chrome_trace({in}, target, {.pid_namespace = cv::PidNamespace::kTarget});
  CHECK(report.inputs[0].trace_pid == 1);
  const std::string text = slurp(target);
  CHECK(gilspy::test::check_chrome_trace(text).ok());
  doc = json::parse(text);
  std::set<int64_t> tids;
  for (const auto& e : doc["traceEvents"]) {
    CHECK(e["pid"] == 1);
    if (e["ph"] == "X" && e["name"] != "gil_waiters 1") tids.insert(e["tid"].get<int64_t>());
    if (e["name"] == "process_name") pname = e["args"]["name"];
  }
  CHECK(tids == std::set<int64_t>{1, 6});
  CHECK(pname == "python 3.12.3 pid 1 rank 0 (pid 880001 on the host)");
  // A recording outside any container reads the same either way.
  const std::string plain = write_rank(dir, 4000, 0);
  const auto r2 =
      cv::convert_to_chrome_trace({plain}, dir / "p.json", {.pid_namespace = cv::PidNamespace::kTarget});
  CHECK(r2.inputs[0].trace_pid == 4000);
}

TEST_CASE("gzip I/O: written compressed, read back; concatenated members read as one; damage is an error") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"ph\":\"X\",\"ts\":" + std::to_string(i) + "},\n";
  const std::string gz = dir / "t.json.gz";
  {
    cv::OutputBytes out(gz, 0600, true);
    out.write(text.substr(0, 1000));
    out.write(text.substr(1000));
    CHECK_FALSE(fs::exists(gz));  // unnamed until complete
    out.commit();
  }
  CHECK(fs::file_size(gz) < text.size() / 4);
  auto read_all = [](const std::string& path) {
    cv::InputBytes in(path);
    std::string s;
    char buf[777];
    for (size_t n; (n = in.read(buf, sizeof buf)) > 0;) s.append(buf, n);
    return s;
  };
  CHECK(read_all(gz) == text);
  // Two members, as `cat a.gz b.gz` makes.
  const std::string both = dir / "both.gz";
  {
    std::ofstream o(both, std::ios::binary);
    o << slurp(gz) << slurp(gz);
  }
  CHECK(read_all(both) == text + text);
  // Cut short, or a flipped byte: kBadInput naming the file.
  const std::string cut = dir / "cut.gz";
  {
    const std::string bytes = slurp(gz);
    std::ofstream o(cut, std::ios::binary);
    o << bytes.substr(0, bytes.size() / 2);
  }
  CHECK_THROWS_AS(read_all(cut), gilspy::Error);
  // Not gzip: passed through, whatever the name.
  const std::string plain = dir / "plain.gz";
  {
    std::ofstream o(plain, std::ios::binary);
    o << "{}";
  }
  CHECK(read_all(plain) == "{}");
  CHECK(cv::has_gzip_suffix("a.json.gz"));
  CHECK_FALSE(cv::has_gzip_suffix("a.json"));
}

// reader_safe_dur_ns computes the doubles a viewer reads by division (exact below 2^53 ns) instead of
// printing and parsing the text: the durations it picks are those the text would give (largest with ts + dur
// <= end as doubles parsed from the written text), also on the epoch itself (absolute µs, ~1.7e18 ns).
TEST_CASE("convert: reader_safe_dur_ns agrees with the doubles parsed from the text it writes") {
  auto parsed = [](int64_t ns) {
    const std::string text = cv::format_us(ns);
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
  };
  std::mt19937_64 rng(99);
  for (int i = 0; i < 20000; ++i) {
    const bool absolute = i % 4 == 0;
    const int64_t start = absolute
                              ? 1'700'000'000'000'000'000 + static_cast<int64_t>(rng() % 1'000'000'000'000)
                              : static_cast<int64_t>(rng() % (int64_t{1} << 52));
    const int64_t end = start + static_cast<int64_t>(rng() % 100'000'000);
    CAPTURE(start);
    CAPTURE(end);
    const int64_t dur = cv::reader_safe_dur_ns(start, end);
    REQUIRE(dur >= 0);
    REQUIRE(dur <= end - start);
    CHECK(parsed(start) + parsed(dur) <= parsed(end));
    // Not shorter than it must be: 1 ns more would pass the end below 2^53 ns (on the epoch, by less than the
    // half-ulp step the search takes there).
    if (!absolute && dur < end - start) CHECK(parsed(start) + parsed(dur + 1) > parsed(end));
    if (absolute) CHECK(end - start - dur <= 500);
  }
}

}  // namespace unit_convert_jobs
