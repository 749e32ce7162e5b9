#pragma once
// The structural check every Chrome trace the tests produce goes through (unit tests of convert directly,
// the end-to-end and viewer tests through the gilspy_trace_check executable): the rules that make the file
// read the same in DevTools, Perfetto and MindStudio Insight, checked on the numbers as a JavaScript viewer
// reads them (JSON.parse's doubles), not as gilspy meant them.
//
// - The document is {"traceEvents":[...], ...} or a bare array of events.
// - Events are "X", "I", "C" or "M" (MindStudio reads no "i", DevTools draws no "i"), with integer pid and
//   tid and, but for "M", a number ts; an "X" has a number dur >= 0.
// - On each lane (pid, tid), the "X" and "I" events ordered by start follow one another:
//   ts_i + dur_i <= ts_{i+1}, added as doubles, unless a gc or frame "X" lies wholly inside the one before
//   (ends, as ts + dur in doubles, no later than it: a gc slice inside its hold_gil, a Python frame slice
//   (cat "stack") inside its hold_gil / take_gil or its caller's frame). DevTools' trace engine drops an
//   entry that starts inside the previous one and ends after it, and a one-ulp overshoot is enough; an
//   instant inside a slice is an error.
// - No slice contradicts another: a gc slice on a thread's lane has the times of a collection on its
//   process's GC lane (or lies within it, marked "held_part": the part of it that ran in one hold).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gilspy::test {

struct TraceCheckResult {
  size_t events = 0;  // X and I events on lanes
  size_t lanes = 0;
  size_t adjacent_pairs = 0;
  size_t problem_count = 0;
  std::vector<std::string> problems;  // the first kMaxProblems, one line each
  bool ok() const { return problem_count == 0; }
};

inline constexpr size_t kMaxProblems = 20;

struct TraceCheckOptions {
  // A trace gilspy merged its lanes into (convert --merge-into): only gilspy's events (cat "gil", and its
  // Python frames, cat "stack") are held to
  // the rules above, the profiler's own are as the profiler wrote them ("i", "s", "f", string pids); a ts may
  // be a string of decimal µs, as Ascend's trace_view.json writes it, and a pid the profiler's string pid
  // ("CPU functions", PyTorch's legacy profiler).
  bool merged = false;
};

TraceCheckResult check_chrome_trace(std::string_view text, const TraceCheckOptions& options = {});

}  // namespace gilspy::test
