#pragma once
// What the scheduler says about one thread, without any privilege beyond reading /proc:
//  - /proc/PID/task/TID/schedstat: "cpu_ns run_delay_ns slices" — time on a CPU, time runnable but waiting in
//    a run queue, times switched onto a CPU. ~1 us a read here; read at the sampler's hand-offs.
//    Both times are updated when the thread is switched in or out and at each scheduler tick, so for a thread
//    running right now they lag by up to a tick (4 ms at HZ=250); a run-queue wait is added when it ends (the
//    thread gets its CPU).
//  - /proc/PID/task/TID/status: voluntary_ctxt_switches / nonvoluntary_ctxt_switches. ~13 us a read (the
//    kernel formats ~60 lines), so only at a low rate.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "sampler/proc/task_file.hpp"

namespace gilspy::sampler {

struct SchedStat {
  int64_t cpu_ns = 0;
  int64_t run_delay_ns = 0;
  uint64_t slices = 0;
  bool operator==(const SchedStat&) const = default;
};

struct SwitchCounts {
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
  bool operator==(const SwitchCounts&) const = default;
};

std::optional<SchedStat> parse_schedstat(std::string_view text);
std::optional<SwitchCounts> parse_status_switches(std::string_view text);

// /proc/PID/task/TID/schedstat, kept open (task_file.hpp). Never allocates.
class TaskSchedStatFile {
 public:
  void reset(pid_t pid, int32_t tid) { file_.reset(pid, tid); }
  std::optional<SchedStat> read();  // nullopt when unreadable (the thread exited)

 private:
  TaskFile file_{"schedstat"};
};

// /proc/PID/task/TID/status, opened for each read and closed again: read a few times a second at most, it
// should not hold a descriptor per thread. Never allocates.
std::optional<SwitchCounts> read_task_switches(pid_t pid, int32_t tid);

}  // namespace gilspy::sampler
