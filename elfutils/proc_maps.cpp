#include "elfutils/proc_maps.hpp"

#include <cerrno>
#include <cstring>
#include <sstream>

#include "base/error.hpp"
#include "base/proc_files.hpp"

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
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &consumed) <
        4) {
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

std::vector<Mapping> read_maps(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  const auto text = read_proc_file(path);
  if (!text) {
    if (errno == EACCES || errno == EPERM) {
      throw Error(ErrorKind::kPermission, "no permission to inspect process " + std::to_string(pid) + ": " +
                                              ptrace_permission_hint(pid));
    }
    throw Error(ErrorKind::kNoSuchProcess, "no process with PID " + std::to_string(pid));
  }
  return parse_maps(*text);
}

}  // namespace gilspy::elf
