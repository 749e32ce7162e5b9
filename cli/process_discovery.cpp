#include "cli/process_discovery.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "base/error.hpp"
#include "base/proc_files.hpp"

namespace gilspy::cli {

namespace {

// The text of a /proc link (never followed); "" when it cannot be read.
std::string link_text(const std::string& link) {
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool is_accelerator_device(std::string_view path) {
  for (const std::string_view prefix : {"/dev/nvidia", "/dev/davinci", "/dev/accel/"}) {
    if (path.starts_with(prefix)) return true;
  }
  return path == "/dev/kfd";
}

std::multimap<pid_t, pid_t> children_by_parent() {
  std::multimap<pid_t, pid_t> children;
  for (const pid_t pid : all_process_ids()) {
    if (const auto parent = parent_of(pid); parent && *parent > 0) children.emplace(*parent, pid);
  }
  return children;
}

std::set<pid_t> descendants(const std::multimap<pid_t, pid_t>& children, const std::vector<pid_t>& roots) {
  std::set<pid_t> out;
  std::vector<pid_t> todo(roots.begin(), roots.end());
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const auto [first, last] = children.equal_range(p);
    for (auto it = first; it != last; ++it) {
      if (out.insert(it->second).second) todo.push_back(it->second);
    }
  }
  return out;
}

}  // namespace

bool has_executable(pid_t pid) {
  return !link_text("/proc/" + std::to_string(pid) + "/exe").empty();
}

bool is_python_process(pid_t pid) {
  const std::string exe = link_text("/proc/" + std::to_string(pid) + "/exe");
  if (!exe.empty()) {
    const size_t slash = exe.rfind('/');
    if (exe.compare(slash == std::string::npos ? 0 : slash + 1, 6, "python") == 0) return true;
  }
  const auto maps = read_proc_file("/proc/" + std::to_string(pid) + "/maps");
  return maps && maps->find("/libpython") != std::string::npos;
}

bool holds_accelerator(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (is_accelerator_device(link_text(dir + "/" + e->d_name))) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

std::vector<pid_t> python_descendants(const std::vector<pid_t>& roots) {
  std::vector<pid_t> out;
  for (const pid_t pid : descendants(children_by_parent(), roots)) {
    if (is_python_process(pid)) out.push_back(pid);
  }
  return out;  // from a std::set: sorted
}

std::vector<pid_t> python_processes(pid_t self) {
  const auto children = children_by_parent();
  std::set<pid_t> excluded = descendants(children, {self});
  excluded.insert(self);
  std::vector<pid_t> out;
  for (const pid_t pid : all_process_ids()) {
    if (!excluded.contains(pid) && is_python_process(pid)) out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_target_owner(pid_t pid, bool any_user) {
  constexpr int kCapSysPtrace = 19;
  // Without the capability the kernel refuses another user's process by itself (and says what to do).
  if (any_user || ::geteuid() == 0 || !has_capability(kCapSysPtrace)) return;
  const auto uid = process_real_uid(pid);
  if (!uid || *uid == ::getuid()) return;
  throw Error(ErrorKind::kPermission,
              "process " + std::to_string(pid) + " belongs to another user (uid " + std::to_string(*uid) +
                  "): gilspy, not run as root, reads only its own user's processes (uid " +
                  std::to_string(::getuid()) +
                  "); --any-user reads others' too, where its capabilities allow");
}

std::optional<std::string> process_key(pid_t pid) {
  const auto image = process_image_id(pid);
  const auto started = process_start_time(pid);
  if (!image || !started) return std::nullopt;
  // The start time: a new process that took the pid of one already settled, with the same layout (no address
  // randomization: the same image addresses), is still another process.
  return std::to_string(pid) + " " + *started + " " + *image;
}

}  // namespace gilspy::cli
