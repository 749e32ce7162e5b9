// The raw recording format: Writer -> read round trip of every record kind, recovery of a file cut at any
// byte, and rejection (kBadInput, naming the file) of what is not a raw recording.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/raw_format.hpp"
#include "unit/temp_files.hpp"

namespace raw = gilspy::raw;
namespace fs = std::filesystem;
using gilspy::Error;
using gilspy::ErrorKind;

// Named per file, so that the unity build can put test files together.
namespace unit_raw_format {
namespace {

using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

raw::Meta sample_meta() {
  raw::Meta m;
  m.gilspy_version = "9.8.7";
  m.pid = 31337;
  m.rank = 5;
  m.python_version = "3.13.1";
  m.python_binary = "/opt/py/bin/python3.13";
  m.build = "shared";
  m.free_threaded = true;
  m.command = "python3 -c \"print('hi')\"";
  m.hostname = "gpu-node-12";
  m.monotonic_ns = 123456789012345;
  m.realtime_ns = 1719853884987654321;
  m.rate_hz = 7500.5;
  m.switch_interval_us = 5000;
  m.gil_addr = 0x7f00deadbeef;
  return m;
}

// One record of every kind (F is written by finish()), with values that differ from field to field.
std::vector<raw::Record> sample_records() {
  std::vector<raw::Record> v;
  v.push_back(raw::ThreadStart{31337, 0, 0xffff800012345678ull, "MainThread (31337) \"quoted\" \xc3\xa9"});
  v.push_back(raw::ThreadStart{31340, 17, 0x55550000aaaaull, "worker\n2"});
  v.push_back(raw::Hold{31337, 20, 1000});
  v.push_back(raw::Wait{31340, 25, 995});
  v.push_back(raw::Waiters{30, 3});
  v.push_back(raw::ThreadEnd{31340, 5000});
  v.push_back(raw::ThreadEnd{31337, 5000, 4321});
  v.push_back(raw::Stats{.ts = 1'000'000'000,
                         .polls = 7001,
                         .late = 12,
                         .missed = 3,
                         .handoffs_seen = 4321,
                         .handoffs_total = 4400});
  v.push_back(raw::Hold{31337, 1020, 0});  // a zero-length hold is still a hold
  v.push_back(raw::ProcessStopped{.ts = 1100, .dur = 400});
  v.push_back(
      raw::ThreadStart{.tid = 31350, .ts = 1600, .tstate = 0x5555, .name = "in a container", .ns_tid = 3});
  // The garbage collector's kinds (format_version 3).
  v.push_back(raw::GcSettings{.ts = 0, .enabled = true, .threshold = {700, 10, 10}});
  v.push_back(raw::GcCounts{.ts = 5, .count = {123, 4, 5}});
  v.push_back(raw::GcCollection{.tid = 31337,
                                .ts = 100,
                                .dur = 800,
                                .generation = 2,
                                .collected = 4096,
                                .uncollectable = 1,
                                .waiters = 1,
                                .wait_ns = 700,
                                .hold_lead = 80,
                                .held_dur = 800});
  v.push_back(
      raw::GcCollection{.tid = 0, .ts = 1200, .dur = 50, .generation = -1, .hold_lead = -1, .held_dur = 0});
  v.push_back(
      raw::GcUntimed{.ts = 950, .window = 100, .generation = 0, .n = 2, .collected = 7, .uncollectable = 0});
  v.push_back(raw::GcSettings{.ts = 1500, .enabled = false, .threshold = {700, 10, 10}});
  raw::CounterSetup setup{.ts = 0,
                          .count = 3,
                          .kinds = {},
                          .unavailable = {{"cycles", "not supported"}},
                          .perf_threads_max = 512};
  setup.kinds[0] = raw::CounterKind::kTaskClock;
  setup.kinds[1] = raw::CounterKind::kInstructions;
  setup.kinds[2] = raw::CounterKind::kBranchMisses;
  v.push_back(setup);
  raw::CounterSample c{.tid = 31337,
                       .ts = 1700,
                       .dur = 300,
                       .role = raw::GilRole::kHolding,
                       .count = 3,
                       .holds = 2,
                       .time_ns = 250,
                       .cpu_ns = 240,
                       .run_delay_ns = 7,
                       .slices = 2,
                       .preempted_holds = 1,
                       .preempted_ns = 5,
                       .values = {}};
  c.values = {280, 123456789012, 5};
  v.push_back(c);
  v.push_back(raw::CounterSample{.tid = 31340, .ts = 1700, .dur = 50, .role = raw::GilRole::kWaiting});
  v.push_back(raw::ThreadSwitches{.tid = 31337, .ts = 1800, .voluntary = 40, .involuntary = 3});
  return v;
}

// Same kind, every field equal.
void check_same(const raw::Record& a, const raw::Record& b) {
  CHECK(a.index() == b.index());
  CHECK(a == b);
}

struct ReadBack {
  std::optional<raw::Meta> meta;
  int meta_calls = 0;
  std::vector<raw::Record> records;
  raw::ReadResult result;
};

ReadBack read_text(const std::string& text, const std::string& name = "test.json") {
  ReadBack rb;
  std::istringstream in(text);
  rb.result = raw::read(
      in, name,
      [&](const raw::Meta& m) {
        rb.meta = m;
        ++rb.meta_calls;
      },
      [&](const raw::Record& r) { rb.records.push_back(r); });
  return rb;
}

// A complete file written by raw::Writer.
std::string written_file(const TempDir& dir, const std::vector<raw::Record>& records,
                         const nlohmann::json& summary) {
  const fs::path path = dir.path / "GIL_31337_rank_5.json";
  raw::Writer w(path.string(), sample_meta());
  for (const auto& r : records) w.write(r);
  w.finish(summary);
  return slurp(path);
}

void check_bad_input(const std::string& text, const std::string& expect_in_message = {},
                     ErrorKind kind = ErrorKind::kBadInput) {
  CAPTURE(text);
  try {
    read_text(text, "some/input.json");
    FAIL("no error for a file that is not a raw recording");
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("some/input.json") != std::string::npos);
    if (!expect_in_message.empty()) CHECK(what.find(expect_in_message) != std::string::npos);
  }
}

const char* kHeader = "{\"format\":\"gilspy-raw\",\"format_version\":1,\n\"meta\":";

std::string with_events(const std::string& events) {
  return kHeader + raw::to_json(sample_meta()).dump() + ",\n\"events\":[\n" + events +
         "],\n\"summary\":{}}\n";
}

}  // namespace

