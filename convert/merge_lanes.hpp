#pragma once
// The lanes of one recording inside another program's process (convert --merge-into): each Python thread's
// GIL lane gets a tid of its own, never the thread's OS tid, whose lane holds the profiler's slices of that
// thread (a lane with both would overlap itself, and viewers drop slices then). The tid is kGilTidBase + the
// thread's id as the profiler knows it (1000003553 beside the profiler's 3553), moved on when the trace uses
// it already; the lane is named "GIL <tid> (<name>)" and sorts with the profiler's lane of the same thread.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "convert/lane_placement.hpp"

namespace gilspy::convert {

inline constexpr int64_t kGilTidBase = 1'000'000'000;

// `taken`: the tids already used in that process (the trace's, and lanes placed for earlier recordings); the
// placement adds its own. `namespace_ids`: the profiler saw the target's own PID namespace (a container), so
// the threads are named by their namespace tids.
std::unique_ptr<LanePlacement> merge_lanes(std::set<int64_t>& taken, bool namespace_ids);

// "MainThread" -> "MainThread"; "thread 3554 (pt_main)" -> "pt_main"; "thread 3554" -> "": what a GIL lane
// adds to its "GIL <tid>" (the recording names threads "thread <OS tid> (<comm>)").
std::string short_thread_name(int64_t tid, const std::string& name);

}  // namespace gilspy::convert
