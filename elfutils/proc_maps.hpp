#pragma once
// /proc/PID/maps: which files a process has mapped, and where. (Other /proc files: base/proc_files.hpp.)
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gilspy::elf {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;  // file offset of `start`
  std::string perms;    // "r-xp"
  std::string path;     // empty for anonymous mappings
};

std::vector<Mapping> parse_maps(std::string_view text);
// Throws Error(kNoSuchProcess) when the process does not exist.
std::vector<Mapping> read_maps(pid_t pid);

}  // namespace gilspy::elf
