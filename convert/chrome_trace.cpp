#include "convert/chrome_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/output_file.hpp"
#include "convert/counter_tracks.hpp"
#include "convert/gc_trace.hpp"
#include "convert/input_events.hpp"
#include "convert/namespace_lanes.hpp"
#include "convert/stack_slices.hpp"
#include "gilspy_version.hpp"
#include "raw/summary.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

// Integers and the text around them, without a format string to parse: these run for every event, and a
// convert writes millions of them (bench/convert_bench.py).
void append_int(fmt::memory_buffer& out, int64_t v) {
  const fmt::format_int text(v);
  out.append(text.data(), text.data() + text.size());
}

// The same, straight into memory the caller reserved (at most 21 bytes for an integer, 22 for microseconds).
char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
char* put_int(char* p, int64_t v) {
  const fmt::format_int text(v);
  return put(p, std::string_view(text.data(), text.size()));
}
char* put_us(char* p, int64_t ns) {
  const bool negative = ns < 0;
  const uint64_t a = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (negative) *p++ = '-';
  const fmt::format_int whole(a / 1000);
  p = put(p, std::string_view(whole.data(), whole.size()));
  const auto r = static_cast<unsigned>(a % 1000);
  *p++ = '.';
  *p++ = static_cast<char>('0' + r / 100);
  *p++ = static_cast<char>('0' + r / 10 % 10);
  *p++ = static_cast<char>('0' + r % 10);
  return p;
}

void append_us(fmt::memory_buffer& out, int64_t ns) {
  // Integer arithmetic: a double would lose the nanoseconds of a large offset.
  const bool negative = ns < 0;
  const uint64_t a = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (negative) out.push_back('-');
  const fmt::format_int whole(a / 1000);
  out.append(whole.data(), whole.data() + whole.size());
  const auto r = static_cast<unsigned>(a % 1000);
  const char frac[4] = {'.', static_cast<char>('0' + r / 100), static_cast<char>('0' + r / 10 % 10),
                        static_cast<char>('0' + r % 10)};
  out.append(frac, frac + 4);
}

