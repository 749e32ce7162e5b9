// The end-of-run note about child Python processes that were not recorded: who, and what records them.
#include <doctest/doctest.h>

#include "cli/children_note.hpp"

using gilspy::cli::unrecorded_children_note;

TEST_CASE("children note: none missing, or all recorded after a scan saw them first, says nothing") {
  CHECK(unrecorded_children_note({10}, {}, false, false).empty());
  // --subprocesses: a scan saw 11 before the session attached to it.
  CHECK(unrecorded_children_note({10, 11}, {11}, true, true).empty());
}

TEST_CASE("children note: names the missing children and what records them") {
  const std::string launched = unrecorded_children_note({10}, {11}, true, false);
  CHECK(launched.find("child Python process 11 was not recorded") != std::string::npos);
  CHECK(launched.find("--subprocesses") != std::string::npos);
  CHECK(launched.find("'gilspy record -p 11' while it runs") != std::string::npos);
  const std::string by_pid = unrecorded_children_note({10}, {11, 12}, false, false);
  CHECK(by_pid.find("processes 11,12 were not recorded") != std::string::npos);
  CHECK(by_pid.find("'-p 10,11,12'") != std::string::npos);
  // With --subprocesses a child missed is one that ended first: no advice to use it.
  const std::string following = unrecorded_children_note({10, 12}, {11, 12}, true, true);
  CHECK(following.find("process 11 was not recorded; it ended before gilspy could attach") !=
        std::string::npos);
  CHECK(following.find("--subprocesses") == std::string::npos);
}
