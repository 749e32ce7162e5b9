#pragma once
// What the sampler hands to the writer: fixed-size records through a bounded single-producer single-consumer
// queue, so the poll loop never allocates and never waits on the output file.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

namespace gilspy::sampler {

enum class EventType : uint8_t {
  kThreadStart,  // tid, ts, a = tstate address
  kThreadEnd,    // tid, ts
  kHold,         // tid, ts, dur: the thread held the GIL
  kWait,         // tid, ts, dur: the thread waited in take_gil
  kWaiters,      // ts, a = threads waiting on the GIL's cond (on change)
  kStats,        // ts, a = polls, b = late polls, c = hand-offs seen, d = hand-offs total (about once a second)
};

struct Event {
  EventType type = EventType::kStats;
  uint16_t process = 0;  // index of the target in the recording
  int32_t tid = 0;
  int64_t ts_ns = 0;     // CLOCK_MONOTONIC
  int64_t dur_ns = 0;
  uint64_t a = 0, b = 0, c = 0, d = 0;
};

// Lock-free SPSC ring. Capacity is fixed at construction (the only allocation).
class EventQueue {
 public:
  explicit EventQueue(size_t capacity_pow2 = 1 << 16)
      : mask_(capacity_pow2 - 1), slots_(std::make_unique_for_overwrite<Event[]>(capacity_pow2)) {}  // untouched pages stay unmapped

  // Producer. Returns false (and counts it) when full.
  bool push(const Event& e) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) > mask_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    slots_[head & mask_] = e;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Consumer.
  bool pop(Event* out) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    *out = slots_[tail & mask_];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const size_t mask_;
  std::unique_ptr<Event[]> slots_;
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace gilspy::sampler
