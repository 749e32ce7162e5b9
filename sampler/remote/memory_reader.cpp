#include "sampler/remote/memory_reader.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "base/error.hpp"
#include "base/proc_files.hpp"

namespace gilspy::sampler {

namespace {
constexpr size_t kMaxIov = 1024;  // IOV_MAX on Linux
}

void MemoryReader::read_exact(uint64_t remote, void* local, size_t len, const char* what) {
  const ReadRegion region{remote, local, len};
  if (read({&region, 1}) != 1) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(remote));
    throw Error(ErrorKind::kBadAddress, std::string("cannot read ") + what + " at " + addr);
  }
}

size_t RemoteMemoryReader::read(std::span<const ReadRegion> regions) {
  size_t done = 0;
  while (done < regions.size()) {
    iovec local[kMaxIov];
    iovec remote[kMaxIov];
    const size_t n = std::min(kMaxIov, regions.size() - done);
    size_t want = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto& r = regions[done + i];
      local[i] = {r.local, r.len};
      remote[i] = {reinterpret_cast<void*>(r.remote), r.len};
      want += r.len;
    }
    const ssize_t got = ::process_vm_readv(pid_, local, n, remote, n, 0);
    if (got < 0) {
      const int err = errno;
      if (err == ESRCH) {
        throw Error(ErrorKind::kNoSuchProcess, "process " + std::to_string(pid_) + " has exited");
      }
      if (err == EPERM || err == EACCES) {
        throw Error(ErrorKind::kPermission, "no permission to read process " + std::to_string(pid_) +
                                                "'s memory: " + ptrace_permission_hint(pid_));
      }
      return done;  // EFAULT: the first region is not mapped
    }
    if (static_cast<size_t>(got) == want) {
      done += n;
      continue;
    }
    // Partial transfers never split a region: count the regions that came in full. (This loop once indexed
    // from the advancing count, skipping every other region: a stack read whose last region failed returned
    // "2 of 4" and was dropped as torn.)
    size_t bytes = static_cast<size_t>(got);
    const size_t batch = done;
    for (size_t i = 0; i < n && bytes >= regions[batch + i].len; ++i) {
      bytes -= regions[batch + i].len;
      ++done;
    }
    return done;
  }
  return done;
}

}  // namespace gilspy::sampler
