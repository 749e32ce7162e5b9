#include "sampler/exact/probe_cost.hpp"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include "base/error.hpp"
#include "elfutils/elf_image.hpp"
#include "sampler/exact/tracefs_uprobes.hpp"

// The function probed while measuring: outside any namespace, not inlined, doing nothing the compiler could
// remove (the asm), so every call enters it.
extern "C" __attribute__((noinline, used)) void gilspy_probe_cost_target(int* counter) {
  asm volatile("" : : "r"(counter) : "memory");
  ++*counter;
}

namespace gilspy::sampler::exact {

namespace {

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The fastest of a few rounds: the machine's other work only ever adds.
double ns_per_call(int calls) {
  int counter = 0;
  double best = 1e18;
  for (int round = 0; round < 3; ++round) {
    const int64_t t0 = now_ns();
    for (int i = 0; i < calls; ++i) gilspy_probe_cost_target(&counter);
    best = std::min(best, static_cast<double>(now_ns() - t0) / calls);
  }
  return best;
}

// Calls with probes on this thread (take_gil's entry and return pair, or drop_gil's entry alone), their
// samples written to a small ring as the real probes' are; -1 when they cannot be created.
double probed_ns_per_call(const std::vector<uint64_t>& tracepoints, int calls) {
  const size_t length = 9 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<int> fds;
  void* ring = MAP_FAILED;
  double ns = -1;
  bool ok = true;
  for (const uint64_t id : tracepoints) {
    const int fd = open_tracepoint_event(id, static_cast<pid_t>(::gettid()), -1, false);
    if (fd < 0) {
      ok = false;
      break;
    }
    fds.push_back(fd);
    if (fds.size() == 1) {
      ring = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ok = ring != MAP_FAILED;
    } else {
      ok = ::ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, fds.front()) == 0;
    }
    if (!ok) break;
  }
  if (ok) ns = ns_per_call(calls);
  if (ring != MAP_FAILED) ::munmap(ring, length);
  for (const int fd : fds) ::close(fd);
  return ns;
}

}  // namespace

ProbeCost measure_probe_cost(const std::string& tracefs) {
  ProbeCost cost;
  try {
    const elf::ElfImage self = elf::ElfImage::open("/proc/self/exe");
    const auto symbol = self.symbol("gilspy_probe_cost_target");
    const auto offset = symbol ? self.file_offset_of(symbol->value) : std::nullopt;
    if (!offset) return cost;
    TracefsUprobes defined(tracefs, "gilspy_" + std::to_string(::getpid()) + "_cost");
    const uint64_t entry = defined.define("entry", self.descriptor_path(), *offset, false);
    const uint64_t ret = defined.define("return", self.descriptor_path(), *offset, true);
    constexpr int kCalls =
        500;  // enough for a round to outlast the clock's jitter, few enough to attach at once
    const double plain = ns_per_call(kCalls);
    const double drop = probed_ns_per_call({entry}, kCalls);
    const double take = probed_ns_per_call({entry, ret}, kCalls);
    if (drop < 0 || take < 0) return cost;
    cost.drop_ns = std::max(0.0, drop - plain);
    cost.take_ns = std::max(0.0, take - plain);
    cost.measured = true;
  } catch (const Error&) {
    // gilspy's own file unreadable: not measured, said so in the summary
  }
  return cost;
}

}  // namespace gilspy::sampler::exact
