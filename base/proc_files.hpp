#pragma once
// Small /proc files of another process, read the way a process that may exit at any moment needs: open/read,
// never iostreams (libstdc++ throws when a thread exits mid-read, ESRCH).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gilspy {

// The whole of a small file. nullopt (errno set) when it cannot be read.
std::optional<std::string> read_proc_file(const std::string& path);

// /proc/PID/task/TID/comm without its newline; "" when the thread is gone.
std::string thread_comm(pid_t pid, int64_t tid);
// /proc/PID/cmdline with its NULs turned into spaces; "" when the process is gone.
std::string process_command_line(pid_t pid);
// The value of environment variable `name` in /proc/PID/environ (as the process started); nullopt if unset.
std::optional<std::string> process_env_var(pid_t pid, const std::string& name);

// The process a thread id belongs to (Tgid in /proc/ID/status: ID itself for a process); nullopt when gone.
std::optional<pid_t> thread_group_of(pid_t id);
// The parent process (field 4 of /proc/PID/stat); nullopt when gone.
std::optional<pid_t> parent_of(pid_t pid);
// Every process id in /proc (not their threads), in no particular order.
std::vector<pid_t> all_process_ids();

// What to do about a permission error on another process (ptrace access mode).
std::string ptrace_permission_hint();

// A path inside the target's mount namespace, opened from ours (containers): /proc/PID/root/PATH.
std::string path_in_process(pid_t pid, const std::string& path);

}  // namespace gilspy
