#include "convert/input_events.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.hpp"
#include "convert/counter_tracks.hpp"
#include "convert/gc_trace.hpp"
#include "convert/stack_slices.hpp"
#include "convert/trace_events.hpp"
#include "raw/summary.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

// Thrown from on_meta in the first pass, to stop reading once the metadata is known.
struct MetaOnly {
  raw::Meta meta;
};

std::ifstream open_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot open " + path + ": " + std::strerror(errno));
  return in;
}

json stats_json(const raw::Stats& s) {
  return {{"ts_ns", s.ts},
          {"polls", s.polls},
          {"late_polls", s.late},
          {"missed_polls", s.missed},
          {"handoffs_seen", s.handoffs_seen},
          {"handoffs_total", s.handoffs_total}};
}

// "python 3.12.1 pid 1234 rank 0", with the other pid of a container's process beside it, so that either view
// finds it.
std::string process_name(const raw::Meta& m, bool namespace_ids) {
  std::string name =
      fmt::format("python {} pid {} rank {}", m.python_version, namespace_ids ? m.ns_pid : m.pid, m.rank);
  if (namespace_ids) {
    name += fmt::format(" (pid {} on the host)", m.pid);
  } else if (m.ns_pid != 0) {
    name += fmt::format(" (pid {} in its PID namespace)", m.ns_pid);
  }
  return name;
}

// The second pass over one input: its events into the trace.
class InputConverter {
 public:
  InputConverter(EventWriter& out, ConvertInputReport& report, int64_t base_ns, bool frame_slices)
      : out_(out), report_(report), base_ns_(base_ns), frame_slices_(frame_slices) {}

  void on_meta(const raw::Meta& m) {
    report_.meta = m;
    offset_ns_ = m.realtime_ns - base_ns_;
    pid_ = report_.trace_pid;
    gc_.begin(out_, pid_, offset_ns_);
    if (!out_.names_process()) return;  // another program's process (a merge): named already
    std::string labels = fmt::format("rank {}", m.rank);
    if (!m.hostname.empty()) labels += ", host " + m.hostname;
    out_.process_metadata("process_name", pid_, offset_ns_, "name", process_name(m, report_.namespace_ids));
    out_.process_metadata("process_labels", pid_, offset_ns_, "labels", labels);
    out_.process_metadata("process_sort_index", pid_, offset_ns_, "sort_index", m.rank);
  }

  void on_record(const raw::Record& r) {
    summary_.add(r);
    stacks_.add(r);  // keeps the stack records for the intervals they belong to
    for (ReleasedStretch& s : stacks_.take_released()) without_gil(s);  // each ends where r's interval begins
    std::visit(raw::overloaded{
                   [&](const raw::ThreadStart& x) { thread_start(x); },
                   [&](const raw::ThreadName& x) { thread_name(x); },
                   [&](const raw::Hold& x) { interval(true, x.tid, x.ts, x.dur); },
                   [&](const raw::Wait& x) { interval(false, x.tid, x.ts, x.dur); },
                   [&](const raw::Waiters& x) { waiters(x); },
                   [&](const raw::Stats& x) {
                     last_stats_ = x;
                     seen_until(x.ts);
                   },
                   [&](const raw::ProcessStopped& x) { process_stopped(x); },
                   [&](const raw::ThreadEnd& x) { seen_until(x.ts); },
                   [&](const raw::GcCollection& x) { gc_collection(x); },
                   [&](const raw::GcUntimed& x) {
                     gc_.untimed(x);
                     seen_until(x.ts + x.window);
                   },
                   [&](const raw::GcCounts& x) { gc_.counts(x); },
                   [&](const raw::GcSettings& x) { gc_.settings(x); },
                   [&](const raw::CounterSetup& x) { tracks_.setup(x); },
                   [&](const raw::CounterSample& x) { tracks_.sample(x); },
                   [](const raw::ThreadState&) {},  // not in raw files; a live view's
                   [](const raw::FrameDef&) {},
                   [](const raw::StackDef&) {},
                   [](const raw::StackSample&) {},
                   [](const raw::StackStats&) {},
                   [](const raw::ThreadSwitches&) {},  // totals only: in the summary
               },
               r);
  }

