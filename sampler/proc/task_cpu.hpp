#pragma once
// Which CPU a thread last ran on: field 39 ("processor") of /proc/PID/task/TID/stat. The poll thread keeps
// off the GIL holder's CPU with it (poller_placement.hpp).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "sampler/proc/task_file.hpp"

namespace gilspy::sampler {

// The processor field of one stat line; -1 when the line is not a stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted from its last ')'.
int parse_stat_processor(std::string_view stat);
// Fields 14 and 15 of one stat line: time in user mode and in the kernel, in clock ticks (sysconf
// _SC_CLK_TCK, 100 a second). The kernel splits the thread's precise CPU time in the proportion its ticks
// fell, so the split is a sample; nullopt when not a stat line.
struct StatTimes {
  uint64_t user_ticks = 0, system_ticks = 0;
};
std::optional<StatTimes> parse_stat_times(std::string_view stat);
// The state letter of one stat line (field 3: R, S, D, T stopped, t traced, Z ...); 0 when not a stat line.
char parse_stat_state(std::string_view stat);

// /proc/PID/task/TID/stat (task_file.hpp: opened on first read). Never allocates.
class TaskStatFile {
 public:
  void reset(pid_t pid, int32_t tid) { file_.reset(pid, tid); }
  // Opens the file now. An open file stays the thread's it was opened on: once that thread has ended, it
  // reads nothing, even when its id has gone to a new thread or process since.
  bool open() { return file_.opened(); }
  int cpu();                         // -1 when unreadable (the thread exited)
  std::optional<StatTimes> times();  // nullopt when unreadable
  // 0 when unreadable; `*ended` (when given) true when the file was open and its thread has ended since.
  char state(bool* ended = nullptr);

 private:
  TaskFile file_{"stat"};
};

}  // namespace gilspy::sampler
