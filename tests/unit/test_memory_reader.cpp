// RemoteMemoryReader on this process itself: regions read in order, and how many came in full when one
// cannot be read (process_vm_readv stops there and returns the bytes before it).
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "sampler/remote/memory_reader.hpp"

using gilspy::sampler::ReadRegion;
using gilspy::sampler::RemoteMemoryReader;

// Named per file, so that the unity build can put test files together.
namespace unit_memory_reader {
namespace {

uint64_t addr(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

// A page that is mapped no more: reading it fails.
uint64_t unmapped_page() {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  REQUIRE(munmap(p, 4096) == 0);
  return addr(p);
}

}  // namespace

TEST_CASE(
    "memory reader: the regions before one that cannot be read count, each once, whatever their sizes") {
  RemoteMemoryReader reader(getpid());
  const uint64_t a = 0x1111111111111111, b = 0x2222222222222222;
  const uint32_t c = 0x33333333;
  std::vector<uint8_t> page(464, 0x44);
  uint64_t ga = 0, gb = 0, gd = 0;
  uint32_t gc = 0;
  std::vector<uint8_t> gpage(464);
  const uint64_t gone = unmapped_page();
  // All of them readable.
  std::vector<ReadRegion> r{{addr(&a), &ga, 8},
                            {addr(&b), &gb, 8},
                            {addr(&c), &gc, 4},
                            {addr(&a), &gd, 8},
                            {addr(page.data()), gpage.data(), page.size()}};
  CHECK(reader.read(r) == 5);
  CHECK((ga == a && gb == b && gc == c && gd == a && gpage == page));
  // The last one unmapped (a stack read's guessed window whose page went away): the four before it count.
  // A count that skipped every other region here once said 2, and the stack read was dropped as torn.
  r[4] = {gone, gpage.data(), 464};
  CHECK(reader.read(r) == 4);
  r[4] = {gone, gpage.data(), 8};
  r[3] = {gone, &gd, 8};
  CHECK(reader.read(r) == 3);
  r[1] = {gone, &gb, 8};
  CHECK(reader.read(r) == 1);
  r[0] = {gone, &ga, 8};
  CHECK(reader.read(r) == 0);
}

}  // namespace unit_memory_reader
