#include "base/proc_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <iterator>
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
    if (const auto pid = to_pid(e->d_name);
        pid && std::string_view(e->d_name).find_first_not_of("0123456789") == std::string_view::npos) {
      out.push_back(*pid);
    }
  }
  ::closedir(dir);
  return out;
}

namespace {

// The text after "KEY:" in /proc/PID/status (pid 0: gilspy's own); nullopt when absent or gone.
std::optional<std::string> status_value(pid_t pid, const char* key) {
  const auto text =
      read_proc_file(pid == 0 ? "/proc/self/status" : "/proc/" + std::to_string(pid) + "/status");
  if (!text) return std::nullopt;
  const std::string k = std::string("\n") + key + ":";
  const size_t at = text->find(k);
  if (at == std::string::npos) return std::nullopt;
  const size_t end = text->find('\n', at + k.size());
  return text->substr(at + k.size(), end == std::string::npos ? std::string::npos : end - at - k.size());
}

// "CapEff:\t000001ffffffffff" of a status file; nullopt when absent.
std::optional<uint64_t> status_caps(pid_t pid, const char* key) {
  const auto value = status_value(pid, key);
  if (!value) return std::nullopt;
  return std::strtoull(value->c_str(), nullptr, 16);
}

// Fields `first` to `last` (numbered as in proc(5): 3 is the state) of /proc/PID/stat, as they are written;
// nullopt when the process is gone or the line is short.
std::optional<std::string> stat_fields(pid_t pid, int first, int last) {
  const auto stat = read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return std::nullopt;
  const size_t paren = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  size_t pos = paren + 2;  // field 3
  for (int field = 3; field < first && pos != std::string::npos; ++field) {
    pos = stat->find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return std::nullopt;
  size_t end = pos;
  for (int k = first; k <= last && end != std::string::npos; ++k) end = stat->find(' ', end + 1);
  return stat->substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

}  // namespace

std::optional<char> process_state(pid_t pid) {
  const auto state = stat_fields(pid, 3, 3);
  if (!state || state->empty()) return std::nullopt;
  return state->front();
}

bool has_capability(int bit) {
  const auto eff = status_caps(0, "CapEff");
  return eff && ((*eff >> bit) & 1) != 0;
}

std::string capability_names(uint64_t mask) {
  // linux/capability.h, in bit order.
  static constexpr const char* kNames[] = {"CHOWN",
                                           "DAC_OVERRIDE",
                                           "DAC_READ_SEARCH",
                                           "FOWNER",
                                           "FSETID",
                                           "KILL",
                                           "SETGID",
                                           "SETUID",
                                           "SETPCAP",
                                           "LINUX_IMMUTABLE",
                                           "NET_BIND_SERVICE",
                                           "NET_BROADCAST",
                                           "NET_ADMIN",
                                           "NET_RAW",
                                           "IPC_LOCK",
                                           "IPC_OWNER",
                                           "SYS_MODULE",
                                           "SYS_RAWIO",
                                           "SYS_CHROOT",
                                           "SYS_PTRACE",
                                           "SYS_PACCT",
                                           "SYS_ADMIN",
                                           "SYS_BOOT",
                                           "SYS_NICE",
                                           "SYS_RESOURCE",
                                           "SYS_TIME",
                                           "SYS_TTY_CONFIG",
                                           "MKNOD",
                                           "LEASE",
                                           "AUDIT_WRITE",
                                           "AUDIT_CONTROL",
                                           "SETFCAP",
                                           "MAC_OVERRIDE",
                                           "MAC_ADMIN",
                                           "SYSLOG",
                                           "WAKE_ALARM",
                                           "BLOCK_SUSPEND",
                                           "AUDIT_READ",
                                           "PERFMON",
                                           "BPF",
                                           "CHECKPOINT_RESTORE"};
  std::string out;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if ((mask >> bit & 1) == 0) continue;
    if (!out.empty()) out += ", ";
    out += bit < std::size(kNames) ? std::string("CAP_") + kNames[bit] : "bit " + std::to_string(bit);
  }
  return out;
}

std::string ptrace_permission_hint(pid_t pid) {
  if (::geteuid() == 0) {
    const auto ours = status_caps(0, "CapEff"), theirs = status_caps(pid, "CapPrm");
    if (ours && theirs && (*theirs & ~*ours) != 0) {
      return "gilspy runs as root but without " + capability_names(*theirs & ~*ours) + ", which process " +
             std::to_string(pid) +
             " has; the kernel lets only a holder of CAP_SYS_PTRACE over the target's user namespace read it "
             "then (gilspy may run in a container: run it on the host, or give the container those "
             "capabilities)";
    }
    return "gilspy runs as root, yet the kernel refused: process " + std::to_string(pid) +
           " may belong to another user namespace (a container's), or a security module (SELinux, AppArmor, "
           "lockdown) forbids reading it; run gilspy in the target's namespace or on the host";
  }
  std::string hint =
      "run gilspy as root (sudo), or give the binary CAP_SYS_PTRACE (sudo setcap cap_sys_ptrace+ep "
      "$(which gilspy); then every user who can run it can read every process's memory, root's "
      "included, with --any-user)";
  if (auto scope = read_proc_file("/proc/sys/kernel/yama/ptrace_scope")) {
    if (const size_t nl = scope->find('\n'); nl != std::string::npos) scope->resize(nl);
    hint += "; kernel.yama.ptrace_scope is " + *scope;
    if (*scope == "1")
      hint += " (only a process's ancestors may read it, unless it allows gilspy with PR_SET_PTRACER)";
    if (*scope == "3") hint += " (no process may read another's memory until reboot)";
  }
  return hint;
}

std::optional<std::string> process_image_id(pid_t pid) {
  return stat_fields(pid, 26, 28);  // startcode, endcode, startstack
}

std::optional<uid_t> process_real_uid(pid_t pid) {
  const auto value = status_value(pid, "Uid");  // real, effective, saved, filesystem
  if (!value) return std::nullopt;
  char* end = nullptr;
  const unsigned long uid = std::strtoul(value->c_str(), &end, 10);
  if (end == value->c_str()) return std::nullopt;
  return static_cast<uid_t>(uid);
}

std::optional<std::string> process_start_time(pid_t pid) {
  return stat_fields(pid, 22, 22);
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
