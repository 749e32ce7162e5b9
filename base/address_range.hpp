#pragma once
// Whether [addr, addr + len) lies inside [start, start + size), compared by differences so that neither end
// is computed: addresses and lengths read from a target (torn, or planted) can lie near 2^64, where
// `addr + len` wraps past zero and a naive check lets the read index far outside its buffer.
#include <cstdint>

namespace gilspy {

constexpr bool range_within(uint64_t start, uint64_t size, uint64_t addr, uint64_t len) {
  return addr >= start && addr - start <= size && len <= size - (addr - start);
}

}  // namespace gilspy
