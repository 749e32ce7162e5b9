// base/proc_files: the pieces of /proc that messages and exec detection rely on.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "base/proc_files.hpp"

TEST_CASE("proc_files: capability names in bit order, unknown bits by number") {
  CHECK(gilspy::capability_names(0) == "");
  CHECK(gilspy::capability_names(1ull << 19) == "CAP_SYS_PTRACE");
  CHECK(gilspy::capability_names(1ull << 24 | 1ull << 40) == "CAP_SYS_RESOURCE, CAP_CHECKPOINT_RESTORE");
  CHECK(gilspy::capability_names(1ull << 45) == "bit 45");
}

TEST_CASE("proc_files: a program image id is stable while the program runs, absent for no process") {
  const auto a = gilspy::process_image_id(::getpid());
  REQUIRE(a);
  CHECK(a->find(' ') != std::string::npos);  // three numbers
  CHECK(gilspy::process_image_id(::getpid()) == a);
  CHECK_FALSE(gilspy::process_image_id(0x7ffffff0));
  CHECK(gilspy::process_executable(::getpid()).find("gilspy_unit_tests") != std::string::npos);
}

TEST_CASE("proc_files: a process's start time is its own, later for a later process, absent for none") {
  const auto mine = gilspy::process_start_time(::getpid());
  REQUIRE(mine);
  CHECK(gilspy::process_start_time(::getpid()) == mine);
  CHECK_FALSE(gilspy::process_start_time(0x7ffffff0));
  const auto init = gilspy::process_start_time(1);  // started at boot, before this test
  REQUIRE(init);
  CHECK(std::stoull(*init) <= std::stoull(*mine));
  CHECK(mine->find_first_not_of("0123456789") == std::string::npos);
}

TEST_CASE("proc_files: a process's real user") {
  CHECK(gilspy::process_real_uid(::getpid()) == ::getuid());
  CHECK(gilspy::process_real_uid(1) == 0u);
  CHECK_FALSE(gilspy::process_real_uid(0x7ffffff0));
}

TEST_CASE("proc_files: a thread id belongs to its process; parents and the process list") {
  const pid_t self = ::getpid();
  CHECK(gilspy::thread_group_of(self) == self);
  std::atomic<bool> done{false};
  std::atomic<pid_t> live_tid{0};
  std::thread live([&] {
    live_tid = static_cast<pid_t>(::gettid());
    while (!done) std::this_thread::yield();
  });
  while (live_tid == 0) std::this_thread::yield();
  CHECK(live_tid != self);
  CHECK(gilspy::thread_group_of(live_tid) == self);  // /proc/TID exists for a thread too
  const auto all = gilspy::all_process_ids();
  CHECK(std::find(all.begin(), all.end(), self) != all.end());
  CHECK(std::find(all.begin(), all.end(), live_tid.load()) == all.end());  // its threads are not listed
  done = true;
  live.join();
  CHECK_FALSE(gilspy::thread_group_of(0x7ffffff0));
  CHECK(gilspy::parent_of(self) == ::getppid());
  CHECK_FALSE(gilspy::parent_of(0x7ffffff0));
}
