#pragma once
// What one probe hit costs the thread that hits it, measured on this machine at start: a function of
// gilspy's own is called in a loop without probes, with a uprobe on its entry, and with a uretprobe beside
// it, and the differences divided by the calls. The kernel, the CPU and the hypervisor all change it (1-8 µs
// seen).
#include <cstdint>

#include <string>

namespace gilspy::sampler::exact {

struct ProbeCost {
  double take_ns = 0;  // a call with an entry probe and a return probe (take_gil's pair)
  double drop_ns = 0;  // a call with an entry probe (drop_gil's)
  bool measured = false;
  double per_take_and_drop_ns() const { return take_ns + drop_ns; }
};

// About 0.2 s (most of it the kernel removing the probes). Not measured (measured == false) when gilspy's own
// symbols are not there (a stripped gilspy) or the probes cannot be created.
ProbeCost measure_probe_cost(const std::string& tracefs);

}  // namespace gilspy::sampler::exact