// A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) while it lives: writes past `bytes` fail as on a full
// disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) : old_handler_(::signal(SIGXFSZ, SIG_IGN)) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    struct rlimit small = old_;
    small.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  struct rlimit old_ {};
  sighandler_t old_handler_;
};

TEST_CASE("raw format: Writer then read gives back the meta, every record kind and the summary") {
  TempDir dir;
  const fs::path final_path = dir.path / "GIL_31337_rank_5.json";
  const auto records = sample_records();
  const nlohmann::json summary = {{"duration_ns", 5000}, {"threads", {{{"tid", 31337}, {"holds", 2}}}}};
  {
    raw::Writer w(final_path.string(), sample_meta());
    CHECK(w.partial_path() == final_path.string() + ".partial");
    for (const auto& r : records) w.write(r);
    w.flush();
    CHECK(fs::exists(w.partial_path()));
    CHECK_FALSE(fs::exists(final_path));
    w.finish(summary);
    CHECK_FALSE(fs::exists(w.partial_path()));
  }
  REQUIRE(fs::exists(final_path));
  const std::string text = slurp(final_path);
  CHECK(text.rfind("{\"format\":\"gilspy-raw\",\"format_version\":3,\n\"meta\":{", 0) == 0);
  CHECK(nlohmann::json::parse(text).is_object());

  const ReadBack rb = read_text(text);
  CHECK(rb.result.complete);
  CHECK(rb.result.problem.empty());
  CHECK(rb.meta_calls == 1);
  REQUIRE(rb.meta.has_value());
  const raw::Meta want = sample_meta();
  const raw::Meta& got = *rb.meta;
  CHECK(got.gilspy_version == want.gilspy_version);
  CHECK(got.pid == want.pid);
  CHECK(got.rank == want.rank);
  CHECK(got.python_version == want.python_version);
  CHECK(got.python_binary == want.python_binary);
  CHECK(got.build == want.build);
  CHECK(got.free_threaded == want.free_threaded);
  CHECK(got.command == want.command);
  CHECK(got.hostname == want.hostname);
  CHECK(got.monotonic_ns == want.monotonic_ns);
  CHECK(got.realtime_ns == want.realtime_ns);
  CHECK(got.rate_hz == want.rate_hz);
  CHECK(got.switch_interval_us == want.switch_interval_us);
  CHECK(got.gil_addr == want.gil_addr);

  REQUIRE(rb.records.size() == records.size());
  CHECK(rb.result.records == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    CAPTURE(i);
    check_same(rb.records[i], records[i]);
  }
  REQUIRE(rb.result.summary.has_value());
  CHECK(*rb.result.summary == summary);
}

