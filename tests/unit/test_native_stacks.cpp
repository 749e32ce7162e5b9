// dump --native's reader: a child of this test, blocked in a function of its own, is unwound through
// libdwfl and named by this binary's symbols, the child let go afterwards (it still runs); a pid that is gone
// is refused; a thread that is not the process's gets an error, not a stack.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "sampler/native/native_stacks.hpp"

// Named per file, so that the unity build can put test files together.
namespace unit_native_stacks {
namespace {

// Where the child blocks: a function with a name of its own that the unwinder must find on its stack.
[[gnu::noinline]] void gilspy_native_test_blocked_here(int fd) {
  char c = 0;
  while (::read(fd, &c, 1) < 0) {
  }
  asm volatile("" ::: "memory");  // not a tail call: the frame stays
}

}  // namespace

TEST_CASE("native stacks: a blocked child unwound to its own function, and let go after") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[1]);
    gilspy_native_test_blocked_here(pipe_fds[0]);
    ::_exit(7);
  }
  ::close(pipe_fds[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // in its read by then
  const auto stacks = gilspy::sampler::read_native_stacks(child, {child, 999'999'999});
  REQUIRE(stacks.size() == 2);
  const auto& s = stacks[0];
  CHECK(s.tid == child);
  CHECK(s.error.empty());
  CHECK(s.stopped_ns > 0);
  std::string names;
  for (const auto& f : s.frames) names += f.function + " ";
  CAPTURE(names);
  CHECK(std::any_of(s.frames.begin(), s.frames.end(), [](const gilspy::sampler::NativeFrame& f) {
    return f.function.find("gilspy_native_test_blocked_here") != std::string::npos && f.offset > 0 &&
           f.module.find("gilspy_unit_tests") != std::string::npos;
  }));
  CHECK(std::any_of(s.frames.begin(), s.frames.end(),
                    [](const gilspy::sampler::NativeFrame& f) { return f.function.find("main") == 0; }));
  // Not a thread of it: said, nothing unwound.
  CHECK(stacks[1].frames.empty());
  CHECK_FALSE(stacks[1].error.empty());
  // Let go: it reads its byte and exits with its own status.
  REQUIRE(::write(pipe_fds[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  ::close(pipe_fds[1]);
  // Gone now.
  CHECK_THROWS_AS(gilspy::sampler::read_native_stacks(child, {child}), gilspy::Error);
}

}  // namespace unit_native_stacks
