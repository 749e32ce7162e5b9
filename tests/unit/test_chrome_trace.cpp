// convert: raw recordings to Chrome Trace JSON. A golden hand-written file checked event by event and
// structurally, a merge of two ranks on different clocks, generated recordings (lanes never overlap), a
// recovered recording, and the errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/chrome_trace.hpp"
#include "raw/raw_format.hpp"
#include "support/trace_check.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace cv = gilspy::convert;
namespace fs = std::filesystem;
using gilspy::Error;
using gilspy::ErrorKind;
using nlohmann::json;

// Named per file, so that the unity build can put test files together.
namespace unit_chrome_trace {
namespace {

using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

const fs::path kSmall = fs::path(GILSPY_SOURCE_DIR) / "tests" / "data" / "small.raw.json";
constexpr int64_t kSmallRealtime = 1700000000123456789;

// Every `"ts":` / `"dur":` number in `text`, as written (no std::regex: g++ 12 warns inside it under ASan).
struct NumberText {
  bool is_ts;
  std::string text;
  char after;  // the character after the number
};
std::vector<NumberText> ts_and_dur_numbers(std::string_view text) {
  std::vector<NumberText> out;
  for (const std::string_view key : {std::string_view("\"ts\":"), std::string_view("\"dur\":")}) {
    for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
      size_t end = at + key.size();
      while (end < text.size() &&
             std::string_view("-+.0123456789eE").find(text[end]) != std::string_view::npos) {
        ++end;
      }
      out.push_back({key == "\"ts\":", std::string(text.substr(at + key.size(), end - at - key.size())),
                     end < text.size() ? text[end] : '\0'});
    }
  }
  return out;
}

// -?[0-9]+\.[0-9]{3}
bool three_decimals(const std::string& v) {
  size_t i = v.size() > 0 && v[0] == '-' ? 1 : 0;
  const size_t digits_from = i;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
  if (i == digits_from || i + 4 != v.size() || v[i] != '.') return false;
  for (size_t k = i + 1; k < v.size(); ++k) {
    if (v[k] < '0' || v[k] > '9') return false;
  }
  return true;
}

// "-12.345" -> -12345 (ns), exactly.
int64_t exact_ns(const std::string& v) {
  REQUIRE(three_decimals(v));
  const bool neg = v[0] == '-';
  const size_t dot = v.find('.');
  const int64_t a =
      std::stoll(v.substr(neg ? 1 : 0, dot - (neg ? 1 : 0))) * 1000 + std::stoll(v.substr(dot + 1));
  return neg ? -a : a;
}

// The output read back. ts and dur are taken from the text in exact ns, so that no double rounding hides a
// wrong last digit.
struct Trace {
  std::string text;
  json doc;
  std::vector<json> events;  // traceEvents
  std::vector<int64_t> ts;   // ts of each event in exact ns, parsed from the text
  std::vector<int64_t> dur;  // dur (or -1)
};

Trace load(const std::string& path) {
  Trace t;
  t.text = slurp(path);
  t.doc = json::parse(t.text);
  REQUIRE(t.doc.is_object());
  t.events = t.doc.at("traceEvents").get<std::vector<json>>();
  // One event a line: the lines between "[" and "]" are the events in order.
  std::istringstream lines(t.text);
  std::string line;
  std::getline(lines, line);
  REQUIRE(line == "{\"traceEvents\":[");
  size_t i = 0;
  while (std::getline(lines, line) && line != "],") {
    REQUIRE(i < t.events.size());
    int64_t ts = INT64_MIN, dur = -1;
    for (const auto& n : ts_and_dur_numbers(line)) {
      CHECK((n.after == ',' || n.after == '}'));
      (n.is_ts ? ts : dur) = exact_ns(n.text);
    }
    t.ts.push_back(ts);
    t.dur.push_back(dur);
    ++i;
  }
  REQUIRE(i == t.events.size());
  return t;
}

struct LaneKey {
  int64_t pid, tid;
  bool operator<(const LaneKey& o) const { return std::tie(pid, tid) < std::tie(o.pid, o.tid); }
};

// The structural rules every converted trace must follow. Returns the number of hold_gil slices per pid.
std::map<int64_t, size_t> check_structure(const Trace& t) {
  const json& d = t.doc;
  REQUIRE(d.is_object());
  // The shared checker: lanes ordered in double arithmetic, as viewers read them.
  const auto shared = gilspy::test::check_chrome_trace(t.text);
  std::string problems;
  for (const auto& p : shared.problems) problems += p + "\n";
  CHECK_MESSAGE(shared.problem_count == 0, problems);
  CHECK(shared.events > 0);
  // traceEvents first, in the text (nlohmann sorts keys, so look at the text).
  CHECK(t.text.rfind("{\"traceEvents\":[", 0) == 0);
  CHECK(d.at("displayTimeUnit") == "ms");
  CHECK(d.at("baseTimeNanoseconds").is_number_integer());
  CHECK(d.at("otherData").is_object());

  // Every ts / dur in the text has exactly three decimals.
  size_t numbers = 0;
  for (const auto& n : ts_and_dur_numbers(t.text)) {
    CAPTURE(n.text);
    CHECK(three_decimals(n.text));
    ++numbers;
  }
  CHECK(numbers >= t.events.size());

  std::map<LaneKey, std::vector<size_t>> lanes;  // X and I events per lane, in file order
  std::map<LaneKey, std::string> thread_names;
  std::map<int64_t, std::string> process_names;
  std::map<int64_t, size_t> holds;
  std::map<int64_t, int64_t> last_counter;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const json& e = t.events[i];
    CAPTURE(e.dump());
    const std::string ph = e.at("ph");
    CHECK((ph == "X" || ph == "I" || ph == "C" || ph == "M"));
    REQUIRE(e.at("pid").is_number_integer());
    REQUIRE(e.at("tid").is_number_integer());
    const LaneKey k{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()};
    CHECK(t.ts[i] != INT64_MIN);
    if (ph == "X") {
      CHECK(e.at("cat") == "gil");
      const std::string name = e.at("name");
      if (k.tid == cv::kWaitersTid) {  // the waiter count as slices: "gil_waiters N", N > 0
        CHECK(name.rfind("gil_waiters ", 0) == 0);
        CHECK(e.at("args").at("waiters").get<uint64_t>() > 0);
        CHECK(name == "gil_waiters " + std::to_string(e.at("args").at("waiters").get<uint64_t>()));
        CHECK(t.dur[i] > 0);
      } else {
        CHECK((name == "hold_gil" || name == "take_gil"));
      }
      CHECK(t.dur[i] >= 0);
      CHECK(k.tid != 0);
      lanes[k].push_back(i);
      if (name == "hold_gil") ++holds[k.pid];
    } else if (ph == "I") {
      CHECK(e.at("s") == "t");
      CHECK(e.at("name") == "drop_gil");
      CHECK(t.dur[i] == -1);
      lanes[k].push_back(i);
    } else if (ph == "C") {
      CHECK(e.at("name") == "gil_waiters");
      CHECK(e.at("args").at("waiters").is_number_unsigned());
      auto [it, fresh] = last_counter.try_emplace(k.pid, t.ts[i]);
      CHECK(it->second <= t.ts[i]);  // counter samples in time order
      it->second = t.ts[i];
    } else if (ph == "M") {
      const std::string name = e.at("name");
      if (name == "thread_name") thread_names[k] = e.at("args").at("name").get<std::string>();
      if (name == "process_name") process_names[k.pid] = e.at("args").at("name").get<std::string>();
    }
  }
  for (const auto& [k, idx] : lanes) {
    CAPTURE(k.pid);
    CAPTURE(k.tid);
    CHECK(thread_names.count(k) == 1);
    CHECK(process_names.count(k.pid) == 1);
    int64_t prev_ts = INT64_MIN, busy_until = INT64_MIN;
    for (const size_t i : idx) {
      CHECK(t.ts[i] >= prev_ts);  // non-decreasing within a lane
      prev_ts = t.ts[i];
      if (t.events[i].at("ph") == "X") {
        CHECK(t.ts[i] >= busy_until);  // slices of one lane never overlap
        busy_until = t.ts[i] + t.dur[i];
      }
    }
  }
  return holds;
}