TEST_CASE("raw format: an unfinished Writer leaves a .partial that reads back as incomplete") {
  TempDir dir;
  const fs::path final_path = dir.path / "GIL_1_rank_0.json";
  const auto records = sample_records();
  std::string partial;
  {
    raw::Writer w(final_path.string(), sample_meta());
    for (const auto& r : records) w.write(r);
    w.flush();
    partial = slurp(w.partial_path());
  }  // destroyed without finish(): a killed recording
  CHECK(fs::exists(final_path.string() + ".partial"));
  CHECK_FALSE(fs::exists(final_path));
  const ReadBack rb = read_text(partial, "GIL_1_rank_0.json.partial");
  CHECK_FALSE(rb.result.complete);
  CHECK_FALSE(rb.result.summary.has_value());
  CHECK(rb.records.size() == records.size());
  CHECK(rb.result.problem.find("cut short") != std::string::npos);
}

TEST_CASE("raw format: a file cut at any byte is rejected before its meta, recovered after it") {
  TempDir dir;
  std::vector<raw::Record> records;
  for (int i = 0; i < 6; ++i) {
    for (const auto& r : sample_records()) {
      raw::Record c = r;
      raw::shift_time(c, i * 10'000);
      records.push_back(c);
    }
  }
  const std::string text =
      written_file(dir, records, {{"duration_ns", 60000}, {"threads", nlohmann::json::array()}});

  // Where each part ends: the meta object, each event's closing bracket, the whole document.
  size_t meta_end = 0;                             // one past the meta's closing brace
  const size_t end_marker = text.find("[\"F\"]");  // a cut past it cuts a finished file: corrupt
  std::vector<size_t> record_ends;                 // one past each record's ']'
  size_t doc_end = text.rfind('}') + 1;
  {
    size_t line_start = 0;
    int line_no = 0;
    while (line_start < text.size()) {
      const size_t nl = text.find('\n', line_start);
      const size_t line_end = nl == std::string::npos ? text.size() : nl;
      std::string_view line(text.data() + line_start, line_end - line_start);
      ++line_no;
      if (line_no == 2) {
        REQUIRE(line.substr(0, 7) == "\"meta\":");
        meta_end = line_start + line.rfind('}') + 1;
      } else if (line_no >= 4 && !line.empty() && line[0] == '[') {
        if (line.substr(0, 5) != "[\"F\"]")
          record_ends.push_back(line_start + line.rfind(']') + 1);  // one record a line: its last ']'
      }
      line_start = line_end + 1;
    }
  }
  REQUIRE(meta_end > 0);
  REQUIRE(record_ends.size() == records.size());

  std::vector<size_t> cuts;
  for (size_t p = 0; p <= text.size(); p += 7) cuts.push_back(p);
  for (size_t p : {meta_end - 1, meta_end, meta_end + 1, doc_end - 1, doc_end, text.size()})
    cuts.push_back(p);
  for (size_t e : record_ends) {
    cuts.push_back(e - 1);
    cuts.push_back(e);
  }
  size_t rejected = 0, recovered = 0;
  for (const size_t p : cuts) {
    CAPTURE(p);
    const std::string prefix = text.substr(0, p);
    if (p < meta_end) {
      try {
        read_text(prefix, "cut.json");
        FAIL("a file cut before the end of its meta was accepted");
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kBadInput);
        CHECK(std::string(e.what()).find("cut.json") != std::string::npos);
      }
      ++rejected;
      continue;
    }
    if (p >= end_marker + 5 && p < doc_end) {  // ["F"] read: the file was finished
      try {
        read_text(prefix, "cut.json");
        FAIL("a finished file cut in its summary was taken for an unfinished recording");
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kCorrupt);
        CHECK(std::string(e.what()).find("cut.json is corrupt at byte offset " + std::to_string(p)) !=
              std::string::npos);
      }
      continue;
    }
    const ReadBack rb = read_text(prefix, "cut.json");
    ++recovered;
    size_t expect = 0;
    while (expect < record_ends.size() && record_ends[expect] <= p) ++expect;
    CHECK(rb.meta_calls == 1);
    REQUIRE(rb.records.size() == expect);
    CHECK(rb.result.records == expect);
    for (size_t i = 0; i < expect; ++i) check_same(rb.records[i], records[i]);
    if (p >= doc_end) {
      CHECK(rb.result.complete);
    } else {
      CHECK_FALSE(rb.result.complete);
      CHECK_FALSE(rb.result.corrupt);
      // Where it ends: the file's length, not one past it.
      CHECK(rb.result.problem.find("cut short after " + std::to_string(p) + " bytes") != std::string::npos);
    }
  }
  CHECK(rejected > 5);
  CHECK(recovered > 20);
}

