#pragma once
// /proc/PID/maps: which files a process has mapped, and where.
#include <sys/types.h>

#include <cstdint>
#include <optional>
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

// The whole of a small file, read with open/read: /proc files of a thread or process that has just exited fail
// with ESRCH mid-read, which iostreams turn into exceptions. nullopt (errno set) when it cannot be read.
std::optional<std::string> read_proc_file(const std::string& path);

// What to do about a permission error on another process (ptrace access mode).
std::string ptrace_permission_hint();

// A path inside the target's mount namespace, opened from ours (containers): /proc/PID/root/PATH.
std::string path_in_process(pid_t pid, const std::string& path);

}  // namespace gilspy::elf
