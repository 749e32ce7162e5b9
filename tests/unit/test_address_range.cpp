// range_within: the bounds check for addresses and lengths read from a target, which may lie anywhere.
#include <doctest/doctest.h>

#include <cstdint>

#include "base/address_range.hpp"

using gilspy::range_within;

TEST_CASE("range_within: inside, at the edges, past the end, and a range that wraps past zero") {
  CHECK(range_within(0x1000, 0x100, 0x1000, 0x100));  // the whole range
  CHECK(range_within(0x1000, 0x100, 0x10f8, 8));      // its last word
  CHECK(range_within(0x1000, 0x100, 0x1100, 0));      // empty, at the end
  CHECK_FALSE(range_within(0x1000, 0x100, 0x10f9, 8));
  CHECK_FALSE(range_within(0x1000, 0x100, 0xff8, 8));  // before the start
  CHECK_FALSE(range_within(0x1000, 0x100, 0x1101, 0));
  // addr + len wraps to 0x10: a check by sums (addr + len <= start + size) would take it.
  CHECK_FALSE(range_within(0x1000, 0x100, ~uint64_t{7}, 0x18));
  CHECK_FALSE(range_within(0x1000, 0x100, 0x1000, ~uint64_t{0}));
  // A range at the very top of the address space.
  CHECK(range_within(~uint64_t{0} - 0xff, 0x100, ~uint64_t{0} - 7, 8));
}