TEST_CASE("raw format: what is not a raw recording is kBadInput, and the message names the file") {
  check_bad_input("", "empty");
  check_bad_input("hello");
  check_bad_input("   \n");
  check_bad_input("[1,2]", "array");
  check_bad_input("42");
  check_bad_input("{\"a\":1}", "meta");
  check_bad_input("{\"format\":\"other\"}", "format");
  check_bad_input("{\"format\":\"gilspy-raw\",\"format_version\":99,\"meta\":{}}", "format_version");
  check_bad_input(std::string("{\"meta\":") + raw::to_json(sample_meta()).dump() + "}", "format");
  check_bad_input("{\"format\":\"gilspy-raw\",\"format_version\":1,\"meta\":{\"pid\":1}}", "meta");
  check_bad_input("{\"format\":\"gilspy-raw\",\"format_version\":1,\"meta\":5}", "meta");
  check_bad_input("{\"format\":\"gilspy-raw\",\"format_version\":1,\"events\":[]}", "meta");
}

TEST_CASE(
    "raw format: what is wrong after a good meta is corrupt (kCorrupt), and the message names the file") {
  const auto corrupt = ErrorKind::kCorrupt;
  check_bad_input(with_events("5"), "arrays", corrupt);
  check_bad_input(with_events("{\"kind\":\"H\"}"), "arrays", corrupt);
  check_bad_input(with_events("[\"H\",1,2,3],\n\"H\""), "arrays", corrupt);
  check_bad_input(with_events("[\"Z\",1,2]"), "unknown kind", corrupt);
  check_bad_input(with_events("[\"\\u001b\",1,2]"), "unknown kind \"\\u001b\"", corrupt);  // escaped, not raw
  check_bad_input(with_events("[\"H\",1,2,3],\n[\"H\",1,10,-5]"), "negative", corrupt);
  check_bad_input(with_events("[\"H\",1,2]"), "integer", corrupt);
  check_bad_input(with_events("[\"T\",1,2]"), "thread name", corrupt);
  check_bad_input(with_events("[]"), "", corrupt);
  check_bad_input(with_events("[7,1,2]"), "", corrupt);
  // Numbers whose sums would overflow (ts + dur, a lane's total) are refused, not wrapped.
  check_bad_input(with_events("[\"H\",1,2,18446744073709551615]"), "out of range", corrupt);
  check_bad_input(with_events("[\"H\",1,4611686018427387904,3]"), "time out of range", corrupt);
  check_bad_input(with_events("[\"H\",1,2,1152921504606846977]"), "duration out of range", corrupt);
  std::string many;
  for (int i = 0; i < 5; ++i) many += std::string(i ? ",\n" : "") + "[\"H\",1,2,1152921504606846976]";
  check_bad_input(with_events(many), "146 years", corrupt);
  check_bad_input(with_events("[\"H\",1,2.5,3]"), "integer", corrupt);
  check_bad_input(kHeader + raw::to_json(sample_meta()).dump() + ",\n\"events\":5}", "events", corrupt);
}

