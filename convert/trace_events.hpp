#pragma once
// The events of a Chrome trace, one a line in its traceEvents array, each one JSON object written through
// JsonWriter (convert/json_writer.hpp). Everything convert/ puts in a trace goes through this class: the GIL
// lanes, the Python frames under them, the garbage collector's lanes, the counters, the lanes' names. Only
// X, I, C and M events: what Perfetto, DevTools and MindStudio Insight all read.
//
//   {"ph":"X","cat":"gil","name":"hold_gil","pid":1234,"tid":1234,"ts":12.345,"dur":6.789}
//   {"ph":"I","s":"t","cat":"gil","name":"drop_gil","pid":1234,"tid":1234,"ts":19.134}
//   {"ph":"C","cat":"gil","name":"gil_waiters","pid":1234,"tid":0,"ts":13.500,"args":{"waiters":1}}
//   {"ph":"M","name":"thread_name","pid":1234,"tid":1240,"ts":0.000,"args":{"name":"worker"}}
//
// Times are ns on the trace's timeline, written as µs with three decimals; a slice's dur is the
// reader_safe_dur_ns() of its span. An event's args are written by a callable, args(JsonWriter&), that writes
// the members of the args object; without one there is no args.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "convert/json_writer.hpp"
#include "convert/lane_placement.hpp"
#include "convert/trace_time.hpp"

namespace gilspy::convert {

struct NoArgs {};

class EventWriter {
 public:
  // `count`: events already in the array (a separator goes before the next). With a placement, every lane's
  // tid, name and sort index go through it (convert/lane_placement.hpp); with ts_as_string, ts is written as
  // a JSON string; with a pid_text, every event's pid is written as that string (a string pid of another
  // program's trace, "CPU functions": the pid passed stands for it).
  explicit EventWriter(JsonWriter& out, size_t count = 0, LanePlacement* placement = nullptr,
                       bool ts_as_string = false, std::string pid_text = {})
      : out_(out),
        count_(count),
        placement_(placement),
        ts_as_string_(ts_as_string),
        pid_text_(std::move(pid_text)) {}

  size_t count() const { return count_; }

  // A slice [start_ns, end_ns) in category `cat` ("gil", "stack").
  template <class Args = NoArgs>
  void slice(std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t start_ns,
             int64_t end_ns, const Args& args = {}) {
    const int64_t dur = reader_safe_dur_ns(start_ns, end_ns);
    open("X", cat, name, pid, lane(tid), start_ns);
    out_.key("dur").us(dur);
    close(args);
  }
  // "I", not "i": the DevTools trace engine keeps only "I" instants on a thread's track, MindStudio Insight
  // reads only "I"; Perfetto reads both. Thread-scoped ("s":"t").
  template <class Args = NoArgs>
  void instant(std::string_view name, int64_t pid, int64_t tid, int64_t ts_ns, const Args& args = {}) {
    open("I", "gil", name, pid, lane(tid), ts_ns);
    close(args);
  }
  // A counter of the process (tid 0, as it is: no lane of its own), one series per member of args.
  template <class Args>
  void process_counter(std::string_view name, int64_t pid, int64_t ts_ns, const Args& args) {
    open("C", "gil", name, pid, 0, ts_ns);
    close(args);
  }
  // A counter on a thread's behalf (category "cpu"): several members, one track each in Perfetto.
  template <class Args>
  void thread_counter(std::string_view name, int64_t pid, int64_t tid, int64_t ts_ns, const Args& args) {
    open("C", "cpu", name, pid, lane(tid), ts_ns);
    close(args);
  }

  // Metadata: a lane's name and sort index (as the placement has them), a process's name, labels, sort
  // index.
  void thread_name(int64_t pid, int64_t tid, int64_t ts_ns, const std::string& name);
  void thread_sort_index(int64_t pid, int64_t tid, int64_t ts_ns, int64_t index);
  template <class Value>
  void process_metadata(std::string_view name, int64_t pid, int64_t ts_ns, std::string_view key,
                        const Value& value) {
    open("M", {}, name, pid, lane(0), ts_ns);
    close([&](JsonWriter& w) { w.field(key, value); });
  }

  // A thread's T record, for the placement (before its lane is named).
  void thread_seen(int64_t tid, int64_t ns_tid) {
    if (placement_ != nullptr) placement_->thread_seen(tid, ns_tid);
  }
  // Whether the process gets its process_* metadata (false: another program's process, named already).
  bool names_process() const { return placement_ == nullptr || placement_->process_metadata(); }

 private:
  // {"ph":ph[,"s":"t"][,"cat":cat],"name":name,"pid":pid,"tid":tid,"ts":ts
  void open(std::string_view ph, std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
            int64_t ts_ns);
  template <class Args>
  void close(const Args& args) {
    if constexpr (!std::is_same_v<Args, NoArgs>) {
      out_.key("args").begin_object();
      args(out_);
      out_.end_object();
    }
    out_.end_object();
    out_.maybe_drain();
  }
  int64_t lane(int64_t tid) { return placement_ != nullptr ? placement_->lane_tid(tid) : tid; }

  JsonWriter& out_;
  size_t count_ = 0;
  LanePlacement* placement_ = nullptr;
  bool ts_as_string_ = false;
  std::string pid_text_;
};

}  // namespace gilspy::convert
