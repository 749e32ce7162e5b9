#include "cli/child_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "base/proc_files.hpp"
#include "cli/process_discovery.hpp"

namespace gilspy::cli {

namespace {

constexpr int kScanEveryDrains = 40;  // 2 s: a /proc scan reads one small file per process
constexpr size_t kMaxListed = 12;

}  // namespace

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
