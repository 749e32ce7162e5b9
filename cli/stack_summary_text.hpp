#pragma once
// The end summary's "which code" part: the functions that held the GIL longest while other threads waited,
// the call sites threads waited at longest, with --all-threads where threads spent their time without the
// GIL, and what reading the stacks cost (raw/stack_summary.hpp). Function and file names come from the
// target: escaped here.
#include <cstdint>
#include <string>

#include "raw/stack_summary.hpp"

namespace gilspy::cli {

// At most 1 + 3 * (2 + rows) lines. `end_ns`: the recording's end on its timeline (released stretches still
// open count to there).
void stack_summary_lines(std::string& out, const raw::StackSummary& stacks, int64_t duration_ns,
                         int64_t end_ns, size_t rows = 4);

}  // namespace gilspy::cli