TEST_CASE("raw format: a bad event after good ones is still an error, not a recovery") {
  int seen = 0;
  std::istringstream in(with_events("[\"H\",1,2,3],\n[\"W\",2,2,3],\n[\"Q\",1,1,1],\n[\"F\"]"));
  try {
    raw::read(
        in, "mid.json", [](const raw::Meta&) {}, [&](const raw::Record&) { ++seen; });
    FAIL("accepted an unknown kind");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorrupt);
    CHECK(std::string(e.what()).find("mid.json: event #3") != std::string::npos);
  }
  CHECK(seen == 2);
}

TEST_CASE(
    "raw format: unknown top-level members are skipped, nested values inside meta do not confuse the "
    "reader") {
  nlohmann::json meta = raw::to_json(sample_meta());
  meta["extra"] = {{"events", {1, 2, 3}}, {"summary", {{"x", {{"y", 1}}}}}};
  const std::string text =
      std::string("{\"format\":\"gilspy-raw\",\"future\":{\"a\":[1,{\"b\":2}]},\"format_version\":1,\n") +
      "\"meta\":" + meta.dump() + ",\n\"events\":[\n[\"H\",7,1,2],\n[\"F\"]],\n\"summary\":{\"k\":[1,[2]]}}";
  const ReadBack rb = read_text(text);
  CHECK(rb.result.complete);
  REQUIRE(rb.meta.has_value());
  CHECK(rb.meta->pid == 31337);
  CHECK(rb.meta->hostname == "gpu-node-12");
  REQUIRE(rb.records.size() == 1);
  CHECK(std::get<raw::Hold>(rb.records[0]).tid == 7);
  REQUIRE(rb.result.summary.has_value());
  CHECK(*rb.result.summary == nlohmann::json::parse(R"({"k":[1,[2]]})"));
}

