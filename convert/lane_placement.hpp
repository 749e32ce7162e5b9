#pragma once
// Where one recording's lanes go in the trace being written, when that is not simply "the recording's pid,
// the OS tids": its target's own PID namespace (convert --pid-namespace target), or another program's trace
// that the GIL lanes are merged into (convert --merge-into). convert/trace_events.cpp asks it for every lane
// it writes.
#include <cstdint>
#include <string>

namespace gilspy::convert {

class LanePlacement {
 public:
  virtual ~LanePlacement() = default;
  // A thread of the recording is seen (its T record): OS tid, its id in the target's PID namespace (0: the
  // same). Its name comes with its lane's (lane_name()).
  virtual void thread_seen(int64_t tid, int64_t ns_tid) = 0;
  // The tid written for the recording's lane `tid`: a thread's OS tid, 0 (the process's own lane),
  // kWaitersTid, or any other lane convert writes.
  virtual int64_t lane_tid(int64_t tid) = 0;
  // The thread_name written for that lane, given the one convert chose.
  virtual std::string lane_name(int64_t tid, const std::string& name) = 0;
  // Its thread_sort_index, given convert's.
  virtual int64_t lane_sort_index(int64_t tid, int64_t index) = 0;
  // Whether the process gets convert's process_name / process_labels / process_sort_index (false: the process
  // is another program's, which named it already).
  virtual bool process_metadata() const = 0;
};

}  // namespace gilspy::convert
