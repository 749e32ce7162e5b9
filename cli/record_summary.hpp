#pragma once
// What `gilspy record` prints about each target at the end: where the files went, how well the poll loop kept
// its rate (late polls defined, their p99 and max, advice when the machine could not keep up), what the
// coverage and the shares are shares of, and the busiest threads (summary_table.hpp). Target text is escaped.
#include <cstddef>
#include <string>

#include "cli/raw_sink.hpp"
#include "raw/summary.hpp"

namespace gilspy::cli {

struct SummaryOptions {
  double rate_asked = 0;
  bool quiet = false;       // only where the files went
  size_t max_threads = 20;  // rows in the thread table; 0: every thread (--threads all)
};

// One target's figures as the summary needs them (a FinishedTarget without the session).
struct SummaryInput {
  int pid = 0;
  int64_t rank = 0;
  std::string python_version;  // from the target's binary: escaped before printing
  std::string raw_path, trace_path;
  const raw::SummaryBuilder& summary;
  const raw::LoopFigures& loop;
  std::string gc_why_off = {};  // why the GC state was not read ("" when it was)
  // Why the raw file (raw_path: its .partial) or the trace could not be written; "" when they were. The raw
  // file's events: recorded, and wholly in the file.
  std::string raw_problem = {}, trace_problem = {};
  uint64_t events = 0, events_in_file = 0;
};

std::string format_target_summary(const SummaryInput& in, const SummaryOptions& o);

// Prints format_target_summary() to stdout and flushes it (the end of a recording is news even when stdout is
// a pipe and the launched program runs on).
void print_target_summary(const FinishedTarget& done, const SummaryOptions& o);

}  // namespace gilspy::cli
