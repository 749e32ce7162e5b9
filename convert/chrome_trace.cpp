#include "convert/chrome_trace.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "gilspy_version.hpp"
#include "raw/summary.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

void append_us(fmt::memory_buffer& out, int64_t ns) {
  // Integer arithmetic: a double would lose the nanoseconds of a large offset.
  const bool negative = ns < 0;
  const uint64_t a = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", negative ? "-" : "", a / 1000, a % 1000);
}

std::string json_string(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The output file: events are formatted into a buffer that goes out in large writes.
class TraceFile {
 public:
  explicit TraceFile(std::string path) : path_(std::move(path)) {
    file_ = std::fopen(path_.c_str(), "w");
    if (file_ == nullptr) throw Error(ErrorKind::kIo, "cannot create " + path_ + ": " + std::strerror(errno));
  }
  ~TraceFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  fmt::memory_buffer& buf() { return buf_; }
  void maybe_drain() {
    if (buf_.size() >= (1 << 16)) drain();
  }
  void drain() {
    if (buf_.size() != 0 && std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size()) fail();
    buf_.clear();
  }
  void close() {
    drain();
    const bool ok = std::fflush(file_) == 0 && std::ferror(file_) == 0;
    const int saved = errno;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok || !closed) {
      throw Error(ErrorKind::kIo, "cannot write " + path_ + ": " + std::strerror(ok ? errno : saved));
    }
  }

 private:
  [[noreturn]] void fail() {
    throw Error(ErrorKind::kIo, "cannot write " + path_ + ": " + std::strerror(errno));
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  fmt::memory_buffer buf_;
};

// Writes trace events, one a line, into the traceEvents array.
class EventWriter {
 public:
  explicit EventWriter(TraceFile& file) : file_(file) {}

  size_t count() const { return count_; }

  void slice(std::string_view name, int64_t pid, int64_t tid, int64_t ts, int64_t dur) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"X","cat":"gil","name":"{}","pid":{},"tid":{},"ts":)",
                   name, pid, tid);
    append_us(b, ts);
    b.append(std::string_view(R"(,"dur":)"));
    append_us(b, dur);
    end();
  }
  void instant(std::string_view name, int64_t pid, int64_t tid, int64_t ts) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b),
                   R"({{"ph":"i","s":"t","cat":"gil","name":"{}","pid":{},"tid":{},"ts":)", name, pid, tid);
    append_us(b, ts);
    end();
  }
  void counter(std::string_view name, int64_t pid, int64_t ts, std::string_view key, uint64_t value) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"C","cat":"gil","name":"{}","pid":{},"tid":0,"ts":)",
                   name, pid);
    append_us(b, ts);
    fmt::format_to(std::back_inserter(b), R"(,"args":{{"{}":{}}})", key, value);
    end();
  }
  // `value` is already JSON text.
  void metadata(std::string_view name, int64_t pid, int64_t tid, int64_t ts, std::string_view key,
                std::string_view value) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"M","name":"{}","pid":{},"tid":{},"ts":)", name, pid,
                   tid);
    append_us(b, ts);
    fmt::format_to(std::back_inserter(b), R"(,"args":{{"{}":{}}})", key, value);
    end();
  }

 private:
  fmt::memory_buffer& begin() {
    auto& b = file_.buf();
    if (count_ != 0) b.append(std::string_view(",\n"));
    ++count_;
    return b;
  }
  void end() {
    file_.buf().push_back('}');
    file_.maybe_drain();
  }

  TraceFile& file_;
  size_t count_ = 0;
};

// Thrown from on_meta in the first pass, to stop reading once the metadata is known.
struct MetaOnly {
  raw::Meta meta;
};

std::ifstream open_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot open " + path + ": " + std::strerror(errno));
  return in;
}

raw::Meta read_meta(const std::string& path) {
  std::ifstream in = open_input(path);
  try {
    raw::read(
        in, path, [](const raw::Meta& m) { throw MetaOnly{m}; }, [](const raw::Record&) {});
  } catch (MetaOnly& m) {
    return std::move(m.meta);
  }
  // raw::read throws when there is no meta, so this is not reached; keep the compiler and a reader sure.
  throw Error(ErrorKind::kBadInput, path + " is not a gilspy raw file: it has no \"meta\"");
}

json stats_json(const raw::Stats& s) {
  return {{"ts_ns", s.ts},
          {"polls", s.polls},
          {"late_polls", s.late},
          {"missed_polls", s.missed},
          {"handoffs_seen", s.handoffs_seen},
          {"handoffs_total", s.handoffs_total}};
}

