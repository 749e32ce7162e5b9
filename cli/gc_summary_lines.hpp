#pragma once
// The GC lines of `gilspy record`'s end summary (issue 9): collections per generation, total and longest
// pause, share of the recording spent in collections, share of all GIL waiting that happened during them,
// time with gc.disable() in force; and with --gc-threshold-ms N, every collection longer than N ms with its
// time offset and generation (the "step 2900 ms instead of 2770 ms" spikes of a training loop, at a glance).
#include <string>

#include "raw/summary.hpp"

namespace gilspy::cli {

// `why_off`: why the GC was not read (GcTracker::why_off()), "" when it was. Appends to `out`.
void gc_summary_lines(std::string& out, const raw::SummaryBuilder& summary, const std::string& why_off);

}  // namespace gilspy::cli
