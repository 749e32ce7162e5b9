#include "cli/child_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "base/proc_files.hpp"

namespace gilspy::cli {

namespace {

constexpr int kScanEveryDrains = 40;  // 2 s: a /proc scan reads one small file per process
constexpr size_t kMaxListed = 12;

bool is_python_process(pid_t pid) {
  char exe[4096] = {};
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), exe, sizeof exe - 1);  // the link's text; nothing is opened
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    const size_t slash = path.rfind('/');
    if (path.compare(slash == std::string::npos ? 0 : slash + 1, 6, "python") == 0) return true;
  }
  const auto maps = read_proc_file("/proc/" + std::to_string(pid) + "/maps");
  return maps && maps->find("/libpython") != std::string::npos;
}

}  // namespace

std::vector<pid_t> python_descendants(const std::vector<pid_t>& roots) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  for (const pid_t pid : all_process_ids()) {
    if (const auto parent = parent_of(pid); parent && *parent > 0) children.emplace(*parent, pid);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo(roots.begin(), roots.end());
  std::set<pid_t> visited(roots.begin(), roots.end());
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const auto [first, last] = children.equal_range(p);
    for (auto it = first; it != last; ++it) {
      if (!visited.insert(it->second).second) continue;
      todo.push_back(it->second);
      if (is_python_process(it->second)) out.push_back(it->second);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string unrecorded_children_note(const std::vector<pid_t>& recorded, const std::set<pid_t>& unrecorded,
                                     bool launch_mode) {
  if (unrecorded.empty()) return "";
  std::string children;
  size_t listed = 0;
  for (const pid_t pid : unrecorded) {
    if (listed++ == kMaxListed) break;
    children += (children.empty() ? "" : ",") + std::to_string(pid);
  }
  std::string all;
  for (const pid_t pid : recorded) all += std::to_string(pid) + ",";
  const std::string more =
      unrecorded.size() > kMaxListed ? fmt::format(" and {} more", unrecorded.size() - kMaxListed) : "";
  return fmt::format("gilspy: note: child Python process{} {}{} {} not recorded; {}",
                     unrecorded.size() == 1 ? "" : "es", children, more,
                     unrecorded.size() == 1 ? "was" : "were",
                     launch_mode ? "record them with 'gilspy record -p " + children + "' while they run"
                                 : "'-p " + all + children + "' records them too");
}

void ChildWatchSink::stats(const LiveStats&) {
  if (calls_++ % kScanEveryDrains == 0) scan();
}

void ChildWatchSink::scan() {
  for (const pid_t pid : python_descendants(targets_)) {
    if (std::find(targets_.begin(), targets_.end(), pid) == targets_.end()) unrecorded_.insert(pid);
  }
}

}  // namespace gilspy::cli
