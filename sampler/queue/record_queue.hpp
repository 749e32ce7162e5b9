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
// when used). Records are moved in and out: a record moved into a slot never allocates (the sampler's
// ThreadStart carries an empty name).
//
// The slots are anonymous memory that the kernel maps on first touch. Left to the producer, that touch is a
// page fault in the poll loop every ~27 records (a record is ~150 bytes) until the ring has wrapped once:
// ~10 000 faults for the session's 40 MiB ring, ~20 us each in a VM, tens of seconds of a 16-thread target's
// recording. So the ring asks for huge pages where the kernel allows them (transparent huge pages in
// `madvise` mode), and the consumer maps the slots ahead of the producer (prefault_ahead(), from the drain
// that runs every 50 ms) with MADV_POPULATE_WRITE: the mapping is the kernel's, the slots' bytes are not
// touched, so this races with nothing the producer does. Where either is missing (an old kernel, no huge
// pages), the ring works as before, faulting on demand.
class RecordQueue {
 public:
  explicit RecordQueue(size_t capacity_pow2 = 1 << 16);
  ~RecordQueue();
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
  // Consumer: maps the slots the producer will write next (kPrefaultAhead bytes past its position) until
  // the whole ring is mapped; then does nothing.
  void prefault_ahead();
  size_t mapped_bytes() const { return populated_bytes_; }  // for tests: how far prefault_ahead() has got
  const void* slots_begin() const { return slots_; }        // for tests
  size_t slots_bytes() const { return map_bytes_; }

  static constexpr size_t kPrefaultAhead = size_t{8} << 20;  // a 50 ms drain at ~1M records/s, twice over

 private:
  void populate_to(size_t end_bytes);

  const size_t mask_;
  size_t map_bytes_ = 0;  // the slots' mapping, a multiple of 2 MiB
  raw::TargetRecord* slots_ = nullptr;
  size_t populated_bytes_ = 0;  // [0, this) of the mapping is known mapped (consumer only)
  bool populate_works_ = true;  // MADV_POPULATE_WRITE is there (Linux >= 5.14)
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace gilspy::sampler
