#include "base/proc_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

std::string ptrace_permission_hint() {
  std::string scope = read_proc_file("/proc/sys/kernel/yama/ptrace_scope").value_or("?");
  if (const size_t nl = scope.find('\n'); nl != std::string::npos) scope.resize(nl);
  return "run gilspy as root, or as the target's user with CAP_SYS_PTRACE (sudo setcap cap_sys_ptrace+ep "
         "$(which gilspy)); kernel.yama.ptrace_scope is " +
         scope;
}

std::optional<std::string> process_image_id(pid_t pid) {
  const auto stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  const size_t paren = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  // After ") " comes field 3 (state); fields 26, 27, 28 are startcode, endcode, startstack.
  size_t pos = paren + 2;
  for (int field = 3; field < 26 && pos != std::string::npos; ++field) {
    pos = stat->find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return std::nullopt;
  size_t end = pos;
  for (int k = 0; k < 3 && end != std::string::npos; ++k) end = stat->find(' ', end + 1);
  return stat->substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

std::string process_executable(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

std::string path_in_process(pid_t pid, const std::string& path) {
  return "/proc/" + std::to_string(pid) + "/root" + path;
}

}  // namespace gilspy
