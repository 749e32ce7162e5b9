#pragma once
// An in-memory stand-in for a target process: tests lay out structs at made-up addresses and the sampler
// reads them through the same interface as a live process.
#include <cstring>
#include <map>
#include <type_traits>
#include <vector>

#include "base/address_range.hpp"
#include "base/error.hpp"
#include "sampler/remote/memory_reader.hpp"

namespace gilspy::sampler {

class FakeMemoryReader final : public MemoryReader {
 public:
  // Maps `size` zeroed bytes at `addr`.
  void map(uint64_t addr, size_t size) { segments_[addr].assign(size, 0); }
  template <class T>
  void put(uint64_t addr, const T& value) {
    write(addr, &value, sizeof value);
  }
  // Field `f` of the structure at `base`, written at the field's own type.
  template <class T>
  void put(uint64_t base, Field<T> f, const std::type_identity_t<T>& value) {
    put<T>(base + f.off, value);
  }
  void write(uint64_t addr, const void* data, size_t len) { std::memcpy(locate(addr, len), data, len); }
  void unmap(uint64_t addr) { segments_.erase(addr); }
  void set_gone(bool gone) { gone_ = gone; }
  size_t reads() const { return reads_; }
  size_t last_regions() const { return last_regions_; }  // how many regions the last read() asked for

  size_t read(std::span<const ReadRegion> regions) override {
    if (gone_) throw Error(ErrorKind::kNoSuchProcess, "process has exited");
    ++reads_;
    last_regions_ = regions.size();
    size_t done = 0;
    for (const auto& r : regions) {
      uint8_t* src = find(r.remote, r.len);
      if (src == nullptr) break;
      std::memcpy(r.local, src, r.len);
      ++done;
    }
    return done;
  }

 private:
  uint8_t* find(uint64_t addr, size_t len) {
    auto it = segments_.upper_bound(addr);
    if (it == segments_.begin()) return nullptr;
    --it;
    if (!range_within(it->first, it->second.size(), addr, len)) return nullptr;  // as the kernel refuses it
    return it->second.data() + (addr - it->first);
  }
  uint8_t* locate(uint64_t addr, size_t len) {
    uint8_t* p = find(addr, len);
    if (p == nullptr) throw Error(ErrorKind::kBadAddress, "fake memory: write outside mapped segments");
    return p;
  }
  std::map<uint64_t, std::vector<uint8_t>> segments_;
  bool gone_ = false;
  size_t reads_ = 0;
  size_t last_regions_ = 0;
};

}  // namespace gilspy::sampler
