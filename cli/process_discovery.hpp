#pragma once
// Finding the processes to record when the user names none (every Python process this user may read) or asks
// for a target's descendants (--subprocesses: multiprocessing and DataLoader workers, subprocess), and the
// --accelerator filter. All from /proc, reading links' text and small files: nothing a target controls is
// followed or opened as a program.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gilspy::cli {

// A Python process by its look from outside: an executable named python* or a libpython mapped. Cheap (a
// readlink and /proc/PID/maps); attaching is what decides (a python2, an unsupported version is refused
// then).
bool is_python_process(pid_t pid);
// False once a process has no executable to show: it is exiting (or a zombie, or a kernel thread).
bool has_executable(pid_t pid);

// Whether the process holds an accelerator device open: /dev/nvidia*, /dev/davinci*, /dev/kfd, /dev/accel/*
// among its file descriptors (the links' text only).
bool holds_accelerator(pid_t pid);

// The Python processes among the descendants of `roots` (not the roots themselves), sorted.
std::vector<pid_t> python_descendants(const std::vector<pid_t>& roots);

// Every Python process except `self` and its descendants (gilspy and what it launched), sorted.
std::vector<pid_t> python_processes(pid_t self);

// What tells one program image of a process from another: the pid with /proc/PID/stat's start time (a reused
// pid has another) and code and stack addresses (an exec() replaces them). nullopt when the process is gone.
std::optional<std::string> process_key(pid_t pid);

// Run with CAP_SYS_PTRACE but not as root (file capabilities), gilspy reads only its own user's processes
// unless `any_user`: a capability on the binary would let every user who can run it read every process,
// root's included. Throws Error(kPermission) naming the owner and --any-user; a process gone is left to
// attaching.
void check_target_owner(pid_t pid, bool any_user);

}  // namespace gilspy::cli
