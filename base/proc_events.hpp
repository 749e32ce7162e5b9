#pragma once
// The kernel's process events (the proc connector, a netlink socket): forks, execs and exits of every process
// on the machine as they happen, so that `--subprocesses` finds a child within one drain of its start
// instead of at the next /proc scan. Needs CAP_NET_ADMIN (root); open() says false without it (or without
// the kernel's CONFIG_PROC_EVENTS) and the /proc scans remain the only way.
#include <sys/types.h>

#include <cstdint>
#include <functional>

namespace gilspy {

struct ProcEvent {
  enum class Kind : uint8_t { kFork, kExec, kExit };
  Kind kind = Kind::kFork;
  pid_t pid = 0;      // the process (thread group) forked, exec'd or ended
  pid_t parent = 0;   // kFork: the process that forked it
  int64_t ts_ns = 0;  // when, CLOCK_MONOTONIC (the kernel's ktime_get_ns)
};

class ProcEvents {
 public:
  ProcEvents() = default;
  ProcEvents(const ProcEvents&) = delete;
  ProcEvents& operator=(const ProcEvents&) = delete;
  ~ProcEvents();

  // Subscribes; false when the kernel or gilspy's privileges do not allow it.
  bool open();
  bool is_open() const { return fd_ >= 0; }
  // Every event queued since the last call (never blocks). Threads' own clones are left out: only new
  // processes. False when the kernel dropped events (its buffer overflowed): a /proc scan must fill the gap.
  bool read(const std::function<void(const ProcEvent&)>& on_event);

 private:
  int fd_ = -1;
};

}  // namespace gilspy
