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
// The state letter of /proc/PID/stat ('R', 'S', 'Z' for an exited process not reaped yet, ...); nullopt when
// the process is gone.
std::optional<char> process_state(pid_t pid);
// Every process id in /proc (not their threads), in no particular order.
std::vector<pid_t> all_process_ids();

// What tells one program image of a process from the next: the code and stack addresses of /proc/PID/stat
// (fields 26-28), which an exec() replaces (address-space randomization moves them) and nothing else changes.
// nullopt when the process is gone or the file cannot be read.
std::optional<std::string> process_image_id(pid_t pid);
// Whether gilspy's own effective capability set holds capability `bit` (19: CAP_SYS_PTRACE).
bool has_capability(int bit);
// The real user id of a process (/proc/PID/status, "Uid:"); nullopt when it is gone or unreadable.
std::optional<uid_t> process_real_uid(pid_t pid);
// When the process started (field 22 of /proc/PID/stat, clock ticks after boot), as text: a pid reused by a
// new process has another. nullopt when the process is gone.
std::optional<std::string> process_start_time(pid_t pid);
// /proc/PID/exe, the program the process runs now; "" when unknown. Target-controlled text: escape to print.
std::string process_executable(pid_t pid);

// What to do about a permission error on process `pid` (ptrace access mode), from what this machine says:
// as root, which capabilities the target has that gilspy lacks (a container's bounding set); otherwise how
// to get the permission, with Yama's ptrace_scope when the kernel has Yama.
std::string ptrace_permission_hint(pid_t pid);
// The capability names in `mask` (CapEff-style bits), comma-separated: "CAP_SYS_RESOURCE, bit 45".
std::string capability_names(uint64_t mask);

// A path inside the target's mount namespace, opened from ours (containers): /proc/PID/root/PATH.
std::string path_in_process(pid_t pid, const std::string& path);

}  // namespace gilspy
