#pragma once
// What a thread is doing, from /proc/PID/task/TID/syscall: sleeping on the GIL's condition variable (waiting
// for the GIL), on its mutex, on the switch condition (the dropping thread waiting for the hand-off), in
// another syscall, or running.
#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "cpython_layouts/layout.hpp"
#include "sampler/proc/task_file.hpp"

namespace gilspy::sampler {

enum class TaskState : uint8_t {
  kUnknown,       // could not read
  kRunning,       // on a CPU or runnable ("running")
  kGilCond,       // futex inside the GIL's cond: waiting for the GIL
  kGilMutex,      // futex inside the GIL's mutex: contending to take or drop it
  kSwitchWait,    // futex inside switch_cond/switch_mutex: a forced drop waiting for the hand-off
  kOtherSyscall,  // blocked elsewhere (sleep, I/O, another lock)
  kGone,          // the thread has exited
};

const char* to_string(TaskState s);
// The x86-64 name of system call `nr` for the calls a blocked thread is usually in (sleeps, I/O, polls,
// locks); nullptr for the others.
const char* syscall_name(long nr);
bool is_waiting_for_gil(TaskState s);

// Classifies one read of the syscall file. The address ranges are matched, not exact words (glibc 2.41 moved
// the futex words inside pthread_cond_t).
TaskState classify_syscall(std::string_view text, uint64_t gil_addr, const layouts::GilLayout& gil);

// /proc/PID/task/TID/syscall (task_file.hpp: opened on first read). Reading it costs about one
// process_vm_readv; it never allocates.
class TaskSyscallFile {
 public:
  void reset(pid_t pid, int32_t tid) { file_.reset(pid, tid); }
  bool open(pid_t pid, int32_t tid) {  // now, not lazily: false when the thread is gone
    file_.reset(pid, tid);
    return file_.opened();
  }
  TaskState read(uint64_t gil_addr, const layouts::GilLayout& gil);
  // The system call the thread was in at the last read(); -1 when it was running or could not be read.
  long last_syscall() const { return last_nr_; }

 private:
  TaskFile file_{"syscall"};
  long last_nr_ = -1;
};

}  // namespace gilspy::sampler