  // After the input's last event: what was still open, names for the lanes; the input's entry for otherData.
  json finish(const raw::ReadResult& result) {
    stacks_.finish(summary_.end_ns());
    for (ReleasedStretch& s : stacks_.take_released()) without_gil(s);
    if (waiters_now_ != 0) waiters_slice(std::max(last_seen_ns_, waiters_since_));
    write_pending_gc();
    tracks_.finish();
    write_lane_names();
    report_.records = result.records;
    report_.complete = result.complete;
    report_.corrupt = result.corrupt;
    report_.problem = result.problem;
    report_.bytes = result.bytes;
    report_.damage_offset = result.damage_offset;
    report_.unread_lines = result.unread_lines;
    return input_entry(result);
  }

 private:
  // A hold as written, with its frame slices (clipped to it), for the collections that ran in it.
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
    // The lane's last holds as written: a collection's record comes when it ends, after its hold's when the
    // collector let the GIL go (a finalizer) and maybe after the next hold or two.
    std::array<WrittenHold, 4> holds{};
    size_t holds_written = 0;
    const WrittenHold* hold_at(int64_t ts) const {
      for (const WrittenHold& h : holds) {
        if (h.start <= ts && ts < h.end) return &h;
      }
      return nullptr;
    }
  };

  void thread_start(const raw::ThreadStart& x) {
    out_.thread_seen(x.tid, x.ns_tid);
    Lane& l = lane(x.tid);
    std::string name = x.name.empty() ? fmt::format("thread {}", x.tid) : x.name;
    // A container's own id of the thread, as its profiler's trace names it.
    l.suffix = x.ns_tid != 0 ? fmt::format(" [tid {} in its PID namespace]", x.ns_tid) : "";
    name += l.suffix;
    if (!l.named || l.name != name) name_lane(l, name);
  }

  void thread_name(const raw::ThreadName& x) {
    // The Python name (threading.Thread.name) names the lane from now on.
    Lane& l = lane(x.tid);
    if (!x.name.empty() && l.name != x.label() + l.suffix) name_lane(l, x.label() + l.suffix);
  }

  void waiters(const raw::Waiters& x) {
    int64_t ts = x.ts;
    if (ts < last_counter_ns_) {
      ts = last_counter_ns_;
      ++report_.adjusted;
    }
    last_counter_ns_ = ts;
    out_.process_counter("gil_waiters", pid_, offset_ns_ + ts,
                         [&](JsonWriter& w) { w.field("waiters", x.n); });
    waiters_change(ts, x.n);
  }

  void process_stopped(const raw::ProcessStopped& x) {
    // On the process's own lane (tid 0, where the counter is), named once.
    if (!stop_lane_named_) {
      out_.thread_name(pid_, 0, offset_ns_, "process");
      stop_lane_named_ = true;
    }
    out_.slice("gil", "process_stopped", pid_, 0, offset_ns_ + x.ts, offset_ns_ + x.ts + x.dur);
    seen_until(x.ts + x.dur);
  }

  void gc_collection(const raw::GcCollection& x) {
    gc_.collection(x);
    seen_until(x.ts + x.dur);
    if (x.tid == 0 || x.hold_lead < 0 || x.held_dur <= 0) return;
    // On the thread's lane inside its hold: the one written last when the collector dropped the GIL before
    // the end (a finalizer), else the hold still open, written later.
    const Lane& l = lane(x.tid);  // its gc slice names the lane too
    if (const WrittenHold* h = l.hold_at(x.ts + x.held_from)) {
      thread_gc(x, *h);
    } else {
      pending_gc_.push_back(x);
    }
  }

  // A hold_gil or take_gil slice. With stack samples, it names its innermost function and carries the stack
  // in its args, and the frames follow as nested slices inside it.
  void interval(bool hold, int64_t tid, int64_t ts, int64_t dur) {
    Lane& l = lane(tid);
    const int64_t start = std::max(ts, l.last_end);  // a lane must not overlap itself
    if (start != ts) ++report_.adjusted;             // (never happens with a well-formed file)
    const int64_t end = std::max(ts + dur, start);
    l.last_end = end;
    seen_until(end);
    IntervalStacks stacks = stacks_.take();
    if (!frame_slices_) stacks.frames.clear();  // the stack stays in the slice's args
    const std::string_view name = hold ? "hold_gil" : "take_gil";
    if (stacks.args) {
      out_.slice("gil", name, pid_, tid, offset_ns_ + start, offset_ns_ + end,
                 [&](JsonWriter& w) { stacks.args->write(w); });
    } else {
      out_.slice("gil", name, pid_, tid, offset_ns_ + start, offset_ns_ + end);
    }
    write_frames(tid, start, end, stacks.frames);
    if (hold) {
      end_hold(l, tid, start, end, std::move(stacks.frames));
      out_.instant("drop_gil", pid_, tid, offset_ns_ + end);
    }
  }

  // --all-threads: a stretch in which the thread neither held nor waited, as a without_gil slice that names
  // the function it was in and carries its stack, the frames nested in it as in a hold.
  void without_gil(ReleasedStretch& r) {
    Lane& l = lane(r.tid);
    const int64_t start = std::max(r.start_ns, l.last_end);
    if (r.end_ns <= start || !r.stacks.args) return;
    l.last_end = r.end_ns;
    seen_until(r.end_ns);
    if (!frame_slices_) r.stacks.frames.clear();
    out_.slice("gil", "without_gil", pid_, r.tid, offset_ns_ + start, offset_ns_ + r.end_ns,
               [&](JsonWriter& w) { r.stacks.args->write(w); });
    write_frames(r.tid, start, r.end_ns, r.stacks.frames);
  }

  // The frame slices of the interval [start, end) on lane `tid`; `frames` keeps those written, as written.
  // Each frame ends inside its parent (the frame a level up that it starts in, or the GIL slice) as the
  // viewers add ts + dur in doubles, not only in ns: a parent's dur may have been shortened to fit, and one
  // ns of margin per level is not always an ulp of margin (nested_end_ns).
  void write_frames(int64_t tid, int64_t start, int64_t end, std::vector<FrameSlice>& frames) {
    size_t kept = 0;
    frame_levels_.clear();
    for (FrameSlice& f : frames) {
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
      out_.slice("stack", f.frame.qualname, pid_, tid, offset_ns_ + from, offset_ns_ + to,
                 [&](JsonWriter& w) { f.write_args(w); });
      f.start_ns = from;
      f.end_ns = to;
      if (&frames[kept] != &f) frames[kept] = std::move(f);
      ++kept;
    }
    frames.resize(kept);
  }

  // A hold is kept until the lane's next holds: the collections that ran in it go among its frames, those
  // whose record came before it now.
  void end_hold(Lane& l, int64_t tid, int64_t start, int64_t end, std::vector<FrameSlice> frames) {
    WrittenHold& h = l.holds[l.holds_written++ % l.holds.size()];
    h.start = start;
    h.end = end;
    h.frames = std::move(frames);
    std::erase_if(pending_gc_, [&](const raw::GcCollection& x) {
      if (x.tid != tid || x.ts + x.held_from < start || x.ts + x.held_from >= end) return false;
      thread_gc(x, h);
      return true;
    });
  }

  // A collection on its thread's lane, in the hold it ran in, whole (a slice cut short would contradict the
  // GC lane's): under the deepest slice (the hold, or a frame of it) that holds all of it, the frames sampled
  // during it nested under it. Where a frame at that level starts inside it and ends after it (or before it
  // and ends inside it), no viewer could draw both whole: the collection is left to the GC lane there.
  void thread_gc(const raw::GcCollection& x, const WrittenHold& h) {
    const int64_t from = x.ts + x.held_from;  // the part of it inside this hold
    // With --exact the hold comes from the probes and the collection's part of it from the polls: where they
    // disagree the lane cannot show it whole inside the hold.
    if (from < h.start || from + x.held_dur > h.end) return;
    int64_t parent_start = h.start;
    int depth = -1;
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (const FrameSlice& f : h.frames) {
        if (f.depth == depth + 1 && f.start_ns <= from && from + x.held_dur <= f.end_ns) {
          parent_start = f.start_ns;
          depth = f.depth;
          deeper = true;
          break;
        }
      }
    }
    // Its end as a viewer will read it, a few ns short of the parent's if need be (nested_end_ns).
    const int64_t end =
        nested_end_ns(offset_ns_ + parent_start, offset_ns_ + from, offset_ns_ + from + x.held_dur) -
        offset_ns_;
    for (const FrameSlice& f : h.frames) {
      if (f.depth != depth + 1 || f.end_ns <= from || f.start_ns >= end) continue;  // not beside it
      if (f.start_ns < from || f.end_ns > end) return;                              // across one of its ends
    }
    gc_.thread_collection(x, from, end, x.held_from != 0 || x.held_dur != x.dur);
  }

  // Collections whose hold never came (the target exited holding the GIL, a file cut short): on their
  // thread's lane as they are, after everything else there.
  void write_pending_gc() {
    for (const raw::GcCollection& x : pending_gc_) {
      Lane& l = lane(x.tid);
      const int64_t from = x.ts + x.held_from;
      if (from < l.last_end) continue;  // would overlap what the lane shows (a damaged file)
      gc_.thread_collection(x, from, from + x.held_dur, x.held_from != 0 || x.held_dur != x.dur);
      l.last_end = from + x.held_dur;
    }
    pending_gc_.clear();
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
      out_.thread_name(pid_, kWaitersTid, offset_ns_, "GIL waiters");
      out_.thread_sort_index(pid_, kWaitersTid, offset_ns_, -1);
      waiters_lane_named_ = true;
    }
    out_.slice("gil", fmt::format("gil_waiters {}", waiters_now_), pid_, kWaitersTid,
               offset_ns_ + waiters_since_, offset_ns_ + end,
               [&](JsonWriter& w) { w.field("waiters", waiters_now_); });
  }
  void seen_until(int64_t ts) { last_seen_ns_ = std::max(last_seen_ns_, ts); }

  Lane& lane(int64_t tid) {
    auto [it, inserted] = lanes_.try_emplace(tid);
    if (inserted) it->second.sort_index = tid == report_.meta.pid ? 0 : ++next_sort_index_;
    return it->second;
  }

  // A lane's name is written once, at the end (write_lane_names()): a viewer shows one name per lane, and the
  // Python name (a ThreadName record) comes after the thread's start.
  static void name_lane(Lane& l, const std::string& name) {
    l.name = name;
    l.named = true;
  }

  void write_lane_names() {
    for (auto& [tid, l] : lanes_) {
      if (!l.named) name_lane(l, fmt::format("thread {}", tid));
      out_.thread_name(pid_, tid, offset_ns_, l.name);
      out_.thread_sort_index(pid_, tid, offset_ns_, l.sort_index);
    }
  }

  // The input's entry for otherData: where it came from, how it went, its summary (rebuilt from its events
  // when the file has none).
  json input_entry(const raw::ReadResult& result) {
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
    return {{"path", report_.path},
            {"pid", m.pid},
            {"trace_pid",
             report_.trace_pid_text.empty() ? json(report_.trace_pid) : json(report_.trace_pid_text)},
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
  }

  EventWriter& out_;
  ConvertInputReport& report_;
  int64_t base_ns_;
  int64_t offset_ns_ = 0;
  int64_t pid_ = 0;
  GcLanes gc_;
  std::vector<raw::GcCollection> pending_gc_;  // waiting for the hold they ran in (written when it ends)
  // write_frames(): the last frame slice written per depth, [start, end] in ns.
  std::vector<std::pair<int64_t, int64_t>> frame_levels_;
  std::unordered_map<int64_t, Lane> lanes_;
  int64_t next_sort_index_ = 0;
  bool stop_lane_named_ = false;
  int64_t last_counter_ns_ = std::numeric_limits<int64_t>::min();
  uint64_t waiters_now_ = 0;   // the counter's last value
  int64_t waiters_since_ = 0;  // ...and since when
  bool waiters_lane_named_ = false;
  int64_t last_seen_ns_ = std::numeric_limits<int64_t>::min();  // the latest time the input reached
  std::optional<raw::Stats> last_stats_;
  raw::SummaryBuilder summary_;
  StackSlices stacks_;
  bool frame_slices_ = true;
  CounterTracks tracks_{[this](const CounterPoint& p) {
    out_.thread_counter(p.name(), pid_, p.tid, offset_ns_ + p.ts, [&](JsonWriter& w) { p.write_args(w); });
  }};
};

}  // namespace

json write_input_events(JsonWriter& out, size_t& events, ConvertInputReport& report, int64_t base_ns,
                        const InputEventsOptions& options) {
  EventWriter writer(out, events, options.placement, options.ts_as_string, report.trace_pid_text);
  std::ifstream in = open_input(report.path);
  InputConverter conv(writer, report, base_ns, options.frame_slices);
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

}  // namespace gilspy::convert
