#pragma once
// What the probes and the sampler cost the target, measured in the target (issue 35: by its own progress,
// from CPU time per thread): its threads' CPU time and run-queue delay (sampler/process_cpu.hpp), read every
// 50 ms on a thread of its own, from an untraced stretch before gilspy attaches to past the window's end.
// The target's Python work runs in user mode: its user-mode CPU time per second is its progress. The probes'
// traps run in its threads, in the kernel: where CPUs are short they take the place of user-mode time, where
// they are not they add kernel time; the sampler runs in gilspy and can only take CPUs from it.
#include <sys/types.h>

#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli/check_report.hpp"
#include "sampler/proc/process_cpu.hpp"

namespace gilspy::cli {

class CheckCpuWatch {
 public:
  // Starts reading `pids` and returns after `untraced_s` seconds of reads with nothing attached.
  CheckCpuWatch(std::vector<pid_t> pids, double untraced_s);
  ~CheckCpuWatch();
  CheckCpuWatch(const CheckCpuWatch&) = delete;
  CheckCpuWatch& operator=(const CheckCpuWatch&) = delete;

  // `pid`'s figures for the window [from, to] (CLOCK_MONOTONIC ns); nullopt when not measured (the process
  // ended, or the reads do not cover both stretches).
  std::optional<CheckCpu> figures(pid_t pid, int64_t from_ns, int64_t to_ns);

 private:
  void read_all();

  std::vector<pid_t> pids_;
  double tick_s_;
  int64_t untraced_from_ = 0, untraced_to_ = 0;
  std::mutex mu_;
  std::map<pid_t, sampler::CpuTotals> totals_;  // guarded by mu_
  std::jthread reader_;
};

}  // namespace gilspy::cli
