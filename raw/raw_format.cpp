#include "raw/raw_format.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <streambuf>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "raw/counter_lines.hpp"
#include "raw/event_line.hpp"
#include "raw/fast_reader.hpp"
#include "raw/gc_lines.hpp"
#include "raw/stack_lines.hpp"

namespace gilspy::raw {

using nlohmann::json;

json to_json(const Meta& m) {
  return json{{"gilspy_version", m.gilspy_version},
              {"pid", m.pid},
              {"rank", m.rank},
              {"python_version", m.python_version},
              {"python_binary", m.python_binary},
              {"build", m.build},
              {"free_threaded", m.free_threaded},
              {"command", m.command},
              {"hostname", m.hostname},
              {"clock", {{"monotonic_ns", m.monotonic_ns}, {"realtime_ns", m.realtime_ns}}},
              {"rate_hz", m.rate_hz},
              {"switch_interval_us", m.switch_interval_us},
              {"gil_addr", m.gil_addr},
              {"ns_pid", m.ns_pid},  // 0 unless the target runs in another PID namespace
              {"mode", m.mode}};
}

Meta meta_from_json(const json& j) {
  auto need = [&](const char* key) -> const json& {
    if (!j.is_object() || !j.contains(key))
      throw Error(ErrorKind::kBadInput, std::string("meta has no \"") + key + "\"");
    return j.at(key);
  };
  // Only integers (a float converted to one would be undefined past its range), within int64.
  auto integer = [](const json& v, const char* key) -> int64_t {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})) {
      throw Error(ErrorKind::kBadInput, std::string("meta's \"") + key + "\" is not an integer in range");
    }
    return v.get<int64_t>();
  };
  auto optional_unsigned = [&](const char* key) -> uint64_t {
    return j.contains(key) && j.at(key).is_number_unsigned() ? j.at(key).get<uint64_t>() : 0;
  };
  try {
    Meta m;
    m.gilspy_version = need("gilspy_version").get<std::string>();
    m.pid = integer(need("pid"), "pid");
    m.rank = integer(need("rank"), "rank");
    m.python_version = need("python_version").get<std::string>();
    m.python_binary = j.value("python_binary", "");
    m.build = j.value("build", "");
    m.free_threaded = j.value("free_threaded", false);
    m.command = j.value("command", "");
    m.hostname = j.value("hostname", "");
    const json& clock = need("clock");
    m.monotonic_ns = integer(clock.at("monotonic_ns"), "clock.monotonic_ns");
    m.realtime_ns = integer(clock.at("realtime_ns"), "clock.realtime_ns");
    m.rate_hz = need("rate_hz").get<double>();
    m.switch_interval_us = optional_unsigned("switch_interval_us");
    m.gil_addr = optional_unsigned("gil_addr");
    m.ns_pid = j.contains("ns_pid") ? integer(j.at("ns_pid"), "ns_pid") : 0;
    m.mode = j.contains("mode") && j.at("mode").is_string() ? j.at("mode").get<std::string>() : "sampled";
    // Bounded so that what readers compute from them (a trace's time offsets, pid shifts) cannot overflow.
    if (m.pid < 0 || m.pid > INT32_MAX) throw Error(ErrorKind::kBadInput, "meta has a pid out of range");
    if (m.ns_pid < 0 || m.ns_pid > INT32_MAX)
      throw Error(ErrorKind::kBadInput, "meta has an ns_pid out of range");
    constexpr int64_t kMaxClockNs = int64_t{1} << 62;  // year 2116
    if (m.monotonic_ns < 0 || m.monotonic_ns > kMaxClockNs || m.realtime_ns < 0 ||
        m.realtime_ns > kMaxClockNs) {
      throw Error(ErrorKind::kBadInput, "meta has a clock anchor out of range");
    }
    return m;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kBadInput, std::string("meta is malformed: ") + e.what());
  }
}

