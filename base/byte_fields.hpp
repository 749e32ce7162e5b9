#pragma once
// The one way to take a field out of bytes copied from the target: a T at a byte offset, unaligned and
// bounds-checked. The offsets come from cpython_layouts/ tables and the bytes from a process gilspy does not
// trust, so a field that does not lie wholly inside the buffer (a wrong table, a hostile or changing target)
// is never read past it: load() gives T{} there, and a FieldReader remembers it, so that a decoder refuses
// the whole reading instead of deciding anything from a made-up zero. The tables say what each field holds
// (Field<T>), so a reader takes it at the table's width, not at one it picks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
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

// A field of a target's structure: where it lies (bytes from the structure's start) and what it holds. A
// table writes the offset (an integer converts), its member's declaration the type.
template <class T>
struct Field {
  static_assert(std::is_trivially_copyable_v<T>);
  uint32_t off = 0;
  constexpr Field() = default;
  // Implicit: a table writes the offset; the member it is assigned to says the type.
  constexpr Field(uint32_t offset) : off(offset) {}  // NOLINT(google-explicit-constructor)
  constexpr bool operator==(const Field&) const = default;
  // The first byte past the field.
  constexpr uint32_t end() const { return off + static_cast<uint32_t>(sizeof(T)); }
};
// A field some versions do not have.
template <class T>
using OptField = std::optional<Field<T>>;

// The T of `field` in a structure that starts `base` bytes into `bytes`; T{} when it does not lie wholly
// inside them.
template <class T>
T load(RemoteBytes bytes, Field<T> field, size_t base = 0) {
  return load<T>(bytes, base + field.off);
}

// load() over one buffer, remembering whether any field fell outside it. The buffer may hold a structure from
// byte `first` on (a read that skipped the structure's head): fields are still named by their offsets from
// the structure's start.
class FieldReader {
 public:
  explicit FieldReader(RemoteBytes bytes, size_t first = 0) : bytes_(bytes), first_(first) {}
  template <class T>
  T get(size_t off) {
    if (off < first_ || !fits(bytes_, off - first_, sizeof(T))) {
      complete_ = false;
      return T{};
    }
    return load<T>(bytes_, off - first_);
  }
  template <class T>
  T get(Field<T> field, size_t base = 0) {
    return get<T>(base + field.off);
  }
  // false once a field fell outside the buffer: refuse what was decoded
  bool complete() const { return complete_; }

 private:
  RemoteBytes bytes_;
  size_t first_ = 0;
  bool complete_ = true;
};

}  // namespace gilspy