// The second pass over one input: its events into the trace.
class InputConverter {
 public:
  InputConverter(EventWriter& out, ConvertInputReport& report, int64_t base_ns)
      : out_(out), report_(report), base_ns_(base_ns) {}

  void on_meta(const raw::Meta& m) {
    report_.meta = m;
    offset_ns_ = m.realtime_ns - base_ns_;
    pid_ = report_.trace_pid;
    const std::string name = fmt::format("python {} pid {} rank {}", m.python_version, m.pid, m.rank);
    std::string labels = fmt::format("rank {}", m.rank);
    if (!m.hostname.empty()) labels += ", host " + m.hostname;
    out_.metadata("process_name", pid_, 0, offset_ns_, "name", json_string(name));
    out_.metadata("process_labels", pid_, 0, offset_ns_, "labels", json_string(labels));
    out_.metadata("process_sort_index", pid_, 0, offset_ns_, "sort_index", std::to_string(m.rank));
  }

  void on_record(const raw::Record& r) {
    summary_.add(r);
    std::visit(raw::overloaded{
                   [&](const raw::ThreadStart& x) {
                     Lane& l = lane(x.tid);
                     std::string name = x.name.empty() ? fmt::format("thread {}", x.tid) : x.name;
                     // A container's own id of the thread, as its profiler's trace names it.
                     if (x.ns_tid != 0) name += fmt::format(" [tid {} in its PID namespace]", x.ns_tid);
                     if (!l.named || l.name != name) name_lane(x.tid, l, name);
                   },
                   [&](const raw::Hold& x) { interval(true, x.tid, x.ts, x.dur); },
                   [&](const raw::Wait& x) { interval(false, x.tid, x.ts, x.dur); },
                   [&](const raw::Waiters& x) {
                     int64_t ts = x.ts;
                     if (ts < last_counter_ns_) {
                       ts = last_counter_ns_;
                       ++report_.adjusted;
                     }
                     last_counter_ns_ = ts;
                     out_.counter("gil_waiters", pid_, offset_ns_ + ts, "waiters", x.n);
                   },
                   [&](const raw::Stats& x) { last_stats_ = x; },
                   [](const raw::ThreadEnd&) {},
                   [](const raw::ThreadState&) {},  // not in raw files; a live view's
               },
               r);
  }

  // After the input's last event: names for lanes no T record named; the input's entry for otherData.
  json finish(const raw::ReadResult& result) {
    for (auto& [tid, l] : lanes_) {
      if (!l.named) name_lane(tid, l, fmt::format("thread {}", tid));
    }
    report_.records = result.records;
    report_.complete = result.complete;
    report_.problem = result.problem;
    json summary;
    if (result.summary) {
      summary = *result.summary;
    } else {
      raw::LoopFigures loop;
      loop.stop_reason = "unknown (recording cut short; summary rebuilt by convert)";
      summary = summary_.to_json(report_.meta.rate_hz, loop);
      report_.summary_rebuilt = true;
    }
    const raw::Meta& m = report_.meta;
    json j = {{"path", report_.path},
              {"pid", m.pid},
              {"trace_pid", report_.trace_pid},
              {"rank", m.rank},
              {"python_version", m.python_version},
              {"hostname", m.hostname},
              {"complete", report_.complete},
              {"problem", report_.problem},
              {"records", report_.records},
              {"trace_events", report_.events},
              {"adjusted_events", report_.adjusted},
              {"summary_rebuilt", report_.summary_rebuilt},
              {"meta", raw::to_json(m)},
              {"last_stats", last_stats_ ? stats_json(*last_stats_) : json(nullptr)},
              {"summary", std::move(summary)}};
    return j;
  }

 private:
  void interval(bool hold, int64_t tid, int64_t ts, int64_t dur) {
    Lane& l = lane(tid);
    int64_t start = ts;
    int64_t end = ts + dur;
    if (start < l.last_end) {  // never happens with a well-formed file; a lane must not overlap itself
      start = l.last_end;
      ++report_.adjusted;
    }
    end = std::max(end, start);
    l.last_end = end;
    out_.slice(hold ? "hold_gil" : "take_gil", pid_, tid, offset_ns_ + start, end - start);
    if (hold) out_.instant("drop_gil", pid_, tid, offset_ns_ + end);
  }