std::optional<std::string> record_line(const Record& r) {
  return std::visit(
      overloaded{
          // A thread name comes from the kernel and need not be UTF-8: replace what is not, never throw.
          [](const ThreadStart& x) -> std::optional<std::string> {
            json a = json::array({"T", x.tid, x.ts, x.name, x.tstate});
            if (x.ns_tid != 0) a.push_back(x.ns_tid);
            return a.dump(-1, ' ', false, json::error_handler_t::replace);
          },
          [](const Hold& x) -> std::optional<std::string> {
            return json::array({"H", x.tid, x.ts, x.dur}).dump();
          },
          [](const Wait& x) -> std::optional<std::string> {
            return json::array({"W", x.tid, x.ts, x.dur}).dump();
          },
          [](const Waiters& x) -> std::optional<std::string> {
            return json::array({"N", x.ts, x.n}).dump();
          },
          [](const ThreadEnd& x) -> std::optional<std::string> {
            return x.state_se_ns < 0 ? json::array({"E", x.tid, x.ts}).dump()
                                     : json::array({"E", x.tid, x.ts, x.state_se_ns}).dump();
          },
          [](const Stats& x) -> std::optional<std::string> {
            return json::array({"S", x.ts, x.polls, x.late, x.missed, x.handoffs_seen, x.handoffs_total})
                .dump();
          },
          [](const ProcessStopped& x) -> std::optional<std::string> {
            return json::array({"P", x.ts, x.dur}).dump();
          },
          [](const ThreadState&) -> std::optional<std::string> { return std::nullopt; },
          [](const GcCollection& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcUntimed& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcCounts& x) -> std::optional<std::string> { return gc_line(x); },
          [](const GcSettings& x) -> std::optional<std::string> { return gc_line(x); },
          [](const FrameDef& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackDef& x) -> std::optional<std::string> { return stack_line(x); },
          [](const ThreadName& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackSample& x) -> std::optional<std::string> { return stack_line(x); },
          [](const StackStats& x) -> std::optional<std::string> { return stack_line(x); },
          [](const CounterSetup& x) -> std::optional<std::string> { return counter_setup_line(x); },
          [](const CounterSample& x) -> std::optional<std::string> { return counter_sample_line(x); },
          [](const ThreadSwitches& x) -> std::optional<std::string> { return thread_switches_line(x); },
      },
      r);
}

Writer::Writer(std::string final_path, const Meta& meta, WriterOptions options)
    : final_path_(std::move(final_path)),
      partial_path_(final_path_ + ".partial"),
      options_(options),
      file_((OutputFile::check_replaceable(final_path_), OutputFile::named(partial_path_, options.mode))) {
  pending_ = std::string("{\"format\":\"") + kFormatName +
             "\",\"format_version\":" + std::to_string(kFormatVersion) +
             ",\n\"meta\":" + to_json(meta).dump(-1, ' ', false, json::error_handler_t::replace) +
             ",\n\"events\":[";
  head_bytes_ = pending_.size();
  if (auto e = flush()) {
    file_.discard();
    throw *e;
  }
}

Writer::~Writer() = default;  // unfinished: the .partial stays for recovery

void Writer::write(const Record& r) {
  if (const auto line = record_line(r)) write_line(*line);
}

void Writer::write_line(const std::string& line) {
  const size_t size = line.size() + 2;
  if (pending_.size() + size > options_.max_pending_bytes) {
    ++lost_records_;
    return;
  }
  const size_t before = pending_.size();
  pending_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
  pending_ += line;
  line_sizes_.push_back(pending_.size() - before);
  ++events_;
  if (!failing_ && pending_.size() >= (size_t{1} << 16)) flush();
}

