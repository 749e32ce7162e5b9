#pragma once
// The exact mode's probes in the kernel: uprobe definitions in tracefs (tracefs_uprobes.hpp says why not the
// uprobe PMU), and for every thread the target has when the probes come, on every CPU, one event per probe
// point, inherited by the threads it starts, all of a CPU's written into one ring buffer. Per-thread events
// put the breakpoints into the target's memory only: other processes running the same libpython are not
// touched. Everything is removed when this object goes, and the events (so the breakpoints) when gilspy dies,
// however it dies.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "elfutils/elf_image.hpp"
#include "sampler/exact/gil_probes.hpp"
#include "sampler/exact/handoff_decoder.hpp"
#include "sampler/exact/tracefs_uprobes.hpp"

namespace gilspy::sampler::exact {

// "0-3,6,8-9" (/sys/devices/system/cpu/online) -> {0,1,2,3,6,8,9}.
std::vector<int> parse_cpu_list(std::string_view text);

struct RingCounts {
  uint64_t hits = 0;       // samples read
  uint64_t lost = 0;       // samples the kernel could not write (a full ring)
  uint64_t throttled = 0;  // times the kernel stopped sampling for a while (perf_event_max_sample_rate)
  uint64_t foreign = 0;    // samples of another process or an unknown event (not expected: counted, not used)
};

class ProbeRings {
 public:
  // Throws Error(kUnavailable) with the reason when the probes cannot be placed (no tracefs, permission, too
  // many threads x CPUs), Error(kNoSuchProcess) when the target is gone.
  ProbeRings(pid_t pid, const elf::ElfImage& image, const GilProbes& probes);
  ~ProbeRings();
  ProbeRings(const ProbeRings&) = delete;
  ProbeRings& operator=(const ProbeRings&) = delete;

  // Appends the samples waiting in the rings to `out`, past `used` and up to out.size(); returns the new
  // count. What does not fit stays in the rings for the next call.
  size_t read(std::span<ProbeHit> out, size_t used);

  const RingCounts& counts() const { return counts_; }
  size_t events() const { return events_.size(); }
  size_t threads_at_start() const { return threads_; }

  // The most events --exact opens for one target (threads x CPUs x probe points, at the start only).
  static constexpr size_t kMaxEvents = 32768;
  // Per CPU: 512 KiB (what perf_event_mlock_kb allows without CAP_IPC_LOCK), 16 384 hits, 50 ms of 300 000
  // hits a second on that CPU; drained every 2 ms.
  static constexpr size_t kRingPages = 128;

 private:
  struct Ring {
    int cpu = -1;
    int fd = -1;              // the first event of the CPU, which owns the buffer
    uint8_t* base = nullptr;  // the mmap: a control page, then the data
    size_t length = 0;
  };
  struct Event {
    int fd = -1;
    uint64_t id = 0;
    ProbeKind kind = ProbeKind::kTakeEntry;
  };
  void open_thread(pid_t tid, const std::vector<uint64_t>& tracepoints);  // throws; ESRCH: nothing
  void close_all();
  void parse(const uint8_t* record, uint16_t type, std::span<ProbeHit> out, size_t& used);

  pid_t pid_;
  GilProbes probes_;
  std::unique_ptr<TracefsUprobes> defined_;
  std::vector<int> cpus_;
  std::vector<Ring> rings_;    // one per CPU
  std::vector<Event> events_;  // sorted by id (ids only grow)
  size_t threads_ = 0;
  RingCounts counts_;
};

}  // namespace gilspy::sampler::exact
