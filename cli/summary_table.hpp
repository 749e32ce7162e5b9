#pragma once
// The thread table at the end of `gilspy record`, as rows before any text: the busiest threads first (hold +
// wait time), at most a screenful of them, short-lived threads of one name pattern taken together (a server
// that starts a thread per request has thousands, each worth nothing alone), and what was left out summed on
// one line. A process with 1 440 threads then still fits a terminal and names the threads that matter.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "raw/summary.hpp"

namespace gilspy::cli {

struct SummaryRow {
  int64_t tid = 0;      // a group: its busiest member's
  std::string name;     // target text (escape before printing); a group: the name pattern ("thread * (w-*)")
  size_t threads = 1;   // > 1: a group of short-lived threads
  int64_t life_ns = 0;  // summed over a group's members
  int64_t hold_ns = 0, wait_ns = 0;
  uint64_t holds = 0;
  int64_t longest_hold_ns = 0, longest_wait_ns = 0;
  double state_var_ns2 = -1;  // summed over a group's members; -1: not known for some member
  double hold_share() const;  // of the (summed) lifetime in the recording
  double wait_share() const;
  double share_ci95() const;  // the 95 % interval's half-width of both shares; -1: not known
};

struct SummaryTable {
  std::vector<SummaryRow> rows;  // busiest (hold + wait) first
  size_t total_threads = 0;      // every thread seen
  size_t rest_threads = 0;       // threads in no row
  int64_t rest_hold_ns = 0, rest_wait_ns = 0;
  int64_t rest_life_ns = 0;  // their lifetimes summed: the rest line's shares are of this, like a row's
  bool grouped = false;      // some row is a group
};

// A digit run becomes '*': "thread 4711 (worker-3)" -> "thread * (worker-*)".
std::string name_pattern(const std::string& name);

// `max_rows` 0: every thread on its own row (--threads all), sorted, nothing grouped. Otherwise: threads that
// lived less than half of `duration_ns` and share a name pattern with at least two others become one row,
// then the busiest `max_rows` rows are kept and the rest summed. `folded`: threads the summary folded as they
// ended (raw::SummaryBuilder::kKeptThreads), a row per pattern in either case (joined with the group of
// the same pattern).
SummaryTable build_summary_table(const std::vector<raw::ThreadSummary>& threads, int64_t duration_ns,
                                 size_t max_rows,
                                 const std::map<std::string, raw::FoldedThreads>& folded = {});

}  // namespace gilspy::cli
