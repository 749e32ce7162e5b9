// What a thread is doing, from /proc/PID/task/TID/syscall (sampler/proc/task_syscall.hpp): the GIL's futex
// words told apart, the system call a blocked thread is in named.
#include <doctest/doctest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "cpython_layouts/layout.hpp"
#include "sampler/proc/task_syscall.hpp"

using gilspy::sampler::TaskState;

namespace unit_task_syscall {

TEST_CASE("task syscall: the GIL's cond, mutex and switch words; another call; running") {
  const gilspy::layouts::GilLayout gil{};
  const uint64_t at = 0x7f0000001000;
  // A line of the file: the call's number, then its arguments (the futex word first), the stack and pc.
  const auto text = [](long nr, uint64_t addr) {
    char line[128];
    std::snprintf(line, sizeof line, "%ld 0x%llx 0x80 0x0 0x0 0x0 0x7ffd 0x7f12\n", nr,
                  static_cast<unsigned long long>(addr));
    return std::string(line);
  };
  using gilspy::sampler::classify_syscall;
  CHECK(classify_syscall(text(202, at + gil.cond + 8), at, gil) == TaskState::kGilCond);
  CHECK(classify_syscall(text(202, at + gil.mutex), at, gil) == TaskState::kGilMutex);
  CHECK(classify_syscall(text(202, at + gil.switch_cond + 4), at, gil) == TaskState::kSwitchWait);
  CHECK(classify_syscall(text(202, at + gil.size + 64), at, gil) ==
        TaskState::kOtherSyscall);                                                         // another lock
  CHECK(classify_syscall(text(230, at + gil.cond), at, gil) == TaskState::kOtherSyscall);  // not a futex
  CHECK(classify_syscall("running\n", at, gil) == TaskState::kRunning);
  CHECK(classify_syscall("-1 0x7ffd 0x7f12\n", at, gil) == TaskState::kOtherSyscall);  // blocked, no syscall
  CHECK(classify_syscall("garbage", at, gil) == TaskState::kUnknown);
}

TEST_CASE("task syscall: the call a blocked thread is in, by name") {
  CHECK(std::strcmp(gilspy::sampler::syscall_name(230), "clock_nanosleep") == 0);
  CHECK(std::strcmp(gilspy::sampler::syscall_name(202), "futex") == 0);
  CHECK(gilspy::sampler::syscall_name(9999) == nullptr);
  // A thread of this process asleep: its file says which call, and the reader keeps the number.
  std::atomic<int> tid{0};
  std::thread sleeper([&] {
    tid = static_cast<int>(::syscall(SYS_gettid));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  while (tid == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  gilspy::sampler::TaskSyscallFile file;
  REQUIRE(file.open(::getpid(), tid));
  const TaskState s = file.read(0, gilspy::layouts::GilLayout{});
  sleeper.join();
  CHECK(s == TaskState::kOtherSyscall);
  CHECK(std::strcmp(gilspy::sampler::syscall_name(file.last_syscall()), "clock_nanosleep") == 0);
}

}  // namespace unit_task_syscall
