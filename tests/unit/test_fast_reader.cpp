// The raw reader's two paths agree: a file read from a seekable stream (line by line when it is exactly as
// the Writer writes it, else the SAX reader from the start) gives the same meta, records, summary,
// completeness and errors as the same bytes read from a stream that cannot seek (the SAX reader alone).
// Checked on Writer files of every kind, on hand-edited ones the fast path must hand over, and on thousands
// of mutations of a real file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/fast_reader.hpp"
#include "raw/raw_format.hpp"
#include "support/damage.hpp"

namespace raw = gilspy::raw;
namespace fs = std::filesystem;
using gilspy::Error;

// Named per file, so that the unity build can put test files together.
namespace unit_fast_reader {
namespace {

// A stream over a string that cannot seek (tellg() gives -1), as a pipe.
class PipeBuf final : public std::streambuf {
 public:
  explicit PipeBuf(const std::string& s) : s_(s) { setg(s_.data(), s_.data(), s_.data() + s_.size()); }

 private:
  std::string s_;
};

struct Outcome {
  bool threw = false;
  std::string error;
  int kind = -1;
  raw::Meta meta;
  bool meta_seen = false;
  std::vector<raw::Record> records;
  raw::ReadResult result;

  bool operator==(const Outcome& o) const {
    const bool meta_same =
        meta_seen == o.meta_seen && (!meta_seen || raw::to_json(meta) == raw::to_json(o.meta));
    return threw == o.threw && error == o.error && kind == o.kind && meta_same && records == o.records &&
           result.complete == o.result.complete && result.corrupt == o.result.corrupt &&
           result.records == o.result.records && result.summary == o.result.summary &&
           result.problem == o.result.problem && result.format_version == o.result.format_version &&
           result.damage_offset == o.result.damage_offset && result.unread_lines == o.result.unread_lines;
  }
};

Outcome read_with(std::istream& in, bool salvage) {
  Outcome o;
  try {
    o.result = raw::read(
        in, "f.json",
        [&](const raw::Meta& m) {
          CHECK_FALSE(o.meta_seen);  // once, whichever path delivers it
          o.meta = m;
          o.meta_seen = true;
        },
        [&](const raw::Record& r) { o.records.push_back(r); }, {.salvage = salvage});
  } catch (const Error& e) {
    o.threw = true;
    o.error = e.what();
    o.kind = static_cast<int>(e.kind());
  }
  return o;
}

// Both paths on the same bytes.
void same_both_ways(const std::string& bytes, bool salvage = false) {
  std::istringstream seekable(bytes);
  PipeBuf pipe_buf(bytes);
  std::istream pipe(&pipe_buf);
  REQUIRE(pipe.tellg() == std::streampos(-1));
  const Outcome a = read_with(seekable, salvage);
  const Outcome b = read_with(pipe, salvage);
  CAPTURE(a.error);
  CAPTURE(b.error);
  CHECK(a == b);
}

std::string writer_file(const std::vector<raw::Record>& records, bool finish = true) {
  const fs::path dir = fs::temp_directory_path() / ("gilspy_fast_reader_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "GIL_1_rank_0.json").string();
  fs::remove(path);
  fs::remove(path + ".partial");
  raw::Meta m;
  m.gilspy_version = "0.1.0";
  m.pid = 4242;
  m.python_version = "3.12.3";
  m.realtime_ns = 1700000000123456789;
  m.monotonic_ns = 5;
  m.rate_hz = 10000;
  m.ns_pid = 7;
  {
    raw::Writer w(path, m);
    for (const auto& r : records) w.write(r);
    if (finish) {
      w.finish({{"duration_ns", 12345}, {"threads", nlohmann::json::array({{{"tid", 4242}, {"holds", 1}}})}});
    } else {
      w.flush();
    }
  }
  std::ifstream in(finish ? path : path + ".partial", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  fs::remove_all(dir);
  return s.str();
}

// Built at run time: as a namespace-scope constant, g++ 12 tries to evaluate this initializer at compile time
// (C++20's constexpr vector) and spends a minute on it.
std::vector<raw::Record> every_kind() {
  return {
      raw::ThreadStart{
          .tid = 4242, .ts = 0, .tstate = 140000, .name = "MainThread \"quoted\" \xe2\x9c\x93", .ns_tid = 1},
      raw::ThreadStart{.tid = 4243, .ts = 10, .tstate = 140100, .name = "thread 4243 (w)"},
      raw::Hold{.tid = 4242, .ts = 100, .dur = 5000},
      raw::Wait{.tid = 4243, .ts = 100, .dur = 5001},
      raw::Waiters{.ts = 100, .n = 1},
      raw::Waiters{.ts = 5101, .n = 0},
      raw::Stats{.ts = 6000, .polls = 60, .late = 2, .missed = 1, .handoffs_seen = 5, .handoffs_total = 6},
      raw::ProcessStopped{.ts = -50, .dur = 70},
      raw::Hold{.tid = 4243, .ts = -(int64_t{1} << 60), .dur = int64_t{1} << 60},
      raw::GcSettings{.ts = 0, .enabled = true, .threshold = {700, 10, 10}},
      raw::GcCounts{.ts = 200, .count = {5, 1, 0}},
      raw::GcCollection{.tid = 4242,
                        .ts = 300,
                        .dur = 900,
                        .generation = 2,
                        .collected = 20000,
                        .uncollectable = 1,
                        .waiters = 1,
                        .wait_ns = 800,
                        .hold_lead = 200,
                        .held_dur = 800,
                        .held_from = 100},
      raw::GcUntimed{.ts = 1300, .window = 100, .generation = 0, .n = 3, .collected = 12, .uncollectable = 0},
      raw::CounterSample{.tid = 4242,
                         .ts = 100,
                         .dur = 5000,
                         .role = raw::GilRole::kHolding,
                         .count = 2,
                         .holds = 1,
                         .time_ns = 5000,
                         .cpu_ns = 4900,
                         .run_delay_ns = 100,
                         .slices = 2,
                         .preempted_holds = 0,
                         .preempted_ns = 0,
                         .values = {7, 0}},
      raw::CounterSample{.tid = 4243, .ts = -(int64_t{1} << 60), .dur = 0, .role = raw::GilRole::kReleased},
      raw::ThreadSwitches{.tid = 4243, .ts = 6500, .voluntary = 3, .involuntary = 1},
      raw::ThreadEnd{.tid = 4243, .ts = 7000, .state_se_ns = 1234},
      raw::ThreadEnd{.tid = 4242, .ts = 7000},
  };
}

}  // namespace

TEST_CASE("fast reader: a Writer file of every kind reads the same as through the SAX reader") {
  const std::string f = writer_file(every_kind());
  same_both_ways(f);
  std::istringstream in(f);
  const Outcome o = read_with(in, false);
  CHECK_FALSE(o.threw);
  CHECK(o.result.complete);
  CHECK(o.records == every_kind());
  CHECK(o.meta.ns_pid == 7);
  // ...and it was the fast path that read it, to the end.
  std::istringstream again(f);
  const raw::FastRead fast = raw::read_fast(
      again, "f.json", [](const raw::Meta&) {}, [](const raw::Record&) {});
  REQUIRE(fast.result.has_value());
  CHECK(fast.result->complete);
  CHECK(fast.records_delivered == every_kind().size());
  same_both_ways(writer_file({}));                   // no events
  same_both_ways(writer_file(every_kind(), false));  // unfinished: the SAX reader's recovery
  same_both_ways(writer_file(every_kind(), false), true);
}

// The first "C" line of every_kind(), as the Writer writes it.
const std::string kCounterLine = "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[7,0]]";

TEST_CASE("fast reader: what the Writer would not write is handed to the SAX reader, with the same outcome") {
  const std::string f = writer_file(every_kind());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = f;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  // Valid event lines in another form, which the fast path reads through nlohmann::json like the SAX reader.
  for (const std::string& v :
       {replaced("[\"H\",4242,100,5000]", "[\"H\", 4242, 100, 5000]"),
        replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100,5000,\"new\",[1]]"),
        replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[7, 0]]"),
        replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[7,0],\"new\"]")}) {
    std::istringstream in(v);
    const raw::FastRead fast = raw::read_fast(
        in, "f.json", [](const raw::Meta&) {}, [](const raw::Record&) {});
    CHECK(fast.result.has_value());
    same_both_ways(v);
  }
  // Each: valid JSON the fast path does not vouch for, or damage the SAX reader must name.
  const std::vector<std::string> variants = {
      replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100,5000.0]"),  // a float
      replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100,-5000]"),   // a negative duration
      replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100,05000]"),   // not JSON
      replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100,99999999999999999999]"),
      replaced("[\"H\",4242,100,5000]", "[\"Q\",4242,100,5000]"),                          // an unknown kind
      replaced(kCounterLine, "[\"C\",4242,100,5000,\"X\",5000,4900,100,2,1,0,0,[7,0]]"),   // an unknown role
      replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,-4900,100,2,1,0,0,[7,0]]"),  // negative CPU
      replaced(kCounterLine,
               "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[1,2,3,4,5,6,7,8,9]]"),           // 9 values
      replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[07,0]]"),          // not JSON
      replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,4900,100,4294967296,1,0,0,[7,0]]"),  // slices
      replaced(kCounterLine, "[\"C\",4242,100,5000,\"H\",5000,4900,100,2,1,0,0,[7,-0]]"),  // -0: signed
      replaced("[\"H\",4242,100,5000]", "[\"H\",4242,100]"),                               // a field short
      replaced("[\"N\",100,1]", "[\"N\",1152921504606846977,1]"),                          // past 2^60
      replaced("\"events\":[", "\"x\":1,\n\"events\":["),  // an unknown member
      replaced("\"format_version\":" + std::to_string(raw::kFormatVersion), "\"format_version\":9"),  // newer
      replaced("\"meta\":{", "\"meta\": {"),
      replaced("],\n\"summary\":", "],\r\n\"summary\":"),
      f + "\n",                                            // after the end
      f.substr(0, f.size() - 1),                           // no final newline
      replaced("[\"F\"]],", "[\"F\"],\n[\"H\",1,2,3]],"),  // events after the end marker
      replaced("\"pid\":4242", "\"pid\":-1"),
      replaced("\"summary\":{", "\"summary\":" + std::string(100, '[') + std::string(100, ']') + ",\"x\":{"),
  };
  for (size_t i = 0; i < variants.size(); ++i) {
    CAPTURE(i);
    std::istringstream in(variants[i]);
    const raw::FastRead fast = raw::read_fast(
        in, "f.json", [](const raw::Meta&) {}, [](const raw::Record&) {});
    CHECK_FALSE(fast.result.has_value());  // handed over...
    CHECK(in.tellg() == 0);                // ...with the stream back at its start
    same_both_ways(variants[i]);
    same_both_ways(variants[i], true);
  }
}

TEST_CASE("fast reader: random damage to a finished file reads the same both ways (salvage or not)") {
  std::vector<raw::Record> records = every_kind();
  for (int i = 0; i < 50; ++i) records.push_back(raw::Hold{.tid = 4242, .ts = 10000 + i * 100, .dur = 50});
  const std::string f = writer_file(records);
  std::mt19937 rng(12345);
  const std::string alphabet = "[]{},:\"-0123456789.eHWNTESPF \n\\x";
  for (int round = 0; round < 1500; ++round) {
    std::string s = gilspy::test::damaged(f, rng, alphabet, 4);
    if (rng() % 4 == 0) s.resize(rng() % s.size());  // and sometimes cut
    CAPTURE(round);
    same_both_ways(s, round % 2 == 0);
  }
}

}  // namespace unit_fast_reader
