// The one bounds-checked way to take a field out of bytes read from the target (sampler/byte_fields.hpp): a
// field outside the buffer is refused, never read past.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/byte_fields.hpp"
#include "cpython_layouts/layout.hpp"
#include "sampler/gc/gc_sample.hpp"
#include "sampler/target/gil_sample.hpp"

namespace unit_byte_fields {

using gilspy::FieldReader;
using gilspy::load;
using gilspy::RemoteBytes;

TEST_CASE("bytes from the target: a field inside is read, one outside (or overflowing) is refused") {
  // The buffer sits inside a larger one whose bytes past it are 0xee: a read past the end would see them.
  std::vector<uint8_t> backing(32, 0xee);
  for (uint8_t i = 0; i < 16; ++i) backing[i] = i;
  const RemoteBytes bytes(backing.data(), 16);
  CHECK(load<uint32_t>(bytes, 0) == 0x03020100u);
  CHECK(load<uint64_t>(bytes, 8) == 0x0f0e0d0c0b0a0908ull);
  CHECK(load<uint64_t>(bytes, 9) == 0);  // 9..16 would need one byte past the end
  CHECK(load<uint8_t>(bytes, 16) == 0);
  CHECK(load<uint32_t>(bytes, SIZE_MAX - 1) == 0);  // off + size wraps: still refused
  FieldReader r(bytes);
  CHECK(r.get<uint16_t>(14) == 0x0f0e);
  CHECK(r.complete());
  CHECK(r.get<uint32_t>(13) == 0);
  CHECK_FALSE(r.complete());
}

TEST_CASE("a typed field is read at its own width, and refused where it does not fit") {
  std::vector<uint8_t> backing(32, 0xee);
  for (uint8_t i = 0; i < 16; ++i) backing[i] = i;
  const RemoteBytes bytes(backing.data(), 16);
  constexpr gilspy::Field<uint64_t> word = 8;
  constexpr gilspy::Field<int32_t> small = 4;
  static_assert(std::is_same_v<decltype(load(bytes, word)), uint64_t>);  // T comes from the table
  static_assert(std::is_same_v<decltype(load(bytes, small)), int32_t>);
  CHECK(load(bytes, word) == 0x0f0e0d0c0b0a0908ull);
  CHECK(load(bytes, small) == 0x07060504);
  CHECK(load(bytes, small, 8) == 0x0f0e0d0c);    // the same field of a struct 8 bytes in
  CHECK(load(bytes, word, 1) == 0);              // 9..16: one byte past the end
  CHECK(load(bytes, small, SIZE_MAX - 8) == 0);  // base + offset + size wraps: still refused
  const gilspy::Field<uint64_t> past = 12;       // the buffer is 4 bytes short for it
  CHECK(load(bytes, past) == 0);
  FieldReader r(bytes);
  CHECK(r.get(small) == 0x07060504);
  CHECK(r.get(word) == 0x0f0e0d0c0b0a0908ull);
  CHECK(r.complete());
  CHECK(r.get(past) == 0);
  CHECK_FALSE(r.complete());
  FieldReader cut(RemoteBytes(backing.data(), 15));  // a short buffer: the word at 8 needs 16 bytes
  CHECK(cut.get(word) == 0);
  CHECK_FALSE(cut.complete());
  // A read that began 4 bytes into the structure: fields keep their offsets from its start, and one that
  // begins before the bytes read is refused, not read from before the buffer.
  FieldReader tail(RemoteBytes(backing.data() + 4, 12), 4);
  CHECK(tail.get(word) == 0x0f0e0d0c0b0a0908ull);
  CHECK(tail.complete());
  CHECK(tail.get(small) == 0x07060504);
  CHECK(tail.complete());
  const gilspy::Field<uint32_t> head = 0;
  CHECK(tail.get(head) == 0);
  CHECK_FALSE(tail.complete());
}

TEST_CASE("the GIL and GC decoders refuse a buffer shorter than their layout") {
  gilspy::layouts::GilLayout g{};
  g.size = 64;
  g.locked = 0;
  g.last_holder = 8;
  g.switch_number = 16;
  g.interval = 24;
  g.cond = 32;
  g.cond_wrefs = 4;
  std::vector<uint8_t> gil(64, 0);
  const int32_t one = 1;
  std::memcpy(gil.data(), &one, 4);
  const auto whole = gilspy::sampler::decode_gil(gil, g);
  REQUIRE(whole);
  CHECK(whole->locked == 1);
  CHECK_FALSE(gilspy::sampler::decode_gil(RemoteBytes(gil).first(30), g));  // interval's 8 bytes cut short
  g.interval = 60;                                                          // a table past the struct's size
  CHECK_FALSE(gilspy::sampler::decode_gil(gil, g));

  gilspy::layouts::GcLayout l{};
  l.enabled = 0;
  l.collecting = 4;
  l.generations = 8;
  l.generation_stride = 24;
  l.generation_count = 4;
  l.stats = 80;
  l.stats_stride = 24;
  std::vector<uint8_t> state(160, 0);
  std::memcpy(state.data(), &one, 4);
  CHECK(gilspy::sampler::decode_gc(state, {}, l).plausible());
  CHECK_FALSE(gilspy::sampler::decode_gc(RemoteBytes(state).first(100), {}, l).plausible());
}

}  // namespace unit_byte_fields
