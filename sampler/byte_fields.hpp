#pragma once
// Fields of a buffer read from the target: a T at a byte offset, unaligned (the buffer's bytes are the
// target's, copied; the caller has checked that offset + sizeof(T) lies inside it).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gilspy::sampler {

template <class T>
T at(const uint8_t* p, size_t off) {
  T v{};
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

}  // namespace gilspy::sampler
