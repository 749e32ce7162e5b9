#pragma once
// Raw recordings (one file per target process, raw/raw_format.hpp) to one Chrome Trace JSON file, the
// object form that chrome://tracing, Perfetto and PyTorch's profiler (Kineto) use:
//
//   {"traceEvents":[
//   {"ph":"M","name":"process_name","pid":1234,"tid":0,"ts":0.000,"args":{"name":"python 3.12.1 pid 1234
//   ..."}},
//   {"ph":"X","cat":"gil","name":"hold_gil","pid":1234,"tid":1234,"ts":12.345,"dur":6.789},
//   {"ph":"I","s":"t","cat":"gil","name":"drop_gil","pid":1234,"tid":1234,"ts":19.134},
//   {"ph":"X","cat":"gil","name":"take_gil","pid":1234,"tid":1240,"ts":13.000,"dur":6.134},
//   {"ph":"C","cat":"gil","name":"gil_waiters","pid":1234,"tid":0,"ts":13.500,"args":{"waiters":1}},
//   {"ph":"X","cat":"gil","name":"gil_waiters 1","pid":1234,"tid":4194304,"ts":13.500,"dur":5.634,
//    "args":{"waiters":1}},
//   ...],
//   "displayTimeUnit":"ms",
//   "baseTimeNanoseconds":1719853884123456789,
//   "otherData":{"gilspy_version":"0.1.0","time_base":"...","inputs":[{"path":...,"pid":...,"summary":{...}}]}}
//
// ts and dur are microseconds with exactly three decimals (nanosecond precision). ts counts from
// baseTimeNanoseconds, the earliest CLOCK_REALTIME anchor among the inputs, as Kineto does: an event's Unix
// time is baseTimeNanoseconds / 1000 + ts µs, so the lanes line up with a PyTorch profiler trace of the same
// run (same pid, same OS tids). One Chrome process per input (pid = the target's pid; a pid that two inputs
// share, say from two hosts, is moved up by multiples of kPidOffset for the later ones), one lane per Python
// thread (tid = OS tid), a process-level lane (tid 0) for metadata and the gil_waiters counter, and a lane
// "GIL waiters" (tid kWaitersTid) with the counter as slices, for viewers that draw no counters (DevTools).
// Only X, I, C and M events: what Perfetto, DevTools and MindStudio Insight all read.
//
// On every lane, ts + dur of an event, added as doubles the way JavaScript viewers add them, is <= the ts of
// the next (reader_safe_dur_ns, convert/trace_time.hpp); DevTools drops a slice that starts inside the
// previous one and ends after it.
//
// Streaming: a first pass reads only each input's metadata, the second streams its events straight to the
// output (convert/input_events.hpp, each event through convert/trace_events.hpp); memory grows with the
// number of threads, not of events. The output is created unnamed (O_TMPFILE; else under a random
// `<output>.<hex>.tmp`) beside its final name and takes that name only when complete, never through a link
// (base/output_file.hpp); mode 0600 unless asked otherwise.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/output_file.hpp"
#include "convert/trace_time.hpp"
#include "raw/raw_format.hpp"

namespace gilspy::convert {

// Added to a pid that an earlier input already uses (once per clash), so that the two stay apart.
inline constexpr int64_t kPidOffset = 10'000'000;

// The lane of a process's "gil_waiters N" slices. Linux thread ids stay below PID_MAX_LIMIT (2^22), so no
// thread has this one; tid 0 is avoided because Perfetto files tid 0 under the idle task.
inline constexpr int64_t kWaitersTid = 4'194'304;

struct ConvertInputReport {
  std::string path;
  raw::Meta meta;
  int64_t trace_pid = 0;       // the pid of its process in the trace (meta.pid unless that clashed)
  std::string trace_pid_text;  // merged into a string pid ("CPU functions"): it, written for trace_pid
  size_t records = 0;          // raw events read
  size_t events = 0;           // trace events written for it
  size_t adjusted = 0;    // slices or counter samples moved so that a lane stays ordered and non-overlapping
  bool complete = false;  // false: a recording cut short, converted up to its last complete event
  bool corrupt = false;   // (salvage only) a damaged file, converted up to the damage
  std::string problem;    // when !complete: what was wrong, and where
  uint64_t bytes = 0;     // when !complete: the input's length
  uint64_t damage_offset = 0;    // when corrupt: where reading stopped (byte from 0)
  uint64_t unread_lines = 0;     // when corrupt: lines after it that were not converted
  bool summary_rebuilt = false;  // the file had no summary; rebuilt from its events
  bool namespace_ids = false;    // shown with its target's own pid and tids (--pid-namespace target)
};

struct ConvertReport {
  std::vector<ConvertInputReport> inputs;
  size_t events_written = 0;
  std::string output;
  int64_t base_time_ns = 0;  // baseTimeNanoseconds
};

// Which pid and tids a container's recording shows (its meta has ns_pid): the host's, as gilspy saw them, or
// the target's own namespace's (NSpid), as the program and a profiler inside the container saw them.
enum class PidNamespace { kHost, kTarget };

struct ConvertOptions {
  mode_t mode = kDefaultOutputMode;  // of the output (base/output_file.hpp)
  bool salvage = false;              // convert a corrupt input up to its damage instead of refusing it
  PidNamespace pid_namespace = PidNamespace::kHost;
  bool frame_slices = true;  // false: no frame slices under the holds and waits (their stacks stay in args)
};

// Converts and merges `inputs` into `output`, one process per input in rank order (stable: equal ranks keep
// the order given). Throws Error(kIo) for an input that cannot be opened or an
// output that cannot be written (or whose name is taken by a link, another user's file, ...),
// Error(kBadInput) (from raw::read, naming the file and the place) for an input that is not a raw recording,
// Error(kCorrupt) for one damaged after its start (unless options.salvage); then no output is left behind. A
// recording cut short is not an error: it is converted as far as it goes and reported with complete == false.
ConvertReport convert_to_chrome_trace(const std::vector<std::string>& inputs, const std::string& output,
                                      const ConvertOptions& options = {});

// Where `gilspy convert` writes when given one input and no -o: "dir/X.json" (or "dir/X.json.partial") ->
// "dir/X.trace.json"; another name gets ".trace.json" appended.
std::string default_output_path(const std::string& input);

}  // namespace gilspy::convert
