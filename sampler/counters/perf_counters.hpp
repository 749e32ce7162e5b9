#pragma once
// perf_event_open counters on the target's threads (`--counters`): one group per thread (PERF_FORMAT_GROUP,
// so one read() gives every value with the group's enabled and running times), what this machine lets gilspy
// count (probed once), and the thread that opens and closes the groups.
//
// Opening a group is slow here (~40 us per event, ~60-90 us per event to close: the kernel installs the event
// in the target task's context with a call on its CPU), far longer than a 100 us poll step. So the poll
// thread never does it: it asks the PerfOpener (its own thread) through a lock-free queue, and reads a group
// only once the opener has published it. Opens are rate-limited (a server starting a thread per request would
// otherwise cost a core) and the descriptors bounded (each event is one), so counters cover the threads that
// live long enough to matter.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "raw/counter_kinds.hpp"

namespace gilspy::sampler {

// What one group read gives: cumulative values since the group was opened.
struct PerfReading {
  uint64_t enabled_ns = 0;  // the time the group was enabled (for a task: while the task ran)
  uint64_t running_ns = 0;  // ...and actually counted on the PMU (less when multiplexed)
  uint8_t count = 0;
  std::array<uint64_t, raw::kMaxCounterValues> values{};
};

// One thread's group: an event per descriptor, the first the leader. Not thread-safe.
class PerfGroup {
 public:
  PerfGroup() { fds_.fill(-1); }
  ~PerfGroup() { close(); }
  PerfGroup(const PerfGroup&) = delete;
  PerfGroup& operator=(const PerfGroup&) = delete;
  // Opens `kinds` on thread `tid` (0: the calling thread). Returns 0, or the errno of the event that failed
  // (then nothing stays open).
  int open(pid_t tid, std::span<const raw::CounterKind> kinds);
  void close();
  bool is_open() const { return count_ > 0; }
  size_t count() const { return count_; }
  // One read(); false when it failed (the group is unusable).
  bool read(PerfReading& out) const;

 private:
  std::array<int, raw::kMaxCounterValues> fds_;
  size_t count_ = 0;
};

// Which counters a session asks for (`--counters`) and what this machine lets it count.
struct CounterPlan {
  std::vector<raw::CounterKind> kinds;                           // counted on every thread, in this order
  std::vector<std::pair<std::string, std::string>> unavailable;  // asked for, not counted: {name, reason}
};

// `--counters LIST`: comma-separated names (`perf list` spelling) or `all`; the software events are always
// included. Throws Error(kUsage) for an unknown name, listing the valid ones.
std::vector<raw::CounterKind> parse_counter_list(const std::string& list);

// Tries each kind on the calling thread, then the usable ones together as one group (a group the PMU cannot
// count at once never counts: the hardware events at the end are dropped until it does). Each kind left out
// gets its reason: not supported (no PMU for it), not permitted (perf_event_paranoid, CAP_PERFMON), does not
// fit in one group, or the system's error.
CounterPlan probe_counters(std::span<const raw::CounterKind> asked);

// Why an open failed, in words: for an event and errno.
std::string perf_open_failure(raw::CounterKind kind, int error);

class PerfSlots;

// The thread that opens and closes groups for the poll thread. One per session, shared by every target.
class PerfOpener {
 public:
  // `max_fds`: descriptors its groups may hold at once, all targets together. `opens_per_s`, `burst`: how
  // many groups it opens at most per second, after an initial burst.
  PerfOpener(size_t max_fds, double opens_per_s = 20, size_t burst = 64);
  ~PerfOpener();  // stops the thread; the slots close their own descriptors
  PerfOpener(const PerfOpener&) = delete;
  PerfOpener& operator=(const PerfOpener&) = delete;

  // Poll thread: never blocks, never allocates. A request the queue has no room for is dropped (that thread
  // goes without counters).
  void request_open(PerfSlots& slots, uint16_t slot, uint32_t generation, int32_t tid);
  void request_close(PerfSlots& slots, uint16_t slot, uint32_t generation);

  size_t max_fds() const { return max_fds_; }
  uint64_t opened() const { return opened_.load(std::memory_order_relaxed); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }  // queue full or no room
  std::string first_failure() const;  // why the first open that failed did ("" when none)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t max_fds_;
  std::atomic<uint64_t> opened_{0}, failed_{0}, dropped_{0};
};

// One target's groups, a slot per followed thread (the sampler's track index). The poll thread reads a slot's
// group once `ready(slot, generation)` says the opener has published it for that thread.
class PerfSlots {
 public:
  PerfSlots(std::vector<raw::CounterKind> kinds, size_t slots);
  std::span<const raw::CounterKind> kinds() const { return kinds_; }
  bool ready(uint16_t slot, uint32_t generation) const {
    return slots_[slot].ready_generation.load(std::memory_order_acquire) == generation;
  }
  bool read(uint16_t slot, PerfReading& out) const { return slots_[slot].group.read(out); }
  // Opener side.
  uint32_t current_generation(uint16_t slot) const {
    return slots_[slot].wanted_generation.load(std::memory_order_acquire);
  }
  void set_wanted(uint16_t slot, uint32_t generation) {
    slots_[slot].wanted_generation.store(generation, std::memory_order_release);
  }
  PerfGroup& group(uint16_t slot) { return slots_[slot].group; }
  uint32_t& group_generation(uint16_t slot) { return slots_[slot].group_generation; }
  void publish(uint16_t slot, uint32_t generation) {
    slots_[slot].ready_generation.store(generation, std::memory_order_release);
  }

 private:
  struct Slot {
    PerfGroup group;                // written by the opener only, read by the poll thread once ready
    uint32_t group_generation = 0;  // opener only: whose thread the open group is
    std::atomic<uint32_t> ready_generation{0};  // the generation whose group is open and readable
    std::atomic<uint32_t> wanted_generation{
        0};  // the poll thread's current generation (stale requests skipped)
  };
  std::vector<raw::CounterKind> kinds_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace gilspy::sampler