// Each record kind alone through raw::Writer and raw::read: what is stored comes back equal, field by field.
TEST_CASE_TEMPLATE("raw format: one record of each kind round-trips", Kind, raw::ThreadStart, raw::ThreadEnd,
                   raw::Hold, raw::Wait, raw::Waiters, raw::Stats) {
  Kind original;
  if constexpr (std::is_same_v<Kind, raw::ThreadStart>) {
    original = {.tid = 31337, .ts = 5, .tstate = 0xffff800012345678ull, .name = "MainThread \xc3\xa9"};
  } else if constexpr (std::is_same_v<Kind, raw::ThreadEnd>) {
    original = {.tid = 31340, .ts = 1'000'000'007, .state_se_ns = 12'345};
  } else if constexpr (std::is_same_v<Kind, raw::Hold> || std::is_same_v<Kind, raw::Wait>) {
    original = {.tid = 31341, .ts = 17, .dur = 4'000'000'001};
  } else if constexpr (std::is_same_v<Kind, raw::Waiters>) {
    original = {.ts = 99, .n = 7};
  } else {
    original = {.ts = 2'000'000'000,
                .polls = 19'999,
                .late = 12,
                .missed = 3,
                .handoffs_seen = 4321,
                .handoffs_total = 4400};
  }
  TempDir dir;
  const ReadBack rb = read_text(written_file(dir, {original}, {{"duration_ns", 1}}));
  CHECK(rb.result.complete);
  REQUIRE(rb.records.size() == 1);
  REQUIRE(std::holds_alternative<Kind>(rb.records[0]));
  CHECK(std::get<Kind>(rb.records[0]) == original);
}

TEST_CASE("raw format: ThreadState records are for live views and are not stored") {
  TempDir dir;
  const raw::Record state = raw::ThreadState{.tid = 1, .ts = 10, .role = raw::GilRole::kHolding, .since = 2};
  CHECK_FALSE(raw::record_line(state).has_value());
  const ReadBack rb = read_text(written_file(dir, {state, raw::Hold{1, 2, 8}}, {{"duration_ns", 10}}));
  REQUIRE(rb.records.size() == 1);
  CHECK(std::holds_alternative<raw::Hold>(rb.records[0]));
}

TEST_CASE("raw format: the reader says which format version it read; format 1 files still read") {
  TempDir dir;
  CHECK(read_text(written_file(dir, sample_records(), {{"duration_ns", 1}})).result.format_version ==
        raw::kFormatVersion);
  // tests/data/small.raw.json was written by hand in format 1, the first format.
  std::ifstream in(std::string(GILSPY_SOURCE_DIR) + "/tests/data/small.raw.json");
  REQUIRE(in);
  size_t records = 0;
  const raw::ReadResult r = raw::read(
      in, "small.raw.json", [](const raw::Meta&) {}, [&](const raw::Record&) { ++records; });
  CHECK(r.format_version == 1);
  CHECK(r.complete);
  CHECK(records == 19);
}

namespace {

// A finished file of 6 x sample_records().
std::string finished_file(const TempDir& dir) {
  std::vector<raw::Record> records;
  for (int i = 0; i < 6; ++i) {
    for (const auto& r : sample_records()) {
      raw::Record c = r;
      raw::shift_time(c, i * 10'000);
      records.push_back(c);
    }
  }
  return written_file(dir, records, {{"duration_ns", 60000}, {"threads", nlohmann::json::array()}});
}

raw::ReadResult read_salvaging(const std::string& text, size_t* records) {
  std::istringstream in(text);
  *records = 0;
  return raw::read(
      in, "f.json", [](const raw::Meta&) {}, [&](const raw::Record&) { ++*records; }, {.salvage = true});
}

}  // namespace

TEST_CASE(
    "raw format: one bad byte in a finished file is corruption at its offset, not an unfinished recording") {
  TempDir dir;
  std::string text = finished_file(dir);
  // A byte in the middle of the events that breaks the JSON: '[' of an event line turned into '@'.
  size_t at = text.find("\n[\"H\"", text.size() / 2) + 1;
  REQUIRE(at > 0);
  text[at] = '@';
  try {
    read_text(text, "bad.json");
    FAIL("a corrupt file was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kCorrupt);
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("bad.json is corrupt at byte offset " + std::to_string(at) + " of " +
                    std::to_string(text.size())) != std::string::npos);
    CHECK(what.find("end marker") != std::string::npos);
    CHECK(what.find("last read") == std::string::npos);  // the file's own bytes are not repeated
  }
  size_t records = 0;
  const raw::ReadResult r = read_salvaging(text, &records);
  CHECK_FALSE(r.complete);
  CHECK(r.corrupt);
  CHECK(r.damage_offset == at);
  CHECK(r.bytes == text.size());
  CHECK(records == r.records);
  CHECK(records > 10);
  CHECK(records < 6 * sample_records().size());
  CHECK(r.unread_lines > 5);
  CHECK(r.problem.find("salvaged the " + std::to_string(records) + " events") != std::string::npos);
}

TEST_CASE("raw format: deep nesting is refused at a bounded depth, wherever it is") {
  TempDir dir;
  const std::string text = finished_file(dir);
  const std::string deep(60000, '[');
  const size_t summary = text.find("\"summary\":") + 10;
  std::string in_summary = text;
  in_summary.insert(summary, deep);
  check_bad_input(in_summary, "nested deeper than", ErrorKind::kCorrupt);
  size_t records = 0;
  const raw::ReadResult r = read_salvaging(in_summary, &records);
  CHECK(r.corrupt);
  CHECK(records == 6 * sample_records().size());
  // In the meta: not a raw file at all.
  std::string in_meta = text;
  in_meta.insert(text.find("\"command\":") + 10, deep);
  check_bad_input(in_meta, "nested deeper than");
  // In an unknown member before the meta: skipped, but bounded too.
  check_bad_input("{\"x\":" + deep, "nested deeper than");
}

TEST_CASE("raw format: damage in an unfinished file is still corruption; only a clean cut is a recovery") {
  TempDir dir;
  std::string text = finished_file(dir);
  text.resize(text.find("[\"F\"]"));  // as a killed recording leaves it
  size_t records = 0;
  const raw::ReadResult cut = read_salvaging(text, &records);
  CHECK_FALSE(cut.corrupt);
  CHECK(records == 6 * sample_records().size());
  text[text.size() / 2] = '\x01';
  check_bad_input(text, "corrupt at byte offset " + std::to_string(text.size() / 2), ErrorKind::kCorrupt);
}

TEST_CASE(
    "raw format: the Writer refuses links and a second writer, and keeps events in memory when writes fail") {
  TempDir dir;
  const fs::path final_path = dir.path / "GIL_31337_rank_5.json";
  const fs::path victim = dir.path / "victim";
  { std::ofstream(victim) << "precious"; }
  SUBCASE("a link at the .partial or the final name") {
    for (const fs::path& link : {fs::path(final_path.string() + ".partial"), final_path}) {
      fs::create_symlink(victim, link);
      try {
        raw::Writer w(final_path.string(), sample_meta());
        FAIL("wrote despite a link at " << link);
      } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::kIo);
        CHECK(std::string(e.what()).find("symbolic link") != std::string::npos);
      }
      fs::remove(link);
      CHECK(slurp(victim) == "precious");
      CHECK_FALSE(fs::exists(final_path.string() + ".partial"));
    }
  }
  SUBCASE("a second writer of the same file") {
    raw::Writer first(final_path.string(), sample_meta());
    try {
      raw::Writer second(final_path.string(), sample_meta());
      FAIL("two writers of one file");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kBusy);
    }
    first.write(raw::Hold{1, 2, 3});
    first.finish({{"duration_ns", 5}});
    const ReadBack rb = read_text(slurp(final_path));
    CHECK(rb.result.complete);
    CHECK(rb.records.size() == 1);
  }
  SUBCASE(
      "writes that fail (file size limit: like a full disk) are retried; past the bound events are lost") {
    raw::Writer w(final_path.string(), sample_meta(), {.max_pending_bytes = 4096});
    REQUIRE(w.flush() == std::nullopt);
    const size_t header = fs::file_size(w.partial_path());
    std::optional<Error> e;
    {
      const FileSizeLimit full(header + 100);
      for (int i = 0; i < 400; ++i) w.write(raw::Hold{1, i * 10, 5});
      e = w.flush();
    }
    REQUIRE(e.has_value());
    CHECK(e->kind() == ErrorKind::kIo);
    CHECK(std::string(e->what()).find("file too large") != std::string::npos);
    CHECK(w.pending_bytes() > 0);
    CHECK(w.lost_records() > 0);
    CHECK(w.lost_records() < 400);
    CHECK(w.flush() == std::nullopt);  // room again: what waited in memory goes out, in order
    CHECK(w.pending_bytes() == 0);
    w.finish({{"duration_ns", 5}});
    const ReadBack rb = read_text(slurp(final_path));
    CHECK(rb.result.complete);
    CHECK(rb.records.size() == 400 - w.lost_records());
    for (size_t i = 1; i < rb.records.size(); ++i) {
      CHECK(std::get<raw::Hold>(rb.records[i]).ts == static_cast<int64_t>(i) * 10);
    }
  }
  SUBCASE("a disk that stays full to the end: the .partial holds exactly the events counted in it") {
    raw::Writer w(final_path.string(), sample_meta(), {.max_pending_bytes = 4096});
    REQUIRE(w.flush() == std::nullopt);
    const size_t header = fs::file_size(w.partial_path());
    bool finished = true;
    {
      const FileSizeLimit full(header + 1000);  // some 60 events, the last of them cut
      for (int i = 0; i < 400; ++i) w.write(raw::Hold{1, i * 10, 5});
      try {
        w.finish({{"duration_ns", 5}});
      } catch (const Error& e) {
        finished = false;
        CHECK(e.kind() == ErrorKind::kIo);
      }
    }
    CHECK_FALSE(finished);
    CHECK(w.events() == 400);
    CHECK(w.lost_records() > 0);
    CHECK(w.events_in_file() > 10);
    CHECK(fs::file_size(w.partial_path()) == header + 1000);
    const ReadBack rb = read_text(slurp(w.partial_path()));
    CHECK_FALSE(rb.result.complete);
    CHECK(rb.records.size() == w.events_in_file());
  }
}

}  // namespace unit_raw_format
