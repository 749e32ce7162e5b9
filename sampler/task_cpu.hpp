#pragma once
// Which CPU a thread last ran on: field 39 ("processor") of /proc/PID/task/TID/stat. The poll thread keeps
// off the GIL holder's CPU with it (poller_placement.hpp).
#include <sys/types.h>

#include <cstdint>
#include <string_view>

namespace gilspy::sampler {

// The processor field of one stat line; -1 when the line is not a stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted from its last ')'.
int parse_stat_processor(std::string_view stat);

// An open /proc/PID/task/TID/stat, opened on first use. Never allocates.
class TaskStatFile {
 public:
  TaskStatFile() = default;
  ~TaskStatFile() { close(); }
  TaskStatFile(const TaskStatFile&) = delete;
  TaskStatFile& operator=(const TaskStatFile&) = delete;

  void reset(pid_t pid, int32_t tid);  // forgets the old thread; the file is opened by the next cpu()
  void close();
  int cpu();  // -1 when unreadable (the thread exited)

 private:
  pid_t pid_ = 0;
  int32_t tid_ = 0;
  int fd_ = -1;
};

}  // namespace gilspy::sampler