void Writer::count_written(size_t bytes) {
  const size_t head = std::min(bytes, head_bytes_);
  head_bytes_ -= head;
  bytes -= head;
  if (head > 0 && head_bytes_ == 0 && head_is_event_) {
    ++events_in_file_;
    head_is_event_ = false;
  }
  while (bytes > 0 && !line_sizes_.empty()) {
    const size_t line = line_sizes_.front();
    line_sizes_.pop_front();
    if (bytes >= line) {
      bytes -= line;
      ++events_in_file_;
    } else {
      head_bytes_ = line - bytes;
      head_is_event_ = true;
      bytes = 0;
    }
  }
}

std::optional<Error> Writer::flush() {
  int error = 0;
  const size_t written = file_.write_some(pending_, &error);
  count_written(written);
  pending_.erase(0, written);
  failing_ = error != 0;
  if (!failing_) return std::nullopt;
  return Error(ErrorKind::kIo, "cannot write " + partial_path_ + ": " + errno_text(error));
}

void Writer::finish(const json& summary) {
  // The end marker and summary go in even past the memory bound: they are what makes the file complete.
  pending_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
  pending_ += R"(["F"])";
  pending_ += "],\n\"summary\":" + summary.dump(-1, ' ', false, json::error_handler_t::replace) + "}\n";
  if (auto e = flush()) throw *e;
  file_.commit(final_path_);
}

void Writer::discard() {
  file_.discard();
}

namespace {

// (kMaxNesting, kMaxEventNs, kMaxTotalDurationNs: raw/event_line.hpp, shared with the fast reader.)
// The bytes that end the events of every file the Writer finishes (strings inside are escaped, so this cannot
// occur inside one): a file that has them was finished, whatever happened to it later.
constexpr std::string_view kEndMarker = R"(["F"]])";

// Passes the input through to the JSON parser, counting bytes and looking for the end marker, so that a file
// that stops parsing can be told apart: cut short (no end marker: a killed recording) or corrupt (it has
// one).
class ScanningBuffer final : public std::streambuf {
 public:
  explicit ScanningBuffer(std::streambuf* source) : source_(source) {}
  // Bytes handed to the parser so far.
  uint64_t consumed() const { return before_ + static_cast<uint64_t>(gptr() - eback()); }
  bool marker_seen() const { return marker_seen_; }
  bool at_end() const { return at_end_; }
  // Reads the rest; returns the number of line ends in it.
  uint64_t drain_counting_lines() {
    uint64_t lines = static_cast<uint64_t>(std::count(gptr(), egptr(), '\n'));
    setg(eback(), egptr(), egptr());
    while (underflow() != traits_type::eof()) {
      lines += static_cast<uint64_t>(std::count(gptr(), egptr(), '\n'));
      setg(eback(), egptr(), egptr());
    }
    return lines;
  }
  uint64_t total() const { return before_ + static_cast<uint64_t>(egptr() - eback()); }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    before_ += static_cast<uint64_t>(egptr() - eback());
    const std::streamsize n = at_end_ ? 0 : source_->sgetn(chunk_, sizeof chunk_);
    if (n <= 0) {
      at_end_ = true;
      setg(chunk_, chunk_, chunk_);
      return traits_type::eof();
    }
    scan(std::string_view(chunk_, static_cast<size_t>(n)));
    setg(chunk_, chunk_, chunk_ + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  void scan(std::string_view chunk) {
    if (marker_seen_) return;
    // The marker may straddle two chunks: look at the end of the previous one together with this one.
    const std::string joined =
        tail_ + std::string(chunk.substr(0, std::min(chunk.size(), kEndMarker.size())));
    if (joined.find(kEndMarker) != std::string::npos || chunk.find(kEndMarker) != std::string_view::npos) {
      marker_seen_ = true;
      return;
    }
    const std::string last = tail_ + std::string(chunk);
    tail_ = last.substr(last.size() > kEndMarker.size() ? last.size() - (kEndMarker.size() - 1) : 0);
  }

  std::streambuf* source_;
  char chunk_[1 << 16];
  uint64_t before_ = 0;  // bytes in the chunks before the current one
  std::string tail_;
  bool marker_seen_ = false;
  bool at_end_ = false;
};

// The parser's text for a syntax error, without its "last read: '...'" (the file's own bytes, which must not
// reach a terminal raw) and without the exception's id.
std::string syntax_error_text(const std::string& what) {
  std::string s = what;
  if (const size_t last = s.find("; last read"); last != std::string::npos) s.resize(last);
  if (const size_t id = s.find("] "); id != std::string::npos && s.rfind("[json.exception", 0) == 0)
    s.erase(0, id + 2);
  if (const size_t colon = s.find(": "); colon != std::string::npos && s.rfind("parse error", 0) == 0)
    s.erase(0, colon + 2);
  return s;
}

// Builds small JSON subtrees (meta, summary, one event) out of SAX calls.
class SubtreeBuilder {
 public:
  void begin() {
    root_ = json();
    stack_.clear();
    started_ = false;
  }
  // Returns true when the value completed the subtree.
  bool value(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
    } else {
      (*top)[key_] = std::move(v);
    }
    return false;
  }
  void open(json container) {
    if (stack_.empty() && !started_) {
      root_ = std::move(container);
      stack_.push_back(&root_);
    } else {
      json* top = stack_.back();
      if (top->is_array()) {
        top->push_back(std::move(container));
        stack_.push_back(&top->back());
      } else {
        stack_.push_back(&((*top)[key_] = std::move(container)));
      }
    }
    started_ = true;
  }
  bool close() {  // true when the subtree is complete
    stack_.pop_back();
    return stack_.empty();
  }
  void key(const std::string& k) { key_ = k; }
  json& root() { return root_; }

