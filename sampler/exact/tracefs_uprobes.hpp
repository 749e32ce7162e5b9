#pragma once
// Uprobe definitions in tracefs (uprobe_events), each then opened as perf tracepoint events. Chosen over the
// kernel's uprobe PMU (perf_event_open alone) by measurement (kernel 6.18, 2 vCPUs): closing a PMU uprobe
// event takes ~55 ms under a global mutex (each is a trace event of its own, unregistered with an RCU grace
// period), and an inherited one fails the target's clone(), as the kernel copies its path through a pointer
// of ours from the target's memory. Events on a tracefs definition open in ~25 µs, close in ~3 µs but the
// last (~50 ms), and are inherited by the threads the target starts: every thread is traced from its first
// instruction. A definition without events places no breakpoint anywhere; gilspy removes its own when done,
// and those a killed gilspy left behind the next time it starts.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gilspy::sampler::exact {

// Where tracefs is mounted (with uprobe_events); throws Error(kUnavailable) saying how to mount it.
std::string find_tracefs();

class TracefsUprobes {
 public:
  // `group`: unique to this gilspy and target (gilspy_<our pid>_<target pid>). Throws Error(kUnavailable).
  TracefsUprobes(std::string tracefs, std::string group);
  ~TracefsUprobes();  // removes every definition (their events must be closed by then)
  TracefsUprobes(const TracefsUprobes&) = delete;
  TracefsUprobes& operator=(const TracefsUprobes&) = delete;

  // Defines a uprobe (or uretprobe) on `path` (a path the kernel resolves now: /proc/self/fd/N) at file
  // offset `offset`; returns its tracepoint id (perf_event_attr.config). Throws Error(kUnavailable).
  uint64_t define(const std::string& name, const std::string& path, uint64_t offset, bool retprobe);

  // Removes the definitions of gilspy processes that no longer run (killed before they could).
  static void remove_stale(const std::string& tracefs);

 private:
  std::string tracefs_, group_;
  std::vector<std::string> names_;
};

// One sampling event on tracepoint `id` for thread `tid` on CPU `cpu`, every hit a sample of
// {identifier, pid/tid, CLOCK_MONOTONIC time}, inherited by the threads it starts (not by forks). Returns
// the descriptor or -errno.
int open_tracepoint_event(uint64_t id, pid_t tid, int cpu, bool inherit);

// What a failed open means for the user, from its errno.
std::string probe_open_failure(int error);

}  // namespace gilspy::sampler::exact
