#pragma once
// The one way to take a field out of bytes copied from the target: a T at a byte offset, unaligned and
// bounds-checked. The offsets come from cpython_layouts/ tables and the bytes from a process gilspy does not
// trust, so a field that does not lie wholly inside the buffer (a wrong table, a hostile or changing target)
// is never read past it: load() gives T{} there, and a FieldReader remembers it, so that a decoder refuses
// the whole reading instead of deciding anything from a made-up zero.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace gilspy {

using RemoteBytes = std::span<const uint8_t>;

// True when [off, off + size) lies inside `bytes` (no overflow, whatever off is).
constexpr bool fits(RemoteBytes bytes, size_t off, size_t size) {
  return off <= bytes.size() && bytes.size() - off >= size;
}

// The T at `off`; T{} when it does not lie wholly inside `bytes`.
template <class T>
T load(RemoteBytes bytes, size_t off) {
  static_assert(std::is_trivially_copyable_v<T>);
  T v{};
  if (fits(bytes, off, sizeof v)) std::memcpy(&v, bytes.data() + off, sizeof v);
  return v;
}

// load() over one buffer, remembering whether any field fell outside it.
class FieldReader {
 public:
  explicit FieldReader(RemoteBytes bytes) : bytes_(bytes) {}
  template <class T>
  T get(size_t off) {
    if (!fits(bytes_, off, sizeof(T))) complete_ = false;
    return load<T>(bytes_, off);
  }
  // false once a field fell outside the buffer: refuse what was decoded
  bool complete() const { return complete_; }

 private:
  RemoteBytes bytes_;
  bool complete_ = true;
};

}  // namespace gilspy