 private:
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool started_ = false;
};

}  // namespace

// One event line; nullopt for ["F"], the end of the events. Throws Error(kCorrupt) naming the event.
std::optional<Record> record_from_json(const json& a, size_t index, const std::string& name) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kCorrupt, name + ": event #" + std::to_string(index + 1) + " " + why);
  };
  // One letter, or two (format_version 3: the GC kinds "G?", the stack kinds "F?" and "K?", the counters'
  // "CD" and "CS").
  const std::string tag = a.is_array() && !a.empty() && a[0].is_string() ? a[0].get<std::string>() : "";
  if (is_counter_kind(tag)) return counter_record_from_json(a, bad);
  if (tag.empty() ||
      (tag.size() != 1 && !(tag.size() == 2 && (tag[0] == 'F' || tag[0] == 'K' || tag[0] == 'G')))) {
    throw bad("is not [\"<kind>\", ...]");
  }
  // The garbage collector's kinds (format_version 3): "G", "GI", "GC", "GS" (raw/gc_lines.cpp).
  if (tag[0] == 'G') return gc_record_from_json(a, bad);
  auto num = [&](size_t i) -> int64_t {
    if (i >= a.size() || !a[i].is_number_integer())
      throw bad("has no integer at position " + std::to_string(i));
    if (a[i].is_number_unsigned() && a[i].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw bad("has a number out of range at position " + std::to_string(i));
    }
    return a[i].get<int64_t>();
  };
  auto count = [&](size_t i) { return static_cast<uint64_t>(num(i)); };
  auto moment = [&](size_t i) {
    const int64_t t = num(i);
    if (t < -kMaxEventNs || t > kMaxEventNs)
      throw bad("has a time out of range at position " + std::to_string(i));
    return t;
  };
  auto duration = [&](size_t i) {
    const int64_t d = num(i);
    if (d < 0) throw bad("has a negative duration");
    if (d > kMaxEventNs) throw bad("has a duration out of range");
    return d;
  };
  switch (a[0].get<std::string>()[0]) {
    case 'T': {
      ThreadStart r;
      r.tid = num(1);
      r.ts = moment(2);
      if (a.size() < 4 || !a[3].is_string()) throw bad("has no thread name");
      r.name = a[3].get<std::string>();
      r.tstate = a.size() > 4 && a[4].is_number_unsigned() ? a[4].get<uint64_t>() : 0;
      r.ns_tid = a.size() > 5 && a[5].is_number_integer() ? a[5].get<int64_t>() : 0;
      return r;
    }
    case 'H':
      return Hold{.tid = num(1), .ts = moment(2), .dur = duration(3)};
    case 'W':
      return Wait{.tid = num(1), .ts = moment(2), .dur = duration(3)};
    case 'N':
      return Waiters{.ts = moment(1), .n = count(2)};
    case 'E':
      return ThreadEnd{.tid = num(1), .ts = moment(2), .state_se_ns = a.size() > 3 ? duration(3) : -1};
    case 'S':
      return Stats{.ts = moment(1),
                   .polls = count(2),
                   .late = count(3),
                   .missed = count(4),
                   .handoffs_seen = count(5),
                   .handoffs_total = count(6)};
    case 'P':
      return ProcessStopped{.ts = num(1), .dur = duration(2)};
    case 'F':
      if (tag.size() == 1 && a.size() == 1) return std::nullopt;  // ["F"]: the end of the events
      return stack_record_from_json(a, tag, bad);
    case 'K':
      return stack_record_from_json(a, tag, bad);
    default:
      throw bad("has an unknown kind " + a[0].dump(-1, ' ', true, json::error_handler_t::replace));
  }
}

