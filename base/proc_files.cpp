#include "base/proc_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string_view>

namespace gilspy {

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

std::string thread_comm(pid_t pid, int64_t tid) {
  std::string s =
      read_proc_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm").value_or("");
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string process_command_line(pid_t pid) {
  std::string s = read_proc_file("/proc/" + std::to_string(pid) + "/cmdline").value_or("");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s) c = c == '\0' ? ' ' : c;
  return s;
}

std::optional<std::string> process_env_var(pid_t pid, const std::string& name) {
  const std::string env = read_proc_file("/proc/" + std::to_string(pid) + "/environ").value_or("");
  const std::string prefix = name + "=";
  size_t pos = 0;
  while (pos < env.size()) {
    const size_t end = env.find('\0', pos);
    const std::string var = env.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (var.rfind(prefix, 0) == 0) return var.substr(prefix.size());
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

namespace {
std::optional<pid_t> to_pid(std::string_view text) {
  pid_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr == text.data() || value <= 0) return std::nullopt;
  return value;
}
}  // namespace

std::optional<pid_t> thread_group_of(pid_t id) {
  const auto status = read_proc_file("/proc/" + std::to_string(id) + "/status");
  if (!status) return std::nullopt;
  const size_t pos = status->find("\nTgid:");
  if (pos == std::string::npos) return std::nullopt;
  const size_t digits = status->find_first_not_of(" \t", pos + 6);
  if (digits == std::string::npos) return std::nullopt;
  return to_pid(std::string_view(*status).substr(digits));
}

std::optional<pid_t> parent_of(pid_t pid) {
  // "PID (comm) S PPID ...": comm may hold spaces and parentheses, so count fields from the last ')'.
  const auto stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  const size_t paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat->size()) return std::nullopt;
  const size_t ppid = stat->find(' ', paren + 2);  // after the state letter
  if (ppid == std::string::npos) return std::nullopt;
  const auto parent = to_pid(std::string_view(*stat).substr(ppid + 1));
  return parent ? parent : std::optional<pid_t>(0);  // 0: no parent (init, kernel threads)
}

std::vector<pid_t> all_process_ids() {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (const auto pid = to_pid(e->d_name); pid && std::string_view(e->d_name).find_first_not_of("0123456789") ==
                                                       std::string_view::npos) {
      out.push_back(*pid);
    }
  }
  ::closedir(dir);
  return out;
}

std::string ptrace_permission_hint() {
  std::string scope = read_proc_file("/proc/sys/kernel/yama/ptrace_scope").value_or("?");
  if (const size_t nl = scope.find('\n'); nl != std::string::npos) scope.resize(nl);
  return "run gilspy as root, or as the target's user with CAP_SYS_PTRACE (sudo setcap cap_sys_ptrace+ep "
         "$(which gilspy)); kernel.yama.ptrace_scope is " +
         scope;
}

std::string path_in_process(pid_t pid, const std::string& path) {
  return "/proc/" + std::to_string(pid) + "/root" + path;
}

}  // namespace gilspy
