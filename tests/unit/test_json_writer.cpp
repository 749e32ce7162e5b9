// convert/json_writer.hpp and convert/trace_events.hpp: the one way convert/ writes JSON. Strings are escaped
// byte for byte as nlohmann::json's dump (error_handler_t::replace) escapes them, which is what convert wrote
// before the writer existed and what keeps a target's names (threads, functions) inside their strings.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/json_writer.hpp"
#include "convert/lane_placement.hpp"
#include "convert/trace_events.hpp"

namespace {

namespace cv = gilspy::convert;
using nlohmann::json;

std::string nlohmann_string(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// What `write` writes, drained.
template <class Write>
std::string written(Write write) {
  std::string out;
  cv::JsonWriter w([&](std::string_view text) { out.append(text); });
  write(w);
  w.drain();
  return out;
}

}  // namespace

TEST_CASE("json writer: strings escaped exactly as nlohmann::json's dump with invalid UTF-8 replaced") {
  const std::vector<std::string> cases = {
      "",
      "MainThread",
      "quo\"te back\\slash /slash",
      std::string("nul\0byte", 8),
      "\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1b[2J\x1f\x7f",
      "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80",  // 2, 3 and 4 byte sequences
      "\xff",
      "\xc3",
      "\xc3(",
      "\x80\x80",
      "a\xe4\xb8",
      "\xe4\xb8 [tid 5]",  // invalid, cut short
      "\xc0\xaf",
      "\xed\xa0\x80",
      "\xf4\x90\x80\x80",
      "\xf5\x80",
      "\xe4\xc3\xa9",                              // overlong, surrogate, > U+10FFFF
      "\xf0\x9f\x98",                              // cut off by the end
      "\xc2\x80\xc2\x9b\xe2\x80\xa8\xe2\x80\xa9",  // C1 controls, U+2028/2029: as they are, as nlohmann has
                                                   // them
  };
  for (const std::string& s : cases) {
    CAPTURE(s);
    CHECK(cv::json_string(s) == nlohmann_string(s));
  }
  // Random bytes, biased to UTF-8's lead and continuation bytes so that sequences valid and not come often.
  std::mt19937_64 rng(36);
  const std::string alphabet = std::string("aZ \"\\\x01\x1f\x7f", 8) +
                               "\xc2\xc3\xdf\xe0\xe4\xed\xef\xf0\xf4\xf5\xff" + "\x80\x8f\x90\x9f\xa0\xbf";
  for (int i = 0; i < 200'000; ++i) {
    std::string s(rng() % 12, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    const std::string mine = cv::json_string(s);
    if (mine != nlohmann_string(s)) {
      std::string hex;
      for (const char c : s) hex += fmt::format("{:02x} ", static_cast<uint8_t>(c));
      FAIL_CHECK("differs for the bytes " << hex);
      break;
    }
    // Whatever the bytes, the text is one JSON string that reads back.
    CHECK_NOTHROW(static_cast<void>(json::parse(mine).get<std::string>()));
  }
}

TEST_CASE("json writer: members and elements separated by commas, numbers and times as convert writes them") {
  const std::string text = written([](cv::JsonWriter& w) {
    w.begin_object()
        .field("s", "x")
        .field("i", int64_t{-42})
        .field("u", UINT64_MAX)
        .field("b", true)
        .key("us")
        .us(1234567)
        .key("neg")
        .us(-5)
        .key("min")
        .us(INT64_MIN)
        .key("str_us")
        .us_string(1'736'405'443'863'674'400)
        .key("f")
        .fixed(2.0 / 3.0, 3)
        .key("a")
        .begin_array()
        .value(1)
        .begin_object()
        .end_object()
        .begin_array()
        .end_array()
        .value("z")
        .end_array()
        .key("doc")
        .json(json{{"b", 1}, {"a", {1, 2}}})
        .field("last", false)
        .end_object();
  });
  CHECK(text == R"({"s":"x","i":-42,"u":18446744073709551615,"b":true,"us":1234.567,"neg":-0.005,)"
                R"("min":-9223372036854775.808,"str_us":"1736405443863674.400","f":0.667,"a":[1,{},[],"z"],)"
                R"("doc":{"a":[1,2],"b":1},"last":false})");
  CHECK(json::accept(text));
  // Text as it is starts over: no comma after it.
  CHECK(written([](cv::JsonWriter& w) {
          w.raw("[");
          w.begin_object().end_object();
          w.raw(",\n");
          w.begin_object().field("k", 1).end_object();
          w.raw("]");
        }) == "[{},\n{\"k\":1}]");
}

TEST_CASE("json writer: the buffer goes out in large pieces, only at maybe_drain() and drain()") {
  std::vector<std::string> pieces;
  cv::JsonWriter w([&](std::string_view text) { pieces.emplace_back(text); });
  std::string all;
  for (int i = 0; i < 20'000; ++i) {
    w.begin_object().field("i", i).field("name", "hold_gil").end_object();
    all += R"({"i":)" + std::to_string(i) + R"(,"name":"hold_gil"})";
    w.raw("\n");
    all += "\n";
    w.maybe_drain();
  }
  CHECK(pieces.size() >= 4);
  for (const std::string& p : pieces) CHECK(p.size() >= cv::JsonWriter::kDrainAt);
  w.drain();
  w.drain();  // nothing left: nothing more
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  CHECK(joined == all);
}

namespace {

// Every lane moved by 1000, named "L <name>", sorted backwards: to see that the writer asks the placement.
class ShiftedLanes final : public cv::LanePlacement {
 public:
  void thread_seen(int64_t, int64_t) override {}
  int64_t lane_tid(int64_t tid) override { return tid + 1000; }
  std::string lane_name(int64_t, const std::string& name) override { return "L " + name; }
  int64_t lane_sort_index(int64_t, int64_t index) override { return -index; }
  bool process_metadata() const override { return false; }
};

}  // namespace

TEST_CASE("trace events: each kind of event as the trace has it, names from a target escaped") {
  const auto events = [](cv::LanePlacement* placement, bool ts_as_string) {
    return written([&](cv::JsonWriter& w) {
      cv::EventWriter out(w, 0, placement, ts_as_string);
      out.slice("gil", "hold_gil", 7, 8, 1'000'001, 2'000'000);
      out.slice("stack", "run\"\n\x1b[2J", 7, 8, 1'000'001, 1'500'000,
                [](cv::JsonWriter& a) { a.field("file", "x.py").field("line", 3); });
      out.instant("drop_gil", 7, 8, 2'000'000);
      out.process_counter("gil_waiters", 7, 3'000, [](cv::JsonWriter& a) { a.field("waiters", 2); });
      out.thread_counter("tid 8", 7, 8, 3'000, [](cv::JsonWriter& a) { a.key("cpu %").fixed(12.34, 1); });
      out.thread_name(7, 8, 0, "w\xc3\xa9rk\xff");
      out.thread_sort_index(7, 8, 0, 3);
      out.process_metadata("process_sort_index", 7, 0, "sort_index", 2);
      CHECK(out.count() == 8);
    });
  };
  CHECK(events(nullptr, false) ==
        R"({"ph":"X","cat":"gil","name":"hold_gil","pid":7,"tid":8,"ts":1000.001,"dur":999.999})"
        ",\n"
        R"({"ph":"X","cat":"stack","name":"run\"\n\u001b[2J","pid":7,"tid":8,"ts":1000.001,"dur":499.999,)"
        R"("args":{"file":"x.py","line":3}})"
        ",\n"
        R"({"ph":"I","s":"t","cat":"gil","name":"drop_gil","pid":7,"tid":8,"ts":2000.000})"
        ",\n"
        R"({"ph":"C","cat":"gil","name":"gil_waiters","pid":7,"tid":0,"ts":3.000,"args":{"waiters":2}})"
        ",\n"
        R"({"ph":"C","cat":"cpu","name":"tid 8","pid":7,"tid":8,"ts":3.000,"args":{"cpu %":12.3}})"
        ",\n"
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":7,\"tid\":8,\"ts\":0.000,\"args\":{\"name\":"
        "\"w\xc3\xa9rk\xef\xbf\xbd\"}}"
        ",\n"
        R"({"ph":"M","name":"thread_sort_index","pid":7,"tid":8,"ts":0.000,"args":{"sort_index":3}})"
        ",\n"
        R"({"ph":"M","name":"process_sort_index","pid":7,"tid":0,"ts":0.000,"args":{"sort_index":2}})");
  // Through a placement (the process counter's tid 0 stays), ts as strings (Ascend).
  ShiftedLanes lanes;
  const std::string placed = events(&lanes, true);
  CHECK(placed.find(R"("tid":1008,"ts":"1000.001","dur":999.999)") != std::string::npos);
  CHECK(placed.find(R"("name":"gil_waiters","pid":7,"tid":0,"ts":"3.000")") != std::string::npos);
  CHECK(placed.find("\"args\":{\"name\":\"L w\xc3\xa9rk\xef\xbf\xbd\"}") != std::string::npos);
  CHECK(placed.find(R"("args":{"sort_index":-3})") != std::string::npos);
  CHECK(placed.find(R"("name":"process_sort_index","pid":7,"tid":1000,)") != std::string::npos);
  CHECK(json::accept("[" + placed + "]"));
}
