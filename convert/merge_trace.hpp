#pragma once
// `gilspy convert -i GIL_...json [...] --merge-into TRACE -o OUT`: the GIL lanes of raw recordings added to a
// framework profiler's trace, so that one viewer shows both on one timeline.
//
//   - PyTorch profiler (Kineto) traces, .json or .json.gz (by content; the output is gzip when OUT ends in
//   .gz):
//     every original event and top-level member is kept byte for byte and in order ("rank": N stays spelled
//     as the profiler wrote it, for HTA's regex), except that "traceEvents" comes first (readers stream for
//     it); the GIL events follow the profiler's at the end of traceEvents, and a member "gilspy" at the end
//     says what was merged.
//   - Ascend (torch_npu) trace_view.json: a bare array of events; GIL events are appended to it with their ts
//   as
//     strings of absolute µs, as that file writes them (../shared/design.md, section 6).
//
// Each recording's lanes go into the profiler's process for its pid: the pid in the target's own PID
// namespace first (a profiler inside a container sees that one), then the host's, or what --pid-map says;
// each Python thread on a lane of its own (convert/merge_lanes.hpp). Times: a recording's CLOCK_REALTIME
// anchor against the trace's baseTimeNanoseconds (ts are µs after it), or against the epoch itself in traces
// without it (older Kineto, Ascend: absolute µs). A recording that matches no process of the trace becomes a
// process of its own (and is reported); when none matches, nothing is written and the error points at
// --pid-map.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/chrome_trace.hpp"
#include "convert/trace_scan.hpp"

namespace gilspy::convert {

struct MergeOptions {
  std::string trace = {};  // the profiler's trace to merge into
  std::vector<std::pair<int64_t, int64_t>> pid_map =
      {};  // GILPID (a recording's pid or ns_pid) -> the trace's pid
  std::optional<PidNamespace> pid_namespace =
      {};  // match only this pid of a recording (default: target's, then host's)
  mode_t mode = kDefaultOutputMode;
  bool salvage = false;
  bool frame_slices = true;  // as ConvertOptions::frame_slices
};

struct MergedInput {
  bool matched = false;    // its lanes are in the profiler's process trace_pid (else: a process of its own)
  std::string matched_by;  // "pid", "ns_pid" (its own PID namespace), "--pid-map"
  bool overlaps = false;   // its time span meets the trace's events
  int64_t start_ns = 0, end_ns = 0;  // the recording's span, ns since the epoch
};

struct MergeReport {
  ConvertReport convert;            // inputs (trace_pid: where its lanes went), GIL events written, output
  std::vector<MergedInput> merged;  // beside convert.inputs
  TraceShape shape = TraceShape::kObject;
  bool input_gzip = false, output_gzip = false;
  size_t trace_events = 0;                       // the profiler's events, all copied
  bool absolute_times = false;                   // the trace has no baseTimeNanoseconds: µs on the epoch
  int64_t trace_start_ns = 0, trace_end_ns = 0;  // the span of its events, ns since the epoch (0, 0: none)
  std::vector<std::pair<int64_t, std::string>> trace_processes;  // pid, process_name (for messages)
};

// Throws Error(kBadInput) when TRACE is not a trace of either kind, when no recording matches a process of it
// (naming the pids on both sides and --pid-map), when --pid-map names a pid the trace lacks; Error(kIo),
// Error(kCorrupt) as convert_to_chrome_trace(). Nothing is left at `output` then.
MergeReport merge_into_trace(const std::vector<std::string>& inputs, const std::string& output,
                             const MergeOptions& options);

// "1234:1" -> {1234, 1}; throws Error(kUsage) for anything else.
std::pair<int64_t, int64_t> parse_pid_map(const std::string& text);

}  // namespace gilspy::convert
