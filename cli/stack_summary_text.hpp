#pragma once
// The end summary's "which code" part: the functions that held the GIL longest while other threads waited,
// the call sites threads waited at longest, and what reading the stacks cost (raw/stack_summary.hpp).
// Function and file names come from the target: escaped here.
#include <cstdint>
#include <string>

#include "raw/stack_summary.hpp"

namespace gilspy::cli {

// At most 1 + 2 * (2 + rows) lines.
void stack_summary_lines(std::string& out, const raw::StackSummary& stacks, int64_t duration_ns,
                         size_t rows = 4);

}  // namespace gilspy::cli
