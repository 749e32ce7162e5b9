#pragma once
// All of a process's threads' time on a CPU, from /proc/PID/task/*/schedstat (ns, precise; sched_stats.hpp),
// and its split into user mode and the kernel, from .../stat (clock ticks, task_cpu.hpp), added up over time
// so that threads that end or start between two reads neither take their time with them nor bring their past
// in. `gilspy check` reads it around its window to measure what the probes and the sampler cost the target.
// Allocates: never in the poll loop.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sampler/proc/sched_stats.hpp"
#include "sampler/proc/task_cpu.hpp"

namespace gilspy::sampler {

struct TaskCpu {
  int32_t tid = 0;
  SchedStat stat;
  StatTimes times;
};

// Every thread's schedstat and stat times now; nullopt when the process is gone or its task folder cannot be
// read.
std::optional<std::vector<TaskCpu>> read_process_cpu(pid_t pid);

// The process's CPU time and run-queue delay since the first read, as running totals.
class CpuTotals {
 public:
  struct Point {
    int64_t mono_ns = 0;
    int64_t cpu_ns = 0;                         // since the first point
    uint64_t user_ticks = 0, system_ticks = 0;  // the same, split by where its ticks fell
  };
  // A read at `mono_ns` (increasing): each thread's growth since its last read; a thread first seen adds its
  // growth from the previous read's time on (taken as all of its time when it started in between).
  void add(int64_t mono_ns, const std::vector<TaskCpu>& tasks);
  const std::vector<Point>& points() const { return points_; }
  int most_threads() const { return most_threads_; }
  // Mean CPUs used over [from, to], in all and in user mode and in the kernel, interpolated between the
  // points; nullopt when the points do not cover it. `tick_s`: the length of a clock tick.
  struct Rates {
    double cpus = 0, user_cpus = 0, system_cpus = 0;
  };
  std::optional<Rates> rates(int64_t from_ns, int64_t to_ns, double tick_s) const;

 private:
  std::unordered_map<int32_t, TaskCpu> last_;
  std::vector<Point> points_;
  int most_threads_ = 0;
};

}  // namespace gilspy::sampler