  struct Lane {
    std::string name;
    bool named = false;
    int64_t sort_index = 0;
    int64_t last_end = std::numeric_limits<int64_t>::min();
  };

  Lane& lane(int64_t tid) {
    auto [it, inserted] = lanes_.try_emplace(tid);
    if (inserted) it->second.sort_index = tid == report_.meta.pid ? 0 : ++next_sort_index_;
    return it->second;
  }

  void name_lane(int64_t tid, Lane& l, const std::string& name) {
    out_.metadata("thread_name", pid_, tid, offset_ns_, "name", json_string(name));
    if (!l.named)
      out_.metadata("thread_sort_index", pid_, tid, offset_ns_, "sort_index", std::to_string(l.sort_index));
    l.name = name;
    l.named = true;
  }

  EventWriter& out_;
  ConvertInputReport& report_;
  int64_t base_ns_;
  int64_t offset_ns_ = 0;
  int64_t pid_ = 0;
  std::unordered_map<int64_t, Lane> lanes_;
  int64_t next_sort_index_ = 0;
  int64_t last_counter_ns_ = std::numeric_limits<int64_t>::min();
  std::optional<raw::Stats> last_stats_;
  raw::SummaryBuilder summary_;
};

// Removes the temporary output unless the conversion got to the end.
struct TempFileGuard {
  std::string path;
  bool keep = false;
  ~TempFileGuard() {
    if (!keep) std::remove(path.c_str());
  }
};

}  // namespace

std::string format_us(int64_t ns) {
  fmt::memory_buffer b;
  append_us(b, ns);
  return fmt::to_string(b);
}

std::string default_output_path(const std::string& input) {
  std::string stem = input;
  auto strip = [&](std::string_view suffix) {
    if (stem.size() > suffix.size() &&
        stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      stem.resize(stem.size() - suffix.size());
      return true;
    }
    return false;
  };
  strip(".partial");
  strip(".json");
  return stem + ".trace.json";
}

ConvertReport convert_to_chrome_trace(const std::vector<std::string>& inputs, const std::string& output) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no input to convert");
  ConvertReport report;
  report.output = output;

  // Pass 1: every input's metadata (a file that is not a recording fails here, before any output exists).
  std::set<int64_t> pids_used;
  for (const auto& path : inputs) {
    ConvertInputReport r;
    r.path = path;
    r.meta = read_meta(path);
    r.trace_pid = r.meta.pid;
    while (!pids_used.insert(r.trace_pid).second) r.trace_pid += kPidOffset;
    report.inputs.push_back(std::move(r));
  }
  report.base_time_ns = report.inputs.front().meta.realtime_ns;
  for (const auto& r : report.inputs) report.base_time_ns = std::min(report.base_time_ns, r.meta.realtime_ns);

  // Pass 2: stream the events.
  TempFileGuard guard{output + ".tmp"};
  TraceFile file(guard.path);
  file.buf().append(std::string_view("{\"traceEvents\":[\n"));
  EventWriter events(file);
  json other_inputs = json::array();
  for (auto& r : report.inputs) {
    std::ifstream in = open_input(r.path);
    InputConverter conv(events, r, report.base_time_ns);
    const size_t before = events.count();
    const raw::ReadResult result = raw::read(
        in, r.path, [&](const raw::Meta& m) { conv.on_meta(m); },
        [&](const raw::Record& rec) { conv.on_record(rec); });
    json entry = conv.finish(result);
    r.events = events.count() - before;
    entry["trace_events"] = r.events;
    other_inputs.push_back(std::move(entry));
  }
  report.events_written = events.count();

  const json other = {
      {"gilspy_version", kGilspyVersion},
      {"time_base",
       "ts and dur are microseconds; ts counts from baseTimeNanoseconds (CLOCK_REALTIME, ns since the "
       "Unix epoch), the earliest start among the inputs"},
      {"inputs", std::move(other_inputs)}};
  fmt::format_to(std::back_inserter(file.buf()),
                 "\n],\n\"displayTimeUnit\":\"ms\",\n\"baseTimeNanoseconds\":{},\n\"otherData\":{}}}\n",
                 report.base_time_ns, other.dump(-1, ' ', false, json::error_handler_t::replace));
  file.close();
  if (std::rename(guard.path.c_str(), output.c_str()) != 0) {
    throw Error(ErrorKind::kIo,
                "cannot rename " + guard.path + " to " + output + ": " + std::strerror(errno));
  }
  guard.keep = true;
  return report;
}

}  // namespace gilspy::convert