std::string json_string(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The output file: events are formatted into a buffer that goes out in large writes. Created unnamed (or
// under a random name) in the output's folder and given the output's name only when complete
// (base/output_file.hpp); destroyed before that, it leaves nothing behind.
class TraceFile final : public EventOutput {
 public:
  TraceFile(const std::string& path, mode_t mode) : file_(OutputFile::temporary(path, mode)) {}

  fmt::memory_buffer& buf() override { return buf_; }
  void maybe_drain() override {
    if (buf_.size() >= (1 << 16)) drain();
  }
  void drain() {
    file_.write_all(std::string_view(buf_.data(), buf_.size()));
    buf_.clear();
  }
  void commit() {
    drain();
    file_.commit();
  }

 private:
  OutputFile file_;
  fmt::memory_buffer buf_;
};

// Writes trace events, one a line, into the traceEvents array.
class EventWriter {
 public:
  // `count`: events already in the array (a separator goes before the next). With a placement, every lane's
  // tid and name go through it (convert/lane_placement.hpp); with ts_as_string, ts is written as a JSON
  // string.
  explicit EventWriter(EventOutput& file, size_t count = 0, LanePlacement* placement = nullptr,
                       bool ts_as_string = false)
      : file_(file), count_(count), placement_(placement), ts_as_string_(ts_as_string) {}

  size_t count() const { return count_; }

  // [start_ns, end_ns): dur is written so that ts + dur, added as doubles, does not pass end_ns
  // (reader_safe_dur_ns). `args` is empty or already JSON object text.
  void slice(std::string_view name, int64_t pid, int64_t tid, int64_t start_ns, int64_t end_ns,
             std::string_view args = {}) {
    const int64_t dur = reader_safe_dur_ns(start_ns, end_ns);
    const int64_t lane_tid = lane(tid);
    auto& b = begin();
    // Written in place: the fixed text, two integers, two times and the name and args are bounded by this.
    const size_t at = b.size();
    b.resize(at + 170 + name.size() + args.size());
    char* p = b.data() + at;
    p = put(p, R"({"ph":"X","cat":"gil","name":")");
    p = put(p, name);
    p = put(p, R"(","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":)");
    p = put_int(p, lane_tid);
    p = put(p, R"(,"ts":)");
    p = put_ts(p, start_ns);
    p = put(p, R"(,"dur":)");
    p = put_us(p, dur);
    if (!args.empty()) {
      p = put(p, R"(,"args":)");
      p = put(p, args);
    }
    b.resize(static_cast<size_t>(p - b.data()));
    end();
  }
  // A Python frame under a GIL slice (convert/stack_slices.hpp): category "stack", `name_json` already a JSON
  // string (the name comes from the target). On the GIL slice's lane (through the placement).
  void frame_slice(std::string_view name_json, int64_t pid, int64_t tid, int64_t start_ns, int64_t end_ns,
                   std::string_view args) {
    const int64_t lane_tid = lane(tid);
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"X","cat":"stack","name":{},"pid":{},"tid":{},"ts":)",
                   name_json, pid, lane_tid);
    append_ts(b, start_ns);
    b.append(std::string_view(R"(,"dur":)"));
    append_us(b, reader_safe_dur_ns(start_ns, end_ns));
    fmt::format_to(std::back_inserter(b), R"(,"args":{})", args);
    end();
  }
  // "I", not "i": the DevTools trace engine keeps only "I" instants on a thread's track, MindStudio Insight
  // reads only "I"; Perfetto reads both.
  void instant(std::string_view name, int64_t pid, int64_t tid, int64_t ts, std::string_view args = {}) {
    const int64_t lane_tid = lane(tid);
    auto& b = begin();
    const size_t at = b.size();
    b.resize(at + 150 + name.size() + args.size());
    char* p = b.data() + at;
    p = put(p, R"({"ph":"I","s":"t","cat":"gil","name":")");
    p = put(p, name);
    p = put(p, R"(","pid":)");
    p = put_int(p, pid);
    p = put(p, R"(,"tid":)");
    p = put_int(p, lane_tid);
    p = put(p, R"(,"ts":)");
    p = put_ts(p, ts);
    if (!args.empty()) {
      p = put(p, R"(,"args":)");
      p = put(p, args);
    }
    b.resize(static_cast<size_t>(p - b.data()));
    end();
  }
  // A counter with several series: `args` is JSON object text.
  void counter(std::string_view name, int64_t pid, int64_t ts, std::string_view args) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"C","cat":"gil","name":"{}","pid":{},"tid":0,"ts":)",
                   name, pid);
    append_ts(b, ts);
    fmt::format_to(std::back_inserter(b), R"(,"args":{})", args);
    end();
  }
  void counter(std::string_view name, int64_t pid, int64_t ts, std::string_view key, uint64_t value) {
    auto& b = begin();
    b.append(std::string_view(R"({"ph":"C","cat":"gil","name":")"));
    b.append(name);
    b.append(std::string_view(R"(","pid":)"));
    append_int(b, pid);
    b.append(std::string_view(R"(,"tid":0,"ts":)"));
    append_ts(b, ts);
    b.append(std::string_view(R"(,"args":{")"));
    b.append(key);
    b.append(std::string_view(R"(":)"));
    const fmt::format_int v(value);
    b.append(v.data(), v.data() + v.size());
    b.append(std::string_view("}"));
    end();
  }
  // A counter on a thread's behalf; `args` is JSON object text (several values: one track each in Perfetto).
  void counter_args(std::string_view name, int64_t pid, int64_t tid, int64_t ts, std::string_view args) {
    const int64_t lane_tid = lane(tid);
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"C","cat":"cpu","name":"{}","pid":{},"tid":{},"ts":)",
                   name, pid, lane_tid);
    append_ts(b, ts);
    fmt::format_to(std::back_inserter(b), R"(,"args":{})", args);
    end();
  }
  // `value` is already JSON text.
  void metadata(std::string_view name, int64_t pid, int64_t tid, int64_t ts, std::string_view key,
                std::string_view value) {
    auto& b = begin();
    fmt::format_to(std::back_inserter(b), R"({{"ph":"M","name":"{}","pid":{},"tid":{},"ts":)", name, pid,
                   lane(tid));
    append_ts(b, ts);
    std::string placed;  // a lane's name and sort index as the placement has them
    if (placement_ != nullptr && name == "thread_name")
      placed = placement_->lane_name(tid, std::string(value));
    if (placement_ != nullptr && name == "thread_sort_index") {
      placed = placement_->lane_sort_index(tid, std::string(value));
    }
    fmt::format_to(std::back_inserter(b), R"(,"args":{{"{}":{}}})", key, placed.empty() ? value : placed);
    end();
  }
  // A thread's T record, for the placement (before its lane is named).
  void thread_seen(int64_t tid, int64_t ns_tid, const std::string& name) {
    if (placement_ != nullptr) placement_->thread_seen(tid, ns_tid, name);
  }
  bool process_metadata() const { return placement_ == nullptr || placement_->process_metadata(); }

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
  int64_t lane(int64_t tid) { return placement_ != nullptr ? placement_->lane_tid(tid) : tid; }
  char* put_ts(char* p, int64_t ns) const {
    if (ts_as_string_) *p++ = '"';
    p = put_us(p, ns);
    if (ts_as_string_) *p++ = '"';
    return p;
  }
  void append_ts(fmt::memory_buffer& b, int64_t ns) {
    if (ts_as_string_) b.push_back('"');
    append_us(b, ns);
    if (ts_as_string_) b.push_back('"');
  }

  EventOutput& file_;
  size_t count_ = 0;
  LanePlacement* placement_ = nullptr;
  bool ts_as_string_ = false;
};

// The garbage collector's lanes (gc_trace.hpp) write through this.
class EventWriterOut final : public TraceOut {
 public:
  explicit EventWriterOut(EventWriter& w) : w_(w) {}
  void slice(std::string_view name, int64_t pid, int64_t tid, int64_t start_ns, int64_t end_ns,
             std::string_view args) override {
    w_.slice(name, pid, tid, start_ns, end_ns, args);
  }
  void instant(std::string_view name, int64_t pid, int64_t tid, int64_t ts_ns,
               std::string_view args) override {
    w_.instant(name, pid, tid, ts_ns, args);
  }
  void counter(std::string_view name, int64_t pid, int64_t ts_ns, std::string_view args) override {
    w_.counter(name, pid, ts_ns, args);
  }
  void metadata(std::string_view name, int64_t pid, int64_t tid, int64_t ts_ns, std::string_view key,
                std::string_view value) override {
    w_.metadata(name, pid, tid, ts_ns, key, value);
  }

 private:
  EventWriter& w_;
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
      : out_(out), gc_out_(out), report_(report), base_ns_(base_ns) {}

  void on_meta(const raw::Meta& m) {
    report_.meta = m;
    offset_ns_ = m.realtime_ns - base_ns_;
    pid_ = report_.trace_pid;
    gc_.begin(gc_out_, pid_, offset_ns_);
    if (!out_.process_metadata()) return;  // another program's process (a merge): named already
    std::string name = fmt::format("python {} pid {} rank {}", m.python_version,
                                   report_.namespace_ids ? m.ns_pid : m.pid, m.rank);
    // A container's process: the other pid beside it, so that either view finds it.
    if (report_.namespace_ids)
      name += fmt::format(" (pid {} on the host)", m.pid);
    else if (m.ns_pid != 0)
      name += fmt::format(" (pid {} in its PID namespace)", m.ns_pid);
    std::string labels = fmt::format("rank {}", m.rank);
    if (!m.hostname.empty()) labels += ", host " + m.hostname;
    out_.metadata("process_name", pid_, 0, offset_ns_, "name", json_string(name));
    out_.metadata("process_labels", pid_, 0, offset_ns_, "labels", json_string(labels));
    out_.metadata("process_sort_index", pid_, 0, offset_ns_, "sort_index", std::to_string(m.rank));
  }

  void on_record(const raw::Record& r) {
    summary_.add(r);
    stacks_.add(r);
    std::visit(raw::overloaded{
                   [&](const raw::ThreadStart& x) {
                     out_.thread_seen(x.tid, x.ns_tid, x.name);
                     Lane& l = lane(x.tid);
                     std::string name = x.name.empty() ? fmt::format("thread {}", x.tid) : x.name;
                     // A container's own id of the thread, as its profiler's trace names it.
                     l.suffix = x.ns_tid != 0 ? fmt::format(" [tid {} in its PID namespace]", x.ns_tid) : "";
                     name += l.suffix;
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
                     waiters_change(ts, x.n);
                   },
                   [&](const raw::Stats& x) {
                     last_stats_ = x;
                     seen_until(x.ts);
                   },
                   [&](const raw::ProcessStopped& x) {
                     // On the process's own lane (tid 0, where the counter is), named once.
                     if (!stop_lane_named_) {
                       out_.metadata("thread_name", pid_, 0, offset_ns_, "name", json_string("process"));
                       stop_lane_named_ = true;
                     }
                     out_.slice("process_stopped", pid_, 0, offset_ns_ + x.ts, offset_ns_ + x.ts + x.dur);
                     seen_until(x.ts + x.dur);
                   },
                   [&](const raw::ThreadEnd& x) { seen_until(x.ts); },
                   [](const raw::ThreadState&) {},  // not in raw files; a live view's
                   [&](const raw::GcCollection& x) {
                     gc_.collection(x);
                     seen_until(x.ts + x.dur);
                     if (x.tid == 0 || x.hold_lead < 0 || x.held_dur <= 0) return;
                     // On the thread's lane inside its hold: the one written last when the collector dropped
                     // the GIL before the end (a finalizer), else the hold still open, written later.
                     const Lane& l = lane(x.tid);  // its gc slice names the lane too
                     if (const WrittenHold* h = l.hold_at(x.ts + x.held_from)) {
                       thread_gc(x, *h);
                     } else {
                       pending_gc_.push_back(x);
                     }
                   },
                   [&](const raw::GcUntimed& x) {
                     gc_.untimed(x);
                     seen_until(x.ts + x.window);
                   },
                   [&](const raw::GcCounts& x) { gc_.counts(x); },
                   [&](const raw::GcSettings& x) { gc_.settings(x); },
                   [&](const raw::ThreadName& x) {
                     // The Python name (threading.Thread.name) names the lane from now on.
                     Lane& l = lane(x.tid);
                     if (!x.name.empty() && l.name != x.label() + l.suffix)
                       name_lane(x.tid, l, x.label() + l.suffix);
                   },
                   // Kept by stacks_ (above) for the intervals they belong to.
                   [](const raw::FrameDef&) {}, [](const raw::StackDef&) {}, [](const raw::StackSample&) {},
                   [](const raw::StackStats&) {}, [&](const raw::CounterSetup& x) { tracks_.setup(x); },
                   [&](const raw::CounterSample& x) { tracks_.sample(x); },
                   [](const raw::ThreadSwitches&) {},  // totals only: in the summary
               },
               r);
  }

  // After the input's last event: names for lanes no T record named; the input's entry for otherData.
  json finish(const raw::ReadResult& result) {
    if (waiters_now_ != 0) waiters_slice(std::max(last_seen_ns_, waiters_since_));
    // Collections whose hold never came (the target exited holding the GIL, a file cut short): on their
    // thread's lane as they are, after everything else there.
    for (const raw::GcCollection& x : pending_gc_) {
      Lane& l = lane(x.tid);
      const int64_t from = x.ts + x.held_from;
      if (from < l.last_end) continue;  // would overlap what the lane shows (a damaged file)
      gc_.thread_collection(x, from, from, from + x.held_dur);
      l.last_end = from + x.held_dur;
    }
    pending_gc_.clear();
    tracks_.finish();
    write_lane_names();
    report_.records = result.records;
    report_.complete = result.complete;
    report_.corrupt = result.corrupt;
    report_.problem = result.problem;
    report_.bytes = result.bytes;
    report_.damage_offset = result.damage_offset;
    report_.unread_lines = result.unread_lines;
    json summary;
    if (result.summary) {
      summary = *result.summary;
    } else {
      raw::LoopFigures loop;
      loop.stop_reason = result.corrupt
                             ? "unknown (file corrupt; summary rebuilt by convert from what was salvaged)"
                             : "unknown (recording cut short; summary rebuilt by convert)";
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
              {"corrupt", report_.corrupt},
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
    seen_until(end);
    // With stack samples: the slice names its innermost function and carries the stack in its args, and the
    // frames follow as nested slices inside it.
    IntervalStacks stacks = stacks_.take();
    out_.slice(hold ? "hold_gil" : "take_gil", pid_, tid, offset_ns_ + start, offset_ns_ + end,
               stacks.args_json);
    size_t kept = 0;
    // Each frame ends inside its parent (the frame a level up that it starts in, or the GIL slice) as the
    // viewers add ts + dur in doubles, not only in ns: a parent's dur may have been shortened to fit, and one
    // ns of margin per level is not always an ulp of margin (nested_end_ns).
    frame_levels_.clear();
    for (FrameSlice& f : stacks.frames) {
      const auto depth = static_cast<size_t>(f.depth);
      const auto [parent_start, parent_end] =
          depth == 0 || frame_levels_.size() < depth ? std::pair{start, end} : frame_levels_[depth - 1];
      const int64_t from = std::max(f.start_ns, start);
      int64_t to = std::min({f.end_ns, end - f.depth - 2, parent_end});
      if (to <= from) continue;
      to = nested_end_ns(offset_ns_ + parent_start, offset_ns_ + from, offset_ns_ + to) - offset_ns_;
      if (to <= from) continue;
      frame_levels_.resize(depth + 1);
      frame_levels_[depth] = {from, to};
      out_.frame_slice(f.name_json, pid_, tid, offset_ns_ + from, offset_ns_ + to, f.args_json);
      f.start_ns = from;
      f.end_ns = to;
      stacks.frames[kept++] = std::move(f);
    }
    if (hold) {
      // Kept until the lane's next hold: the collections that ran in this one are placed among its frames.
      stacks.frames.resize(kept);
      WrittenHold& h = l.holds[l.holds_written++ % l.holds.size()];
      h.start = start;
      h.end = end;
      h.frames = std::move(stacks.frames);
      std::erase_if(pending_gc_, [&](const raw::GcCollection& x) {
        if (x.tid != tid || x.ts + x.held_from < start || x.ts + x.held_from >= end) return false;
        thread_gc(x, h);
        return true;
      });
      out_.instant("drop_gil", pid_, tid, offset_ns_ + end);
    }
  }

  // The gil_waiters counter again as slices ("gil_waiters 2" while two threads wait) on a lane of their own:
  // DevTools' Performance panel draws no track for "C" events (its trace engine reads only Chrome's own
  // counters), so without these the waiters are invisible there. Perfetto and MindStudio show both.
  void waiters_change(int64_t ts, uint64_t n) {
    seen_until(ts);
    if (n == waiters_now_) return;
    if (waiters_now_ != 0) waiters_slice(ts);
    waiters_now_ = n;
    waiters_since_ = ts;
  }
  void waiters_slice(int64_t end) {
    if (end <= waiters_since_) return;  // a value that lasted no time draws nothing
    if (!waiters_lane_named_) {
      out_.metadata("thread_name", pid_, kWaitersTid, offset_ns_, "name", json_string("GIL waiters"));
      out_.metadata("thread_sort_index", pid_, kWaitersTid, offset_ns_, "sort_index", "-1");
      waiters_lane_named_ = true;
    }
    out_.slice(fmt::format("gil_waiters {}", waiters_now_), pid_, kWaitersTid, offset_ns_ + waiters_since_,
               offset_ns_ + end, fmt::format(R"({{"waiters":{}}})", waiters_now_));
  }
  void seen_until(int64_t ts) { last_seen_ns_ = std::max(last_seen_ns_, ts); }
  bool stop_lane_named_ = false;

  struct WrittenHold {
    int64_t start = std::numeric_limits<int64_t>::min(), end = std::numeric_limits<int64_t>::min();
    std::vector<FrameSlice> frames;
  };
  struct Lane {
    std::string name;
    std::string suffix;  // " [tid N in its PID namespace]" for a container's thread
    bool named = false;
    int64_t sort_index = 0;
    int64_t last_end = std::numeric_limits<int64_t>::min();
    // The lane's last holds as written, with their frame slices (clipped to them), for collections that ran
    // in them: a collection's record comes when it ends, after its hold's when the collector let the GIL go
    // (a finalizer) and maybe after the next hold or two.
    std::array<WrittenHold, 4> holds{};
    size_t holds_written = 0;
    const WrittenHold* hold_at(int64_t ts) const {
      for (const WrittenHold& h : holds) {
        if (h.start <= ts && ts < h.end) return &h;
      }
      return nullptr;
    }
  };

  // A collection on its thread's lane, in the hold it ran in: under the innermost slice
  // it began in (the hold, or a frame of it), and ending before that slice ends and before the next frame
  // under it begins, so that no slice starts inside another and ends after it (DevTools would drop it).
  // The GC lane has the whole collection.
  void thread_gc(const raw::GcCollection& x, const WrittenHold& h) {
    const int64_t from = x.ts + x.held_from;  // the part of it inside this hold
    int64_t parent_start = h.start, parent_end = h.end;
    int depth = -1;
    for (const FrameSlice& f : h.frames) {
      if (f.depth > depth && f.start_ns <= from && from < f.end_ns) {
        parent_start = f.start_ns;
        parent_end = f.end_ns;
        depth = f.depth;
      }
    }
    int64_t end = std::min(from + x.held_dur, parent_end);
    for (const FrameSlice& f : h.frames) {
      if (f.depth == depth + 1 && f.start_ns > from) end = std::min(end, f.start_ns);
    }
    gc_.thread_collection(x, parent_start, from, end);
  }

  Lane& lane(int64_t tid) {
    auto [it, inserted] = lanes_.try_emplace(tid);
    if (inserted) it->second.sort_index = tid == report_.meta.pid ? 0 : ++next_sort_index_;
    return it->second;
  }

  // A lane's name is written once, at the end (write_lane_names()): a viewer shows one name per lane, and the
  // Python name (a ThreadName record) comes after the thread's start.
  void name_lane(int64_t /*tid*/, Lane& l, const std::string& name) {
    l.name = name;
    l.named = true;
  }

  void write_lane_names() {
    for (auto& [tid, l] : lanes_) {
      if (!l.named) name_lane(tid, l, fmt::format("thread {}", tid));
      out_.metadata("thread_name", pid_, tid, offset_ns_, "name", json_string(l.name));
      out_.metadata("thread_sort_index", pid_, tid, offset_ns_, "sort_index", std::to_string(l.sort_index));
    }
  }

  EventWriter& out_;
  EventWriterOut gc_out_;
  GcLanes gc_;
  std::vector<raw::GcCollection> pending_gc_;  // waiting for the hold they ran in (written when it ends)
  // interval(): the last frame slice written per depth, [start, end] in ns.
  std::vector<std::pair<int64_t, int64_t>> frame_levels_;
  ConvertInputReport& report_;
  int64_t base_ns_;
  int64_t offset_ns_ = 0;
  int64_t pid_ = 0;
  std::unordered_map<int64_t, Lane> lanes_;
  int64_t next_sort_index_ = 0;
  int64_t last_counter_ns_ = std::numeric_limits<int64_t>::min();
  uint64_t waiters_now_ = 0;   // the counter's last value
  int64_t waiters_since_ = 0;  // ...and since when
  bool waiters_lane_named_ = false;
  int64_t last_seen_ns_ = std::numeric_limits<int64_t>::min();  // the latest time the input reached
  std::optional<raw::Stats> last_stats_;
  raw::SummaryBuilder summary_;
  StackSlices stacks_;
  CounterTracks tracks_{[this](const std::string& name, int64_t tid, int64_t ts, const std::string& args) {
    out_.counter_args(name, pid_, tid, offset_ns_ + ts, args);
  }};
};

}  // namespace

json write_input_events(EventOutput& out, size_t& events, ConvertInputReport& report, int64_t base_ns,
                        const InputEventsOptions& options) {
  EventWriter writer(out, events, options.placement, options.ts_as_string);
  std::ifstream in = open_input(report.path);
  InputConverter conv(writer, report, base_ns);
  const raw::ReadResult result = raw::read(
      in, report.path, [&](const raw::Meta& m) { conv.on_meta(m); },
      [&](const raw::Record& rec) { conv.on_record(rec); }, {.salvage = options.salvage});
  json entry = conv.finish(result);
  report.events = writer.count() - events;
  events = writer.count();
  entry["trace_events"] = report.events;
  return entry;
}

raw::Meta read_input_meta(const std::string& path) {
  return read_meta(path);
}

int64_t reader_safe_dur_ns(int64_t start_ns, int64_t end_ns) {
  int64_t dur = end_ns - start_ns;
  if (dur <= 0) return dur;
  const double start = reader_us(start_ns);
  const double end = reader_us(end_ns);
  // One step (1 ns = 0.001 us) is far above the rounding error of a sum of doubles below ~1e12 us, so this
  // runs once or twice; it ends at dur 0 at the latest, where start <= end holds. Times on the epoch itself
  // (absolute µs, ~1.7e15: a trace without baseTimeNanoseconds) have doubles 0.25 µs apart: steps of half
  // that.
  if (start + reader_us(dur) <= end) return dur;  // nearly always
  const int64_t step =
      std::max<int64_t>(1, static_cast<int64_t>((std::nextafter(end, HUGE_VAL) - end) * 500));
  while (dur > 0 && start + reader_us(dur) > end) dur = std::max<int64_t>(0, dur - step);
  return dur;
}

std::string format_us(int64_t ns) {
  fmt::memory_buffer b;
  append_us(b, ns);
  return fmt::to_string(b);
}

// std::from_chars rounds as JSON.parse does. Below 2^53 ns, ns and 1000 are exact doubles and IEEE division
// rounds their quotient, the same real number as the text, the same way: no text needed
// (tests/unit/test_convert_jobs.cpp checks the two agree).
double reader_us(int64_t ns) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (ns > -kExact && ns < kExact) return static_cast<double>(ns) / 1000.0;
  fmt::memory_buffer text;
  append_us(text, ns);
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
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

ConvertReport convert_to_chrome_trace(const std::vector<std::string>& inputs, const std::string& output,
                                      const ConvertOptions& options) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no input to convert");
  ConvertReport report;
  report.output = output;

  // Pass 1: every input's metadata (a file that is not a recording fails here, before any output exists).
  for (const auto& path : inputs) {
    ConvertInputReport r;
    r.path = path;
    r.meta = read_meta(path);
    report.inputs.push_back(std::move(r));
  }
  // Ranks in order (GIL_*_rank_*.json in any order): the processes appear so, and sort so
  // (process_sort_index).
  std::stable_sort(
      report.inputs.begin(), report.inputs.end(),
      [](const ConvertInputReport& a, const ConvertInputReport& b) { return a.meta.rank < b.meta.rank; });
  std::set<int64_t> pids_used;
  for (auto& r : report.inputs) {
    r.namespace_ids = options.pid_namespace == PidNamespace::kTarget && r.meta.ns_pid != 0;
    r.trace_pid = r.namespace_ids ? r.meta.ns_pid : r.meta.pid;
    while (!pids_used.insert(r.trace_pid).second) r.trace_pid += kPidOffset;
  }
  report.base_time_ns = report.inputs.front().meta.realtime_ns;
  for (const auto& r : report.inputs) report.base_time_ns = std::min(report.base_time_ns, r.meta.realtime_ns);

  // Pass 2: stream the events.
  TraceFile file(output, options.mode);
  file.buf().append(std::string_view("{\"traceEvents\":[\n"));
  size_t events = 0;
  json other_inputs = json::array();
  for (auto& r : report.inputs) {
    std::unique_ptr<LanePlacement> lanes = r.namespace_ids ? namespace_placement() : nullptr;
    other_inputs.push_back(write_input_events(file, events, r, report.base_time_ns,
                                              {.salvage = options.salvage, .placement = lanes.get()}));
  }
  report.events_written = events;

  const json other = {
      {"gilspy_version", kGilspyVersion},
      {"time_base",
       "ts and dur are microseconds; ts counts from baseTimeNanoseconds (CLOCK_REALTIME, ns since the "
       "Unix epoch), the earliest start among the inputs"},
      {"inputs", std::move(other_inputs)}};
  fmt::format_to(std::back_inserter(file.buf()),
                 "\n],\n\"displayTimeUnit\":\"ms\",\n\"baseTimeNanoseconds\":{},\n\"otherData\":{}}}\n",
                 report.base_time_ns, other.dump(-1, ' ', false, json::error_handler_t::replace));
  file.commit();
  return report;
}

}  // namespace gilspy::convert
