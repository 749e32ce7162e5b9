#pragma once
// The end-of-run note of `record` about child Python processes of the targets that were not recorded.
#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

namespace gilspy::cli {

// "" when every child in `unrecorded` was recorded after all; else one line naming the others and what
// records them: --subprocesses, or the -p with `recorded` (launch mode cannot add -p to the command: on their
// own while they run). With --subprocesses (`following_children`) a child missed ended before gilspy could
// attach.
std::string unrecorded_children_note(const std::vector<pid_t>& recorded, const std::set<pid_t>& unrecorded,
                                     bool launch_mode, bool following_children);

}  // namespace gilspy::cli
