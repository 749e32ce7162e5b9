#include "sampler/task_cpu.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>

namespace gilspy::sampler {

int parse_stat_processor(std::string_view stat) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return -1;
  std::string_view rest = stat.substr(paren + 1);
  constexpr int kFieldsAfterComm = 36;  // state is field 3, processor field 39
  for (int skipped = 0; skipped < kFieldsAfterComm + 1; ++skipped) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (skipped == kFieldsAfterComm) break;
    const size_t space = rest.find(' ');
    if (space == std::string_view::npos) return -1;
    rest.remove_prefix(space);
  }
  int cpu = -1;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), cpu);
  (void)ptr;
  return ec == std::errc() ? cpu : -1;
}

void TaskStatFile::reset(pid_t pid, int32_t tid) {
  close();
  pid_ = pid;
  tid_ = tid;
}

void TaskStatFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int TaskStatFile::cpu() {
  if (fd_ < 0) {
    if (tid_ == 0) return -1;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/stat", static_cast<int>(pid_), static_cast<int>(tid_));
    fd_ = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return -1;
  }
  char buf[640];
  const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
  if (n <= 0) return -1;
  return parse_stat_processor(std::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace gilspy::sampler
