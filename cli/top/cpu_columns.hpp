#pragma once
// The CPU columns of `gilspy top` (key c, or with --counters in batch output): per thread, what the CPU did
// while it held the GIL, waited for it, or ran without it. See README "What the CPU does meanwhile".
//   CPU%        time on a CPU / time covered          HOLD:CPU%  the same while holding the GIL
//   WAIT:CPU%   ...while waiting for the GIL          RUNQ%      time runnable but without a CPU / time
//   covered HOLD:RUNQ%  ...while holding (a preempted holder) SW/S       switches onto a CPU per second IPC,
//   HOLD:IPC  instructions per cycle (perf)      CMISS/KI, BMISS/KI  cache / branch misses per 1000 instr.
#include <cstddef>
#include <vector>

#include "cli/top/top_format.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

enum class CpuCol {
  kTid,
  kName,
  kCpu,
  kHoldCpu,
  kWaitCpu,
  kRunq,
  kHoldRunq,
  kSwitches,
  kIpc,
  kHoldIpc,
  kCacheMiss,
  kBranchMiss
};

struct CpuLayout {
  std::vector<CpuCol> columns;
  std::size_t name_width = 0;
};

// The columns that fit in `width`, the least important dropped first (BMISS/KI, CMISS/KI, SW/S, HOLD:IPC,
// IPC, RUNQ%, NAME); TID, CPU%, HOLD:CPU%, WAIT:CPU% and HOLD:RUNQ% stay.
CpuLayout layout_cpu_table(std::size_t width);
Line cpu_heading(const CpuLayout& layout);
Line cpu_row(const CpuLayout& layout, const ThreadRow& t, bool totals);

}  // namespace gilspy::top
