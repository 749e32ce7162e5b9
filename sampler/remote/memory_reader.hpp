#pragma once
// Reading another process's memory. `RemoteMemoryReader` uses process_vm_readv with many regions per call
// (one syscall reads everything a poll needs); `FakeMemoryReader` (tests/support/fake_memory_reader.hpp)
// serves unit tests.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/byte_fields.hpp"

namespace gilspy::sampler {

struct ReadRegion {
  uint64_t remote = 0;
  void* local = nullptr;
  size_t len = 0;
};

// The region that reads field `f` of the structure at `base` into `*into`, which has the field's own type.
template <class T>
ReadRegion field_region(uint64_t base, Field<T> f, T* into) {
  return {base + f.off, into, sizeof(T)};
}

class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  // Reads the regions in order and returns how many were read completely; it stops at the first region that
  // cannot be read (like process_vm_readv). Throws Error(kNoSuchProcess) when the process is gone and
  // Error(kPermission) when we may not read it. Never allocates.
  virtual size_t read(std::span<const ReadRegion> regions) = 0;

  // One region that must be readable; throws Error(kBadAddress) naming `what` otherwise.
  void read_exact(uint64_t remote, void* local, size_t len, const char* what);
  template <class T>
  T read_value(uint64_t remote, const char* what) {
    T value{};
    read_exact(remote, &value, sizeof value, what);
    return value;
  }
  // Field `f` of the structure at `base`, at the field's own type.
  template <class T>
  T read_field(uint64_t base, Field<T> f, const char* what) {
    return read_value<T>(base + f.off, what);
  }
};

class RemoteMemoryReader final : public MemoryReader {
 public:
  explicit RemoteMemoryReader(pid_t pid) : pid_(pid) {}
  size_t read(std::span<const ReadRegion> regions) override;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

}  // namespace gilspy::sampler
