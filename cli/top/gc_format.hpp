#pragma once
// The GC row of `gilspy top` (issue 9), under a process's figures:
//   GC  collections 12/1/0 (gen0/1/2)   paused 3.2ms (2.1 %)  longest 1.9ms   GIL waiting in GC 5.0 %
#include <string>

#include "cli/top/top_types.hpp"

namespace gilspy::top {

std::string gc_row_text(const GcFigures& g);

}  // namespace gilspy::top
