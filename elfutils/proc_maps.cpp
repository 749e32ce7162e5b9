#include "elfutils/proc_maps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "elfutils/error.hpp"

namespace gilspy::elf {

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> maps;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset dev inode   path (path may contain spaces; " (deleted)" suffix kept)
    Mapping m;
    unsigned long long start = 0, end = 0, offset = 0;
    char perms[8] = {};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &consumed) < 4) {
      continue;
    }
    m.start = start;
    m.end = end;
    m.offset = offset;
    m.perms = perms;
    if (consumed > 0 && static_cast<size_t>(consumed) < line.size()) m.path = line.substr(consumed);
    maps.push_back(std::move(m));
  }
  return maps;
}

std::optional<std::string> read_proc_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[8192];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<Mapping> read_maps(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  const auto text = read_proc_file(path);
  if (!text) {
    if (errno == EACCES || errno == EPERM) {
      throw Error(ErrorKind::kPermission, "no permission to inspect process " + std::to_string(pid) + ": " +
                                              ptrace_permission_hint());
    }
    throw Error(ErrorKind::kNoSuchProcess, "no process with PID " + std::to_string(pid));
  }
  return parse_maps(*text);
}

std::string ptrace_permission_hint() {
  std::string scope = "?";
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  if (f) std::getline(f, scope);
  return "run gilspy as root, or as the target's user with CAP_SYS_PTRACE (sudo setcap cap_sys_ptrace+ep "
         "$(which gilspy)); kernel.yama.ptrace_scope is " + scope;
}

std::string path_in_process(pid_t pid, const std::string& path) {
  return "/proc/" + std::to_string(pid) + "/root" + path;
}

}  // namespace gilspy::elf
