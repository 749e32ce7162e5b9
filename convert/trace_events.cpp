#include "convert/trace_events.hpp"

namespace gilspy::convert {

void EventWriter::open(std::string_view ph, std::string_view cat, std::string_view name, int64_t pid,
                       int64_t tid, int64_t ts_ns) {
  if (count_ != 0) out_.raw(",\n");
  ++count_;
  out_.begin_object().field("ph", ph);
  if (ph == "I") out_.field("s", "t");
  if (!cat.empty()) out_.field("cat", cat);
  out_.field("name", name);
  if (pid_text_.empty()) {
    out_.field("pid", pid);
  } else {
    out_.field("pid", pid_text_);
  }
  out_.field("tid", tid).key("ts");
  if (ts_as_string_) {
    out_.us_string(ts_ns);
  } else {
    out_.us(ts_ns);
  }
}

void EventWriter::thread_name(int64_t pid, int64_t tid, int64_t ts_ns, const std::string& name) {
  open("M", {}, "thread_name", pid, lane(tid), ts_ns);
  const std::string& placed = placement_ != nullptr ? placement_->lane_name(tid, name) : name;
  close([&](JsonWriter& w) { w.field("name", placed); });
}

void EventWriter::thread_sort_index(int64_t pid, int64_t tid, int64_t ts_ns, int64_t index) {
  open("M", {}, "thread_sort_index", pid, lane(tid), ts_ns);
  const int64_t placed = placement_ != nullptr ? placement_->lane_sort_index(tid, index) : index;
  close([&](JsonWriter& w) { w.field("sort_index", placed); });
}

}  // namespace gilspy::convert
