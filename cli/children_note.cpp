#include "cli/children_note.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gilspy::cli {

namespace {

constexpr size_t kMaxListed = 12;

}  // namespace

std::string unrecorded_children_note(const std::vector<pid_t>& recorded, const std::set<pid_t>& unrecorded,
                                     bool launch_mode, bool following_children) {
  std::vector<pid_t> missing;  // a child recorded after a scan had seen it is not missing
  for (const pid_t pid : unrecorded) {
    if (std::find(recorded.begin(), recorded.end(), pid) == recorded.end()) missing.push_back(pid);
  }
  if (missing.empty()) return "";
  std::string children;
  size_t listed = 0;
  for (const pid_t pid : missing) {
    if (listed++ == kMaxListed) break;
    children += (children.empty() ? "" : ",") + std::to_string(pid);
  }
  std::string all;
  for (const pid_t pid : recorded) all += std::to_string(pid) + ",";
  const std::string more =
      missing.size() > kMaxListed ? fmt::format(" and {} more", missing.size() - kMaxListed) : "";
  const bool one = missing.size() == 1;
  const std::string what =
      following_children ? std::string(one ? "it ended" : "they ended") + " before gilspy could attach"
      : launch_mode ? "--subprocesses records children too (or 'gilspy record -p " + children + "' while " +
                          (one ? "it runs" : "they run") + ")"
                    : "--subprocesses records children too (or '-p " + all + children + "')";
  return fmt::format("gilspy: note: child Python process{} {}{} {} not recorded; {}", one ? "" : "es",
                     children, more, one ? "was" : "were", what);
}

}  // namespace gilspy::cli