std::vector<const json*> find(const Trace& t, const std::string& ph, const std::string& name,
                              int64_t tid = -1) {
  std::vector<const json*> out;
  for (const auto& e : t.events) {
    if (e.at("ph") == ph && e.at("name") == name && (tid < 0 || e.at("tid") == tid)) out.push_back(&e);
  }
  return out;
}

size_t index_of(const Trace& t, const json* e) {
  return static_cast<size_t>(e - t.events.data());
}

raw::Meta meta_for(int64_t pid, int64_t rank, int64_t realtime_ns) {
  raw::Meta m;
  m.gilspy_version = "0.1.0";
  m.pid = pid;
  m.rank = rank;
  m.python_version = "3.11.9";
  m.hostname = "h";
  m.monotonic_ns = 1'000'000;
  m.realtime_ns = realtime_ns;
  m.rate_hz = 1000;
  return m;
}

// A plausible recording: threads that wait, hold and release in turn, one at a time holding; records written
// in the order their intervals end (so threads interleave out of time order, as the recorder writes them).
struct Generated {
  std::vector<raw::Record> records;
  size_t holds = 0, waits = 0;
};

Generated generate(uint32_t seed, int64_t pid, int threads, int handoffs) {
  std::mt19937 rng(seed);
  Generated g;
  std::vector<std::pair<int64_t, raw::Record>> pending;  // (end time, record)
  auto put = [&](int64_t end, raw::Record r) { pending.emplace_back(end, std::move(r)); };
  std::vector<int64_t> tids;
  for (int i = 0; i < threads; ++i) tids.push_back(i == 0 ? pid : pid + 1 + i * 3);
  for (int i = 0; i < threads; ++i)
    put(0, raw::ThreadStart{tids[i], 0, static_cast<uint64_t>(0x1000 + i), "t" + std::to_string(i)});
  std::vector<int64_t> free_at(threads, 0);  // when each thread's last interval ended
  int64_t now = 0;
  int holder = 0;
  for (int h = 0; h < handoffs; ++h) {
    const int64_t hold = std::uniform_int_distribution<int64_t>(0, 50'000)(rng);
    put(now + hold, raw::Hold{tids[holder], now, hold});
    ++g.holds;
    free_at[holder] = now + hold;
    const int64_t end = now + hold;
    int next = std::uniform_int_distribution<int>(0, threads - 1)(rng);
    if (next != holder && free_at[next] < end) {
      // next waited from some point after its last interval until the hand-off
      const int64_t start = std::uniform_int_distribution<int64_t>(free_at[next], end)(rng);
      put(end, raw::Wait{tids[next], start, end - start});
      ++g.waits;
      put(start, raw::Waiters{start, 1});
      put(end, raw::Waiters{end, 0});
    }
    holder = next;
    now = end + std::uniform_int_distribution<int64_t>(0, 3)(rng);
  }
  for (int i = 0; i < threads; ++i) put(now + 1, raw::ThreadEnd{tids[i], now + 1});
  raw::Stats s{.ts = now + 1,
               .polls = 10,
               .late = 0,
               .missed = 0,
               .handoffs_seen = static_cast<uint64_t>(handoffs),
               .handoffs_total = static_cast<uint64_t>(handoffs)};
  put(now + 1, s);
  std::stable_sort(pending.begin(), pending.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& p : pending) g.records.push_back(std::move(p.second));
  return g;
}

void write_raw(const std::string& path, const raw::Meta& m, const std::vector<raw::Record>& records,
               bool finish = true) {
  raw::Writer w(path, m);
  for (const auto& r : records) w.write(r);
  if (finish) {
    w.finish({{"duration_ns", 1}, {"threads", json::array()}});
  } else {
    w.flush();
  }
}

void check_converts_to_bad_input(const std::string& input, const std::string& output,
                                 const std::string& name_in_msg, ErrorKind kind = ErrorKind::kBadInput) {
  try {
    cv::convert_to_chrome_trace({input}, output);
    FAIL("converted a bad input");
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    CHECK(std::string(e.what()).find(name_in_msg) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(output));
  // Nothing else beside the inputs: no temporary file of any name.
  for (const auto& entry : fs::directory_iterator(fs::path(output).parent_path())) {
    CHECK_MESSAGE(entry.path().extension() != ".tmp", entry.path().string());
  }
}

}  // namespace

TEST_CASE("convert: format_us writes microseconds with exactly three decimals") {
  CHECK(cv::format_us(0) == "0.000");
  CHECK(cv::format_us(1) == "0.001");
  CHECK(cv::format_us(999) == "0.999");
  CHECK(cv::format_us(1000) == "1.000");
  CHECK(cv::format_us(1234567) == "1234.567");
  CHECK(cv::format_us(-5) == "-0.005");
  CHECK(cv::format_us(-1234567) == "-1234.567");
  CHECK(cv::format_us(1'700'000'000'123'456'789) == "1700000000123456.789");
  CHECK(cv::format_us(INT64_MIN) == "-9223372036854775.808");
}

TEST_CASE("convert: the test's own number checker") {
  CHECK(three_decimals("0.000"));
  CHECK(three_decimals("-12.345"));
  CHECK_FALSE(three_decimals("12.34"));
  CHECK_FALSE(three_decimals("12.3456"));
  CHECK_FALSE(three_decimals("12"));
  CHECK_FALSE(three_decimals("1e3"));
  CHECK_FALSE(three_decimals(".123"));
  CHECK(exact_ns("-12.345") == -12345);
  CHECK(exact_ns("1700000000123456.789") == 1700000000123456789);
  const auto n = ts_and_dur_numbers(R"({"ts":1.5,"dur":2.000})");
  REQUIRE(n.size() == 2);
  CHECK(n[0].is_ts);
  CHECK(n[0].text == "1.5");
  CHECK(n[0].after == ',');
  CHECK(n[1].text == "2.000");
  CHECK(n[1].after == '}');
}

TEST_CASE("convert: default output path") {
  CHECK(cv::default_output_path("GIL_12_rank_0.json") == "GIL_12_rank_0.trace.json");
  CHECK(cv::default_output_path("/r/GIL_12_rank_0.json.partial") == "/r/GIL_12_rank_0.trace.json");
  CHECK(cv::default_output_path("dir.json/rec") == "dir.json/rec.trace.json");
  CHECK(cv::default_output_path("x.raw") == "x.raw.trace.json");
}

TEST_CASE("convert: golden small.raw.json") {
  REQUIRE(fs::exists(kSmall));
  TempDir dir;
  const std::string out = dir / "small.trace.json";
  const cv::ConvertReport report = cv::convert_to_chrome_trace({kSmall.string()}, out);
  CHECK_FALSE(fs::exists(out + ".tmp"));
  const Trace t = load(out);
  const auto holds = check_structure(t);

  REQUIRE(report.inputs.size() == 1);
  const auto& in = report.inputs[0];
  CHECK(in.complete);
  CHECK(in.problem.empty());
  CHECK(in.records == 19);
  CHECK(in.adjusted == 0);
  CHECK(in.trace_pid == 4242);
  CHECK_FALSE(in.summary_rebuilt);
  CHECK(report.events_written == t.events.size());
  CHECK(in.events == t.events.size());
  CHECK(report.base_time_ns == kSmallRealtime);
  CHECK(t.doc.at("baseTimeNanoseconds").get<int64_t>() == kSmallRealtime);

  // Counts: 3 H records, 3 W, 5 N; one drop_gil per hold; three named lanes.
  CHECK(holds.at(4242) == 3);
  CHECK(find(t, "X", "hold_gil").size() == 3);
  CHECK(find(t, "X", "take_gil").size() == 3);
  CHECK(find(t, "I", "drop_gil").size() == 3);
  CHECK(find(t, "C", "gil_waiters").size() == 5);
  CHECK(find(t, "M", "thread_name").size() == 4);  // three threads and the "GIL waiters" lane
  CHECK(find(t, "M", "thread_sort_index").size() == 4);

  const auto pn = find(t, "M", "process_name");
  REQUIRE(pn.size() == 1);
  CHECK((*pn[0])["pid"] == 4242);
  CHECK((*pn[0])["args"]["name"] == "python 3.12.3 pid 4242 rank 3");
  const auto ps = find(t, "M", "process_sort_index");
  REQUIRE(ps.size() == 1);
  CHECK((*ps[0])["args"]["sort_index"] == 3);
  const auto pl = find(t, "M", "process_labels");
  REQUIRE(pl.size() == 1);
  CHECK((*pl[0])["args"]["labels"] == "rank 3, host node7");

  std::map<int64_t, std::string> names;
  std::map<int64_t, int64_t> sort;
  for (const auto* e : find(t, "M", "thread_name")) {
    names[e->at("tid").get<int64_t>()] = e->at("args").at("name").get<std::string>();
  }
  for (const auto* e : find(t, "M", "thread_sort_index")) {
    sort[e->at("tid").get<int64_t>()] = e->at("args").at("sort_index").get<int64_t>();
  }
  CHECK(names == std::map<int64_t, std::string>{{4242, "MainThread (4242)"},
                                                {4250, "worker-1 (4250)"},
                                                {4260, "Thread-2 (4260)"},
                                                {cv::kWaitersTid, "GIL waiters"}});
  CHECK(sort.at(cv::kWaitersTid) == -1);  // the waiters above the threads
  CHECK(sort.at(4242) == 0);              // then the main thread
  CHECK(sort.at(4250) < sort.at(4260));

  // Exact events, as written in the text (ts relative to the file's own realtime anchor, the base).
  const auto main_holds = find(t, "X", "hold_gil", 4242);
  REQUIRE(main_holds.size() == 2);
  CHECK(t.ts[index_of(t, main_holds[0])] == 0);
  CHECK(t.dur[index_of(t, main_holds[0])] == 5000100);
  CHECK(t.ts[index_of(t, main_holds[1])] == 10000400);
  CHECK(t.dur[index_of(t, main_holds[1])] == 2345278);
  const auto worker_hold = find(t, "X", "hold_gil", 4250);
  REQUIRE(worker_hold.size() == 1);
  CHECK(t.ts[index_of(t, worker_hold[0])] == 5000200);
  CHECK(t.dur[index_of(t, worker_hold[0])] == 5000150);
  const auto drops = find(t, "I", "drop_gil", 4242);
  REQUIRE(drops.size() == 2);
  CHECK(t.ts[index_of(t, drops[0])] == 5000100);
  CHECK(t.ts[index_of(t, drops[1])] == 12345678);
  const auto waits = find(t, "X", "take_gil", 4260);
  REQUIRE(waits.size() == 1);
  CHECK(t.ts[index_of(t, waits[0])] == 6000100);
  CHECK(t.dur[index_of(t, waits[0])] == 6345578);
  CHECK(
      t.text.find(
          R"({"ph":"X","cat":"gil","name":"hold_gil","pid":4242,"tid":4250,"ts":5000.200,"dur":5000.150})") !=
      std::string::npos);
  CHECK(t.text.find(
            R"({"ph":"I","s":"t","cat":"gil","name":"drop_gil","pid":4242,"tid":4242,"ts":12345.678})") !=
        std::string::npos);
  const auto counters = find(t, "C", "gil_waiters");
  std::vector<uint64_t> values;
  for (const auto* c : counters) values.push_back(c->at("args").at("waiters").get<uint64_t>());
  CHECK(values == std::vector<uint64_t>{1, 0, 1, 2, 1});
  CHECK(t.ts[index_of(t, counters[3])] == 6000200);
  // ... and the same count as slices, one per stretch with waiters (none while 0, from 5000200 to 5000300),
  // the last one ending where the recording does.
  std::vector<std::tuple<std::string, int64_t, int64_t>> waiter_slices;
  for (const auto& e : t.events) {
    if (e.at("ph") == "X" && e.at("tid") == cv::kWaitersTid) {
      const size_t i = index_of(t, &e);
      waiter_slices.emplace_back(e.at("name").get<std::string>(), t.ts[i], t.ts[i] + t.dur[i]);
    }
  }
  CHECK(waiter_slices ==
        std::vector<std::tuple<std::string, int64_t, int64_t>>{{"gil_waiters 1", 150, 5000200},
                                                               {"gil_waiters 1", 5000300, 6000200},
                                                               {"gil_waiters 2", 6000200, 10000400},
                                                               {"gil_waiters 1", 10000400, 12345678}});
  // every event of a process is on its pid; metadata and counters on the process lane 0
  for (const auto& e : t.events) CHECK(e["pid"] == 4242);
  for (const auto* c : counters) CHECK((*c)["tid"] == 0);

  // otherData carries the input, with its summary as recorded.
  const json& other = t.doc.at("otherData");
  CHECK(other.at("gilspy_version").is_string());
  REQUIRE(other.at("inputs").size() == 1);
  const json& oi = other.at("inputs")[0];
  CHECK(oi.at("path") == kSmall.string());
  CHECK(oi.at("pid") == 4242);
  CHECK(oi.at("rank") == 3);
  CHECK(oi.at("python_version") == "3.12.3");
  CHECK(oi.at("complete") == true);
  CHECK(oi.at("problem") == "");
  CHECK(oi.at("summary").at("handoffs_total") == 3);
  CHECK(oi.at("summary").at("stop_reason") == "targets gone");
  CHECK(oi.at("last_stats").at("polls") == 123);
  CHECK(oi.at("trace_events") == t.events.size());
}

TEST_CASE("convert: two ranks on different clocks are merged on the earliest realtime anchor") {
  TempDir dir;
  const int64_t rt0 = 1'719'853'884'000'000'000 + 777;  // rank 0 started first
  const int64_t rt1 = rt0 + 2'500'000'123;              // rank 1, 2.5 s later
  // Rank 1 is given first on the command line: the base is still the earliest anchor.
  const std::string a = dir / "GIL_2001_rank_1.json";
  const std::string b = dir / "GIL_2000_rank_0.json";
  write_raw(
      a, meta_for(2001, 1, rt1),
      {raw::ThreadStart{2001, 0, 1, "MainThread (2001)"}, raw::Hold{2001, 1000, 500}, raw::Waiters{1100, 2}});
  write_raw(b, meta_for(2000, 0, rt0),
            {raw::ThreadStart{2000, 0, 1, "MainThread (2000)"}, raw::Hold{2000, 1000, 500}});
  const std::string out = dir / "merged.json";
  const auto report = cv::convert_to_chrome_trace({a, b}, out);
  CHECK(report.base_time_ns == rt0);
  const Trace t = load(out);
  check_structure(t);
  CHECK(t.doc.at("baseTimeNanoseconds").get<int64_t>() == rt0);

  std::map<int64_t, std::string> pnames;
  for (const auto* e : find(t, "M", "process_name")) {
    pnames[e->at("pid").get<int64_t>()] = e->at("args").at("name").get<std::string>();
  }
  CHECK(pnames == std::map<int64_t, std::string>{{2000, "python 3.11.9 pid 2000 rank 0"},
                                                 {2001, "python 3.11.9 pid 2001 rank 1"}});
  const auto h0 = find(t, "X", "hold_gil", 2000);
  const auto h1 = find(t, "X", "hold_gil", 2001);
  REQUIRE(h0.size() == 1);
  REQUIRE(h1.size() == 1);
  CHECK(t.ts[index_of(t, h0[0])] == 1000);
  CHECK(t.ts[index_of(t, h1[0])] == 1000 + (rt1 - rt0));
  CHECK(t.ts[index_of(t, h1[0])] - t.ts[index_of(t, h0[0])] == 2'500'000'123);
  // Unix time of rank 1's hold = base + ts
  CHECK(rt0 + t.ts[index_of(t, h1[0])] == rt1 + 1000);
  const auto c = find(t, "C", "gil_waiters");
  REQUIRE(c.size() == 1);
  CHECK((*c[0])["pid"] == 2001);
  CHECK(t.ts[index_of(t, c[0])] == 1100 + (rt1 - rt0));
  REQUIRE(t.doc["otherData"]["inputs"].size() == 2);
  // In rank order, whatever the order given (tests/unit/test_convert_jobs.cpp).
  CHECK(t.doc["otherData"]["inputs"][0]["rank"] == 0);
  CHECK(t.doc["otherData"]["inputs"][1]["rank"] == 1);
}

TEST_CASE("convert: inputs that share a pid stay apart") {
  TempDir dir;
  const std::string a = dir / "host_a.json";
  const std::string b = dir / "host_b.json";
  write_raw(a, meta_for(77, 0, 5'000'000'000), {raw::Hold{77, 0, 10}});
  write_raw(b, meta_for(77, 1, 5'000'000'000), {raw::Hold{77, 0, 10}});
  const std::string out = dir / "out.json";
  const auto report = cv::convert_to_chrome_trace({a, b, a}, out);
  REQUIRE(report.inputs.size() == 3);
  CHECK(report.inputs[0].trace_pid == 77);
  CHECK(report.inputs[1].trace_pid == 77 + cv::kPidOffset);
  CHECK(report.inputs[2].trace_pid == 77 + 2 * cv::kPidOffset);
  const Trace t = load(out);
  check_structure(t);
  std::set<int64_t> pids;
  for (const auto* e : find(t, "M", "process_name")) {
    pids.insert((*e)["pid"].get<int64_t>());
    CHECK((*e)["args"]["name"].get<std::string>().find("pid 77 ") != std::string::npos);  // the real pid
  }
  CHECK(pids.size() == 3);
  // an unnamed thread (no T record) still gets a lane name
  for (const auto* e : find(t, "M", "thread_name")) CHECK((*e)["args"]["name"] == "thread 77");
}

TEST_CASE("convert: generated recordings give ordered, non-overlapping lanes, one hold_gil per H record") {
  TempDir dir;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    const Generated g = generate(seed, 1000 + seed, 2 + static_cast<int>(seed % 4), 400);
    const std::string in = dir / ("g" + std::to_string(seed) + ".json");
    write_raw(in, meta_for(1000 + seed, 0, 1'600'000'000'000'000'000), g.records);
    const std::string out = dir / ("g" + std::to_string(seed) + ".trace.json");
    const auto report = cv::convert_to_chrome_trace({in}, out);
    CHECK(report.inputs[0].adjusted == 0);
    const Trace t = load(out);
    const auto holds = check_structure(t);
    CHECK(holds.at(1000 + seed) == g.holds);
    CHECK(find(t, "X", "take_gil").size() == g.waits);
    CHECK(find(t, "I", "drop_gil").size() == g.holds);
    // GIL: at most one holder at any time within a process
    std::vector<std::pair<int64_t, int64_t>> iv;
    for (const auto* e : find(t, "X", "hold_gil"))
      iv.emplace_back(t.ts[index_of(t, e)], t.dur[index_of(t, e)]);
    std::sort(iv.begin(), iv.end());
    for (size_t i = 1; i < iv.size(); ++i) CHECK(iv[i].first >= iv[i - 1].first + iv[i - 1].second);
  }
}

TEST_CASE("convert: a thread whose records overlap or go back in time is clamped, never overlapping") {
  TempDir dir;
  const std::string in = dir / "overlap.json";
  write_raw(in, meta_for(9, 0, 1'000'000'000'000),
            {raw::Hold{9, 100, 100},                      // [100,200)
             raw::Wait{9, 150, 100},                      // overlaps the hold: becomes [200,250)
             raw::Hold{9, 120, 10},                       // entirely before: becomes [250,250)
             raw::Hold{9, 300, 10},                       // fine
             raw::Waiters{50, 1}, raw::Waiters{40, 0}});  // counter going back: moved to 50
  const std::string out = dir / "overlap.trace.json";
  const auto report = cv::convert_to_chrome_trace({in}, out);
  CHECK(report.inputs[0].adjusted == 3);
  const Trace t = load(out);
  check_structure(t);
  const auto w = find(t, "X", "take_gil");
  REQUIRE(w.size() == 1);
  CHECK(t.ts[index_of(t, w[0])] == 200);
  CHECK(t.dur[index_of(t, w[0])] == 50);
  CHECK(find(t, "X", "hold_gil").size() == 3);
  CHECK(t.doc["otherData"]["inputs"][0]["adjusted_events"] == 3);
}

TEST_CASE("convert: an unfinished recording is converted as far as it goes, its summary rebuilt") {
  TempDir dir;
  const std::string text = slurp(kSmall);
  // cut in the middle of the 10th event line (["H",4250,5000200,5000150]): 9 events survive, one of them a
  // hold
  const size_t at = text.find("[\"H\",4250,5000200");
  REQUIRE(at != std::string::npos);
  const std::string in = dir / "GIL_4242_rank_3.json.partial";
  spit(in, text.substr(0, at + 10));
  const std::string out = dir / "recovered.json";
  const auto report = cv::convert_to_chrome_trace({in}, out);
  REQUIRE(report.inputs.size() == 1);
  const auto& r = report.inputs[0];
  CHECK_FALSE(r.complete);
  CHECK_FALSE(r.problem.empty());
  CHECK(r.records == 9);
  CHECK(r.summary_rebuilt);
  const Trace t = load(out);
  const auto holds = check_structure(t);
  CHECK(holds.at(4242) == 1);
  CHECK(find(t, "X", "take_gil").size() == 1);
  CHECK(find(t, "M", "thread_name").size() == 4);  // and the waiters lane (a 1 from 150 to 5000200)
  const json& oi = t.doc["otherData"]["inputs"][0];
  CHECK(oi["complete"] == false);
  CHECK(oi["problem"] == r.problem);
  CHECK(oi["summary_rebuilt"] == true);
  CHECK(oi["summary"]["threads"].size() == 3);
  CHECK(oi["summary"]["threads"][0]["hold_ns"] == 5000100);
  CHECK(oi["summary"]["threads"][1]["wait_ns"] == 5000100);
}

TEST_CASE("convert: errors leave no output behind") {
  TempDir dir;
  const std::string out = dir / "out.json";

  SUBCASE("missing input is kIo") {
    try {
      cv::convert_to_chrome_trace({dir / "nope.json"}, out);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kIo);
      CHECK(std::string(e.what()).find("nope.json") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(out));
  }
  SUBCASE("garbage input is kBadInput") {
    spit(dir / "garbage.json", "hello");
    check_converts_to_bad_input(dir / "garbage.json", out, "garbage.json");
  }
  SUBCASE("a bad event midway aborts and removes the temporary file") {
    std::string text = slurp(kSmall);
    const size_t at = text.find("[\"N\",6000200,2]");
    REQUIRE(at != std::string::npos);
    text.replace(at, 4, "[\"Q\"");  // an unknown kind after eight good events
    spit(dir / "bad_mid.json", text);
    check_converts_to_bad_input(dir / "bad_mid.json", out, "bad_mid.json: event #9", ErrorKind::kCorrupt);
  }
  SUBCASE("a bad second input: nothing is written") {
    spit(dir / "empty.json", "");
    try {
      cv::convert_to_chrome_trace({kSmall.string(), dir / "empty.json"}, out);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kBadInput);
      CHECK(std::string(e.what()).find("empty.json") != std::string::npos);
    }
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(out + ".tmp"));
  }
  SUBCASE("unwritable output is kIo") {
    try {
      cv::convert_to_chrome_trace({kSmall.string()}, dir / "no/such/dir/out.json");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kIo);
      CHECK(std::string(e.what()).find("no/such/dir/out.json") != std::string::npos);
    }
  }
  SUBCASE("an existing output is replaced only when the conversion succeeds") {
    spit(out, "old");
    spit(dir / "garbage.json", "{\"a\":1}");
    CHECK_THROWS_AS(cv::convert_to_chrome_trace({dir / "garbage.json"}, out), Error);
    CHECK(slurp(out) == "old");
    cv::convert_to_chrome_trace({kSmall.string()}, out);
    CHECK(json::parse(slurp(out)).contains("traceEvents"));
  }
}

TEST_CASE("convert: reader_safe_dur_ns keeps ts + dur, added as doubles, at or before the end") {
  // The issue's pair: 4059637.649 + 10597.362 = 4070235.0110000004 > 4070235.011 in doubles.
  CHECK(4059637.649 + 10597.362 > 4070235.011);
  CHECK(cv::reader_safe_dur_ns(4'059'637'649, 4'070'235'011) == 10'597'361);
  CHECK(4059637.649 + 10597.361 <= 4070235.011);
  CHECK(cv::reader_safe_dur_ns(0, 5) == 5);
  CHECK(cv::reader_safe_dur_ns(7, 7) == 0);
  CHECK(cv::reader_safe_dur_ns(9, 7) == -2);  // not a slice; left alone

  // Random slices up to ~3 h after the base: the dur is exact, or 1 ns less exactly where the exact one
  // overshoots; the double sum never passes the end. Numbers are read back from their text, as viewers do.
  auto as_read = [](int64_t ns) { return std::strtod(cv::format_us(ns).c_str(), nullptr); };
  std::mt19937_64 rng(42);
  size_t stepped = 0;
  for (int i = 0; i < 200'000; ++i) {
    const int64_t start = std::uniform_int_distribution<int64_t>(0, 10'000'000'000'000)(rng);
    const int64_t end = start + std::uniform_int_distribution<int64_t>(0, 100'000'000)(rng);
    const int64_t dur = cv::reader_safe_dur_ns(start, end);
    CAPTURE(start);
    CAPTURE(end);
    CHECK(as_read(start) + as_read(dur) <= as_read(end));
    if (dur != end - start) {
      CHECK(dur == end - start - 1);
      CHECK(as_read(start) + as_read(end - start) > as_read(end));
      ++stepped;
    }
  }
  CHECK(stepped > 1000);  // the case is common, not a corner
}

TEST_CASE("convert: merged recordings far apart on the clock keep every lane ordered in doubles") {
  // Two ranks whose anchors are ~68 min apart: rank 1's ts are ~4e9 us, where the exact sums of many adjacent
  // pairs overshoot by an ulp. The shared checker (in check_structure) sees the doubles.
  TempDir dir;
  const int64_t rt0 = 1'719'853'884'000'000'000;
  const int64_t rt1 = rt0 + 4'059'637'649'123;
  const Generated g0 = generate(11, 3000, 3, 2000);
  const Generated g1 = generate(12, 3001, 4, 2000);
  write_raw(dir / "a.json", meta_for(3000, 0, rt0), g0.records);
  write_raw(dir / "b.json", meta_for(3001, 1, rt1), g1.records);
  const std::string out = dir / "merged.trace.json";
  cv::convert_to_chrome_trace({dir / "a.json", dir / "b.json"}, out);
  const Trace t = load(out);
  const auto holds = check_structure(t);
  CHECK(holds.at(3000) == g0.holds);
  CHECK(holds.at(3001) == g1.holds);
  // The exact durations were stepped down by 1 ns where needed: the trace's hold time of rank 1 falls short
  // of the recording's by that many ns, never more than one per slice.
  int64_t recorded = 0, written = 0;
  for (const auto& r : g1.records) {
    if (const auto* h = std::get_if<raw::Hold>(&r)) recorded += h->dur;
  }
  for (const auto* e : find(t, "X", "hold_gil")) {
    if (e->at("pid") == 3001) written += t.dur[index_of(t, e)];
  }
  CHECK(recorded - written > 0);
  CHECK(recorded - written <= static_cast<int64_t>(g1.holds));
}

TEST_CASE("trace_check: the shared checker flags what DevTools would drop") {
  namespace tc = gilspy::test;
  auto trace = [](const std::string& events) { return R"({"traceEvents":[)" + events + "]}"; };
  const std::string a = R"({"ph":"X","name":"take_gil","pid":1,"tid":2,"ts":4059637.649,"dur":10597.362})";
  const std::string a_fixed =
      R"({"ph":"X","name":"take_gil","pid":1,"tid":2,"ts":4059637.649,"dur":10597.361})";
  const std::string b = R"({"ph":"X","name":"hold_gil","pid":1,"tid":2,"ts":4070235.011,"dur":5.000})";
  const std::string b_other_lane =
      R"({"ph":"X","name":"hold_gil","pid":1,"tid":3,"ts":4070235.011,"dur":5.000})";

  const auto bad = tc::check_chrome_trace(trace(a + "," + b));
  CHECK(bad.problem_count == 1);
  REQUIRE(bad.problems.size() == 1);
  CHECK(bad.problems[0].find("4070235.0110000004") != std::string::npos);
  CHECK(bad.problems[0].find("take_gil") != std::string::npos);

  const auto good = tc::check_chrome_trace(trace(b + "," + a_fixed));  // file order does not matter
  CHECK(good.ok());
  CHECK(good.events == 2);
  CHECK(good.lanes == 1);
  CHECK(good.adjacent_pairs == 1);
  CHECK(tc::check_chrome_trace(trace(a + "," + b_other_lane)).ok());  // other lanes may overlap
  CHECK(tc::check_chrome_trace("[" + a_fixed + "," + b + "]").ok());  // a bare array (Ascend's form)

  // Instants are zero-length events of the lane: at a slice's end is fine, inside it is not.
  const std::string at_end = R"({"ph":"I","s":"t","name":"drop_gil","pid":1,"tid":2,"ts":4070235.011})";
  const std::string inside = R"({"ph":"I","s":"t","name":"drop_gil","pid":1,"tid":2,"ts":4070235.010})";
  CHECK(tc::check_chrome_trace(trace(a_fixed + "," + at_end + "," + b)).ok());
  CHECK(tc::check_chrome_trace(trace(a_fixed + "," + inside)).problem_count == 1);
  // "i" (DevTools and MindStudio skip it), a missing dur, a string ts, no traceEvents, not JSON.
  CHECK(tc::check_chrome_trace(trace(R"({"ph":"i","s":"t","name":"x","pid":1,"tid":2,"ts":1.000})"))
            .problem_count == 1);
  CHECK(tc::check_chrome_trace(trace(R"({"ph":"X","name":"x","pid":1,"tid":2,"ts":1.000})")).problem_count ==
        1);
  CHECK(
      tc::check_chrome_trace(trace(R"({"ph":"C","name":"x","pid":1,"tid":2,"ts":"1.000"})")).problem_count ==
      1);
  CHECK_FALSE(tc::check_chrome_trace(R"({"events":[]})").ok());
  CHECK_FALSE(tc::check_chrome_trace("{").ok());

  // A slice wholly inside another is nested (a gc slice in its hold_gil), also when both start together;
  // one that ends after its parent, even by one ulp of the sum, is not.
  const std::string hold = R"({"ph":"X","name":"hold_gil","pid":1,"tid":2,"ts":4059637.649,"dur":10597.361})";
  const std::string gc_in = R"({"ph":"X","name":"gc","pid":1,"tid":2,"ts":4059637.649,"dur":10597.361})";
  const std::string gc_mid = R"({"ph":"X","name":"gc","pid":1,"tid":2,"ts":4060000.000,"dur":100.000})";
  const std::string gc_out = R"({"ph":"X","name":"gc","pid":1,"tid":2,"ts":4060000.000,"dur":10235.011})";
  CHECK(tc::check_chrome_trace(trace(gc_in + "," + hold + "," + b)).ok());
  CHECK(tc::check_chrome_trace(trace(hold + "," + gc_mid + "," + at_end)).ok());
  CHECK(tc::check_chrome_trace(trace(hold + "," + gc_out)).problem_count == 1);
  CHECK(tc::check_chrome_trace(trace(hold + "," + gc_mid + "," + inside)).problem_count == 1);
}

TEST_CASE(
    "convert: a finished file with one bad byte is refused as corrupt; --salvage converts what precedes it") {
  TempDir dir;
  std::string text = slurp(kSmall);
  const size_t at = text.find("[\"N\",6000200,2]");
  REQUIRE(at != std::string::npos);
  text[at + 1] = '?';  // no longer JSON, in the middle of a finished file
  spit(dir / "bad.json", text);
  const std::string out = dir / "out.json";
  check_converts_to_bad_input(dir / "bad.json", out, "is corrupt at byte offset " + std::to_string(at + 1),
                              ErrorKind::kCorrupt);
  const auto report = cv::convert_to_chrome_trace({dir / "bad.json"}, out, {.salvage = true});
  const auto& r = report.inputs.at(0);
  CHECK_FALSE(r.complete);
  CHECK(r.corrupt);
  CHECK(r.records == 8);
  CHECK(r.damage_offset == at + 1);
  CHECK(r.bytes == text.size());
  CHECK(r.unread_lines > 5);
  CHECK(r.summary_rebuilt);
  const Trace t = load(out);
  CHECK(t.doc["otherData"]["inputs"][0]["corrupt"] == true);
}

TEST_CASE("convert: a link at the output's name is neither followed nor replaced; the output is 0600") {
  TempDir dir;
  const std::string victim = dir / "victim";
  spit(victim, "precious");
  const std::string out = dir / "out.json";
  fs::create_symlink(victim, out);
  try {
    cv::convert_to_chrome_trace({kSmall.string()}, out);
    FAIL("wrote through a link");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kIo);
    CHECK(std::string(e.what()).find("symbolic link") != std::string::npos);
  }
  CHECK(slurp(victim) == "precious");
  CHECK(fs::is_symlink(out));
  fs::remove(out);
  // A planted "<out>.tmp" (the name older gilspy used) is irrelevant: the temporary file has no fixed name.
  fs::create_symlink(victim, out + ".tmp");
  cv::convert_to_chrome_trace({kSmall.string()}, out);
  CHECK(slurp(victim) == "precious");
  CHECK((fs::status(out).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  cv::convert_to_chrome_trace({kSmall.string()}, out, {.mode = 0644});
  CHECK((fs::status(out).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read));
}

}  // namespace unit_chrome_trace
