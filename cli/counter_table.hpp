#pragma once
// The end summary's CPU table: for the threads of the thread table (summary_table.hpp), what the CPU did
// while each held the GIL, waited for it, or ran without it (time on a CPU, run-queue delay, switches; IPC
// and cache / branch misses per 1000 instructions where perf counted them), its voluntary / involuntary
// switches, and its preempted holds. README "What the CPU does meanwhile" says what each figure means for a
// GIL problem.
#include <cstddef>
#include <string>

#include "raw/summary.hpp"

namespace gilspy::cli {

// Appends the table (nothing when the recording has no counter records: an older file).
void append_counter_table(std::string& out, const raw::SummaryBuilder& summary, size_t max_threads);

}  // namespace gilspy::cli
