// base/proc_files: the pieces of /proc that messages and exec detection rely on.
#include <doctest/doctest.h>
#include <unistd.h>

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