namespace {

class RawSax final : public nlohmann::json_sax<json> {
 public:
  RawSax(const std::string& name, const std::function<void(const Meta&)>& on_meta,
         const std::function<void(const Record&)>& on_record, ReadResult& result, bool salvage)
      : name_(name), on_meta_(on_meta), on_record_(on_record), result_(result), salvage_(salvage) {}

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool v) override { return scalar(json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(json(v)); }
  bool string(string_t& v) override { return scalar(json(v)); }
  bool binary(binary_t&) override { return shape("binary data"); }

  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      ++depth_;
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    if (depth_ == 1 && builder_depth_ == 0) {
      --depth_;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return shape("a JSON array, not an object");
    if (depth_ == 1 && builder_depth_ == 0 && key_ == "events") {
      if (!meta_seen_) return shape("events before meta");
      ++depth_;
      in_events_ = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (in_events_ && depth_ == 2 && builder_depth_ == 0) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool key(string_t& k) override {
    if (depth_ == 1 && builder_depth_ == 0) {
      key_ = k;
      skipping_ = k != "meta" && k != "summary" && k != "events" && k != "format" && k != "format_version";
      if (!skipping_) builder_.begin();
    } else if (!skipping_) {
      builder_.key(k);
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    syntax_error_ = true;
    error_position_ = position;
    error_text_ = syntax_error_text(ex.what());
    return false;
  }

  bool syntax_error_ = false;
  size_t error_position_ = 0;  // as the parser counts: one past the offending byte
  std::string error_text_;
  std::string shape_problem_;    // not a raw file at all (before its meta)
  std::optional<Error> damage_;  // after the meta: what is wrong (an event, the nesting, the shape)
  bool meta_seen_ = false;
  bool format_ok_ = false;
  bool end_seen_ = false;

 private:
  bool shape(const std::string& what) {
    if (meta_seen_) return damaged(Error(ErrorKind::kCorrupt, what));
    shape_problem_ = what;
    return false;
  }
  bool damaged(Error e) {
    damage_ = std::move(e);
    return false;
  }
  bool scalar(json v) {
    if (depth_ == 0) return shape("a JSON scalar, not an object");
    if (depth_ == 1 && builder_depth_ == 0) {
      if (key_ == "format") {
        if (!v.is_string() || v.get<std::string>() != kFormatName)
          return shape("\"format\" is not \"gilspy-raw\"");
        format_ok_ = true;
      } else if (key_ == "format_version") {
        if (!v.is_number_integer() || v.get<int64_t>() > kFormatVersion || v.get<int64_t>() < 0) {
          return shape("format_version " + v.dump(-1, ' ', true, json::error_handler_t::replace) +
                       " is not one this gilspy understands");
        }
        result_.format_version = v.get<int>();
      } else if (key_ == "meta" || key_ == "summary" || key_ == "events") {
        return shape("\"" + key_ + "\" is not an object");
      }
      return true;
    }
    if (builder_depth_ == 0) return shape("events must be arrays");
    if (!skipping_) builder_.value(std::move(v));
    return true;
  }
  bool open(json container) {
    if (builder_depth_ >= kMaxNesting) {
      return shape("values nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    if (in_events_ && builder_depth_ == 0) {
      if (!container.is_array()) return shape("events must be arrays");
      builder_.begin();
    }
    ++builder_depth_;
    if (!skipping_) builder_.open(std::move(container));
    return true;
  }
  bool close() {
    --builder_depth_;
    if (skipping_) return true;  // an unknown top-level member: skipped, only its depth counted
    if (!builder_.close()) return true;
    if (in_events_) {
      std::optional<Record> r;
      try {
        r = record_from_json(builder_.root(), result_.records, name_);
      } catch (const Error& e) {
        if (!salvage_) throw;
        return damaged(e);
      }
      if (!r) {
        end_seen_ = true;
      } else {
        if (const int64_t* dur = duration_of(*r)) {
          total_duration_ns_ += *dur;  // each is at most 2^60: no overflow before the check
          if (total_duration_ns_ > kMaxTotalDurationNs) {
            return damaged(Error(ErrorKind::kCorrupt, name_ + ": event #" +
                                                          std::to_string(result_.records + 1) +
                                                          ": the durations add up to more than 146 years"));
          }
        }
        ++result_.records;
        on_record_(*r);
      }
    } else if (key_ == "meta") {
      if (!format_ok_) return shape("no \"format\":\"gilspy-raw\" before meta");
      Meta meta;
      try {
        meta = meta_from_json(builder_.root());
      } catch (const Error& e) {
        throw Error(e.kind(), name_ + ": " + e.what());
      }
      on_meta_(meta);
      meta_seen_ = true;
    } else if (key_ == "summary") {
      result_.summary = std::move(builder_.root());
    }
    return true;
  }
  static const int64_t* duration_of(const Record& r) {
    if (const auto* h = std::get_if<Hold>(&r)) return &h->dur;
    if (const auto* w = std::get_if<Wait>(&r)) return &w->dur;
    if (const auto* g = std::get_if<GcCollection>(&r)) return &g->dur;
    return nullptr;
  }

  const std::string& name_;
  const std::function<void(const Meta&)>& on_meta_;
  const std::function<void(const Record&)>& on_record_;
  ReadResult& result_;
  bool salvage_;
  SubtreeBuilder builder_;
  int depth_ = 0;          // 1 inside the top object, 2 inside "events"
  int builder_depth_ = 0;  // nesting inside a subtree being built (or skipped)
  bool in_events_ = false;
  bool skipping_ = false;  // inside an unknown top-level member
  int64_t total_duration_ns_ = 0;
  std::string key_;
};

}  // namespace

ReadResult read(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                const std::function<void(const Record&)>& on_record, const ReadOptions& options) {
  // A file exactly as the Writer writes it (every finished recording) is read line by line (fast_reader.hpp).
  // Anything else, or anything that path does not vouch for, is read below from the start, skipping what the
  // fast path delivered already: damage, cuts and salvage are judged in one place.
  const FastRead fast = read_fast(in, name, on_meta, on_record);
  if (fast.result) return *fast.result;
  bool meta_delivered = fast.meta_delivered;
  size_t records_delivered = fast.records_delivered;
  const std::function<void(const Meta&)> meta_once = [&](const Meta& m) {
    if (!std::exchange(meta_delivered, false)) on_meta(m);
  };
  const std::function<void(const Record&)> records_after = [&](const Record& r) {
    if (records_delivered > 0) {
      --records_delivered;
    } else {
      on_record(r);
    }
  };
  ReadResult result;
  RawSax sax(name, meta_once, records_after, result, options.salvage);
  ScanningBuffer scanning(in.rdbuf());
  std::istream scanned(&scanning);
  if (scanned.peek() == std::char_traits<char>::eof()) throw Error(ErrorKind::kBadInput, name + " is empty");
  bool ok = false;
  try {
    ok = json::sax_parse(scanned, &sax, nlohmann::detail::input_format_t::json, true, false);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    // An event that is wrong (without salvage): where it is, and whether the file was finished.
    const uint64_t at = scanning.consumed();
    scanning.drain_counting_lines();
    throw Error(ErrorKind::kCorrupt,
                std::string(e.what()) + ", at byte offset " + std::to_string(at) + " of " +
                    std::to_string(scanning.total()) +
                    (scanning.marker_seen() ? " (the file was finished: it is corrupt)" : ""));
  }
  if (!sax.shape_problem_.empty()) {
    throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: " + sax.shape_problem_);
  }
  if (!sax.meta_seen_) {
    if (sax.syntax_error_) {
      throw Error(ErrorKind::kBadInput,
                  name + " is not a gilspy raw file (JSON error at byte offset " +
                      std::to_string(sax.error_position_ > 0 ? sax.error_position_ - 1 : 0) + ": " +
                      sax.error_text_ + ")");
    }
    throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: it has no \"meta\"");
  }
  if (ok && sax.end_seen_ && result.summary.has_value()) {
    result.complete = true;
    return result;
  }
  // Where reading stopped, and whether the file was ever finished (its end marker is somewhere in it).
  const uint64_t stop = sax.syntax_error_ ? (sax.error_position_ > 0 ? sax.error_position_ - 1 : 0)
                                          : (scanning.consumed() > 0 ? scanning.consumed() - 1 : 0);
  const uint64_t lines_after = ok ? 0 : scanning.drain_counting_lines();
  const uint64_t size = scanning.total();
  const bool cut_short = sax.syntax_error_ && !sax.damage_ && stop >= size;
  const bool finished = scanning.marker_seen() || sax.end_seen_;
  result.bytes = size;
  if ((ok && !finished) || (cut_short && !finished)) {
    // A recording that did not finish: killed, or still being written.
    result.problem =
        ok ? "it ends without the summary" : "it is cut short after " + std::to_string(size) + " bytes";
    result.problem += " (the recording did not finish); recovered " + std::to_string(result.records) +
                      " events up to the last complete one";
    return result;
  }
  std::string what = sax.damage_ ? std::string(sax.damage_->what())
                     : ok        ? "it has no \"summary\" after its events"
                     : cut_short ? "it ends in the middle of its summary"
                                 : sax.error_text_;
  if (what.rfind(name + ": ", 0) == 0) what.erase(0, name.size() + 2);
  const std::string where = "at byte offset " + std::to_string(stop) + " of " + std::to_string(size);
  const std::string why = finished ? " (it has its end marker: damaged, not merely unfinished)" : "";
  if (!options.salvage) {
    throw Error(ErrorKind::kCorrupt, name + " is corrupt " + where + ": " + what + why + "; the " +
                                         std::to_string(result.records) +
                                         " events before it can be salvaged");
  }
  result.corrupt = true;
  result.damage_offset = stop;
  result.unread_lines = lines_after;
  result.problem = "it is corrupt " + where + ": " + what + why + "; salvaged the " +
                   std::to_string(result.records) + " events before it, about " +
                   std::to_string(lines_after) + " lines after it were not read";
  return result;
}

}  // namespace gilspy::raw
