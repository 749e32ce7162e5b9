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
//   - PyTorch's legacy profiler (python3-torch without Kineto, export_chrome_trace): a bare array whose
//     program process is the string pid "CPU functions" and whose ts are µs after the profiler started, a
//     moment the file does not record. The GIL events go into "CPU functions" with numeric ts on the same
//     origin, which the user gives (--align-at).
//
// Each recording's lanes go into the profiler's process for its pid: the pid in the target's own PID
// namespace first (a profiler inside a container sees that one), then the host's, or what --pid-map says
// (a number or a string pid); each Python thread on a lane of its own (convert/merge_lanes.hpp). A lone
// recording merged into a legacy trace goes into its "CPU functions" process, the only program there is.
// Times: a recording's CLOCK_REALTIME anchor against the trace's ts 0: --align-at when given, else
// baseTimeNanoseconds (ts are µs after it), else the epoch itself (older Kineto, Ascend: absolute µs); a
// trace whose ts cannot be times since the epoch (before 2001) and that has neither is refused, saying why
// and naming --align-at. A recording that matches no process of the trace becomes a process of its own (and
// is reported); when none matches, nothing is written and the error points at --pid-map.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/chrome_trace.hpp"
#include "convert/trace_scan.hpp"

namespace gilspy::convert {

// --align-at: when the trace's ts 0 was, or when the first event named `marker` began, in ns since the epoch.
struct TimeAnchor {
  std::string marker;  // empty: ts 0
  int64_t ns = 0;
};

struct MergeOptions {
  std::string trace = {};  // the profiler's trace to merge into
  // GILPID (a recording's pid or ns_pid) -> the trace's pid as written on the command line: a number, or the
  // text of a string pid ("CPU functions").
  std::vector<std::pair<int64_t, std::string>> pid_map = {};
  std::optional<PidNamespace> pid_namespace =
      {};  // match only this pid of a recording (default: target's, then host's)
  mode_t mode = kDefaultOutputMode;
  bool salvage = false;
  bool frame_slices = true;  // as ConvertOptions::frame_slices
  std::optional<TimeAnchor> align_at = {};
};

struct MergedInput {
  bool matched = false;  // its lanes are in the profiler's process trace_pid (else: a process of its own)
  std::string
      matched_by;  // "pid", "ns_pid" (its own PID namespace), "--pid-map", "legacy" (the only process)
  std::string trace_pid_text;        // the string pid its lanes went into ("CPU functions"), else empty
  bool overlaps = false;             // its time span meets the trace's events
  int64_t start_ns = 0, end_ns = 0;  // the recording's span, ns since the epoch
};

struct MergeReport {
  ConvertReport convert;            // inputs (trace_pid: where its lanes went), GIL events written, output
  std::vector<MergedInput> merged;  // beside convert.inputs
  TraceShape shape = TraceShape::kObject;
  bool input_gzip = false, output_gzip = false;
  size_t trace_events = 0;                       // the profiler's events, all copied
  bool absolute_times = false;                   // the trace has no baseTimeNanoseconds: µs on the epoch
  bool aligned_by_option = false;                // its ts 0 came from --align-at
  int64_t trace_start_ns = 0, trace_end_ns = 0;  // the span of its events, ns since the epoch (0, 0: none)
  std::vector<std::pair<std::string, std::string>> trace_processes;  // pid (as text), process_name
};

// Throws Error(kBadInput) when TRACE is not a trace of either kind, when no recording matches a process of it
// (naming the pids on both sides and --pid-map), when --pid-map names a pid the trace lacks, when its times
// cannot be placed (relative, no --align-at) or --align-at's marker is not in it; Error(kIo),
// Error(kCorrupt) as convert_to_chrome_trace(). Nothing is left at `output` then.
MergeReport merge_into_trace(const std::vector<std::string>& inputs, const std::string& output,
                             const MergeOptions& options);

// "1234:1" -> {1234, "1"}; "1234:CPU functions" -> {1234, "CPU functions"}; throws Error(kUsage) for
// anything else (no colon, a GILPID that is not a pid, nothing after the colon).
std::pair<int64_t, std::string> parse_pid_map(const std::string& text);

// --align-at: "1733600000123456789" (ns since the epoch of the trace's ts 0) or "NAME@NS" (of the first event
// named NAME); throws Error(kUsage) for anything else.
TimeAnchor parse_align_at(const std::string& text);

}  // namespace gilspy::convert
