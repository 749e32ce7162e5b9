#include "sampler/queue/record_queue.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <new>

namespace gilspy::sampler {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older headers lack it, the kernel may still have it
#endif

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

RecordQueue::RecordQueue(size_t capacity_pow2) : mask_(capacity_pow2 - 1) {
  map_bytes_ = round_up(capacity_pow2 * sizeof(raw::TargetRecord), kHugePage);
  // Over-allocated by a huge page, then trimmed to a 2 MiB-aligned mapping: a huge page needs that alignment.
  const size_t reserve = map_bytes_ + kHugePage;
  void* raw_map =
      ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw_map == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw_map);
  const uintptr_t aligned = round_up(start, kHugePage);
  if (aligned > start) ::munmap(raw_map, aligned - start);
  const uintptr_t end = start + reserve;
  if (end > aligned + map_bytes_)
    ::munmap(reinterpret_cast<void*>(aligned + map_bytes_), end - aligned - map_bytes_);
  slots_ = reinterpret_cast<raw::TargetRecord*>(aligned);
  (void)::madvise(slots_, map_bytes_, MADV_HUGEPAGE);  // refused where THP is off: 4 KiB pages then
  populate_to(std::min(map_bytes_, kPrefaultAhead));   // the first records fault nowhere
}

RecordQueue::~RecordQueue() {
  for (size_t i = tail_.load(); i != head_.load(); ++i) std::destroy_at(&slots_[i & mask_]);
  ::munmap(slots_, map_bytes_);
}

void RecordQueue::populate_to(size_t end_bytes) {
  end_bytes = round_up(std::min(end_bytes, map_bytes_), kHugePage);
  if (!populate_works_ || end_bytes <= populated_bytes_) return;
  if (::madvise(reinterpret_cast<char*>(slots_) + populated_bytes_, end_bytes - populated_bytes_,
                MADV_POPULATE_WRITE) != 0) {
    // EINVAL: a kernel without it. Anything else (ENOMEM under memory pressure): the producer's own faults
    // map the rest, as they would without this.
    populate_works_ = false;
    return;
  }
  populated_bytes_ = end_bytes;
}

void RecordQueue::prefault_ahead() {
  if (!populate_works_ || populated_bytes_ >= map_bytes_) return;
  const size_t head = head_.load(std::memory_order_acquire);
  // Before the first wrap the producer's slot is `head`; after it, every slot has been written once.
  const size_t written = std::min(head, mask_ + 1) * sizeof(raw::TargetRecord);
  populate_to(written + kPrefaultAhead);
}

}  // namespace gilspy::sampler
