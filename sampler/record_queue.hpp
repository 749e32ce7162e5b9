#pragma once
// What the sampler hands to the session: typed records (raw/records.hpp) through a bounded single-producer
// single-consumer queue, so the poll loop never allocates and never waits on an output.
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "raw/records.hpp"

namespace gilspy::sampler {

// Lock-free SPSC ring. Capacity is fixed at construction (the only allocation; slots are constructed only
// when used, so the pages of a large queue stay unmapped until needed). Records are moved in and out: a
// record moved into a slot never allocates (the sampler's ThreadStart carries an empty name).
class RecordQueue {
 public:
  explicit RecordQueue(size_t capacity_pow2 = 1 << 16)
      : mask_(capacity_pow2 - 1), slots_(std::allocator<raw::TargetRecord>().allocate(capacity_pow2)) {}
  ~RecordQueue() {
    for (size_t i = tail_.load(); i != head_.load(); ++i) std::destroy_at(&slots_[i & mask_]);
    std::allocator<raw::TargetRecord>().deallocate(slots_, mask_ + 1);
  }
  RecordQueue(const RecordQueue&) = delete;
  RecordQueue& operator=(const RecordQueue&) = delete;

  // Producer. Returns false (and counts it) when full. Takes one alternative of raw::Record (Hold, Stats,
  // ...), built in place in the slot.
  template <class Kind>
  bool push(raw::TargetId target, Kind&& record) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) > mask_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    std::construct_at(&slots_[head & mask_],
                      raw::TargetRecord{target, raw::Record(std::in_place_type<std::decay_t<Kind>>,
                                                            std::forward<Kind>(record))});
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Consumer.
  bool pop(raw::TargetRecord* out) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    raw::TargetRecord& slot = slots_[tail & mask_];
    *out = std::move(slot);
    std::destroy_at(&slot);
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const size_t mask_;
  raw::TargetRecord* const slots_;
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace gilspy::sampler
