#include "sampler/proc/ns_tids.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace gilspy::sampler {
namespace {

std::string_view nspid_numbers(std::string_view text) {
  constexpr std::string_view key = "\nNSpid:";
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = text.substr(at + key.size());
  return rest.substr(0, rest.find('\n'));
}

// The numbers of "\t12345\t5" in order, by callback; stops at the first non-number.
template <typename F>
void each_number(std::string_view s, F&& f) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    int64_t v = 0;
    size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 10) v = v * 10 + (s[i++] - '0'), ++digits;
    if (digits == 0 || v > INT32_MAX) return;
    f(static_cast<int32_t>(v));
  }
}

bool same_file(const char* a, const char* b) {
  struct stat sa, sb;
  return ::stat(a, &sa) == 0 && ::stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

int32_t innermost_nspid(std::string_view status_text) {
  int32_t last = 0;
  each_number(nspid_numbers(status_text), [&](int32_t v) { last = v; });
  return last;
}

NamespaceTids::NamespaceTids(pid_t pid) : pid_(pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/ns/pid", static_cast<int>(pid));
  // When the namespace files cannot be compared (no permission, the process is gone), assume ours: the
  // walk then checks tids against /proc/PID/task as before.
  struct stat st;
  translating_ = ::stat(path, &st) == 0 && !same_file("/proc/self/ns/pid", path);
}

int32_t NamespaceTids::to_host(int32_t ns_tid) {
  if (!translating_) return ns_tid;
  if (ns_tid <= 0) return 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < size_; ++i) {
      if (table_[i].ns_tid == ns_tid) return table_[i].host_tid;
    }
    if (pass == 0 && rescan_allowed_) {
      rescan_allowed_ = false;
      rescan();
    } else {
      break;
    }
  }
  return 0;
}

int32_t NamespaceTids::to_namespace(int32_t host_tid) const {
  if (!translating_) return host_tid;
  for (size_t i = 0; i < size_; ++i) {
    if (table_[i].host_tid == host_tid) return table_[i].ns_tid;
  }
  return 0;
}

// Reads /proc/PID/task with getdents64 into a fixed buffer and each thread's status into another: no
// allocation (the sampler rescans from its poll loop).
void NamespaceTids::rescan() {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task", static_cast<int>(pid_));
  const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir < 0) return;  // the process is gone: keep the table, lookups of new threads miss
  size_t n = 0;
  alignas(8) char entries[8192];
  char status[4096];
  while (n < kCapacity) {
    const long got = ::syscall(SYS_getdents64, dir, entries, sizeof entries);
    if (got <= 0) break;
    for (long off = 0; off < got && n < kCapacity;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(entries + off);
      off += e->d_reclen;
      char* end = nullptr;
      const long host = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || host <= 0) continue;
      char status_path[64];
      std::snprintf(status_path, sizeof status_path, "%ld/status", host);
      const int fd = ::openat(dir, status_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) continue;  // exited meanwhile
      const ssize_t len = ::read(fd, status, sizeof status - 1);
      ::close(fd);
      if (len <= 0) continue;
      const std::string_view text(status, static_cast<size_t>(len));
      const int32_t ns = innermost_nspid(text);
      if (ns > 0) table_[n++] = {ns, static_cast<int32_t>(host)};
    }
  }
  ::close(dir);
  size_ = n;
}

}  // namespace gilspy::sampler
