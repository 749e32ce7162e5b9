#include <algorithm>
#include <charconv>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "cli/commands.hpp"

namespace gilspy::cli {

std::vector<int> parse_pid_list(const std::string& text) {
  std::vector<int> pids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int pid = 0;
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), pid);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || pid <= 0) {
      throw Error(ErrorKind::kUsage, "\"" + part + "\" is not a process id (expected PID or PID,PID,...)");
    }
    if (std::find(pids.begin(), pids.end(), pid) != pids.end()) {
      throw Error(ErrorKind::kUsage, "process " + part + " is listed twice");
    }
    pids.push_back(pid);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return pids;
}

void require_process_id(int pid) {
  const auto process = thread_group_of(pid);
  if (process && *process != pid) {
    throw Error(ErrorKind::kUsage, std::to_string(pid) + " is a thread of process " +
                                       std::to_string(*process) + " (" + thread_comm(*process, *process) +
                                       "), not a process: use -p " + std::to_string(*process));
  }
}

}  // namespace gilspy::cli
