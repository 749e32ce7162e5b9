// The kernel's process events (base/proc_events.hpp), as `--subprocesses` reads them: a fork of this process
// and the child's exit arrive, with the parent and the pid; threads' own clones do not.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/clock.hpp"
#include "base/proc_events.hpp"

namespace unit_proc_events {

TEST_CASE("process events: a child's fork and exit, not a thread's start") {
  gilspy::ProcEvents events;
  if (!events.open()) {
    MESSAGE("skipped: the proc connector needs root (CAP_NET_ADMIN) and CONFIG_PROC_EVENTS");
    return;
  }
  const int64_t before = gilspy::monotonic_ns();
  std::thread([] {}).join();  // a thread's clone: not an event
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  std::vector<gilspy::ProcEvent> mine;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool exited = false;
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    events.read([&](const gilspy::ProcEvent& e) {
      if (e.pid == child || e.parent == ::getpid()) mine.push_back(e);
      exited = exited || (e.kind == gilspy::ProcEvent::Kind::kExit && e.pid == child);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(mine.size() == 2);  // no event for the thread
  CHECK(mine[0].kind == gilspy::ProcEvent::Kind::kFork);
  CHECK(mine[0].pid == child);
  CHECK(mine[0].parent == ::getpid());
  CHECK(mine[0].ts_ns >= before);  // CLOCK_MONOTONIC, like gilspy's clock
  CHECK(mine[0].ts_ns <= gilspy::monotonic_ns());
  CHECK(mine[1].kind == gilspy::ProcEvent::Kind::kExit);
  CHECK(mine[1].pid == child);
}

}  // namespace unit_proc_events
