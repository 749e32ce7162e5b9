#pragma once
// Which code held the GIL while others waited, and where threads waited, from a stream of raw records: the
// "top GIL holders while others waited" and "where threads wait" of `record`'s summary and of the raw file's
// summary JSON, and the weights of `convert --format collapsed`.
//
// A hold or wait is matched with the stack samples taken during it (StackSample.since == its ts; the samples
// come first, the interval when it ends). A hold is cut at its samples: the first sample's stack covers the
// hold from its start to the second sample, and so on to the end (a hold of 38 ms sampled every 10 ms is four
// pieces). How many threads waited meanwhile comes from the gil_waiters counter (Waiters records).
//
// Samples of threads that neither held nor waited (record --all-threads: role kReleased) make released
// stretches: from the sample's `since` (not before the thread's last hold or wait ended) to the thread's
// next hold, wait or end, cut at each later sample the same way. A thread without the GIL runs no Python, so
// one sample covers its stretch exactly. A stretch still open when the records end is closed by finish(), or
// looked at without closing it by open_released().
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/records.hpp"

namespace gilspy::raw {

// The gil_waiters counter as a step function of time, kept for a bounded past (records come in time order,
// intervals when they end).
class WaiterHistory {
 public:
  void add(const Waiters& w);
  // Over [from, to): the time at least one thread waited, and the integral of the count (thread-ns).
  void integrate(int64_t from, int64_t to, int64_t* contended_ns, double* waiter_ns) const;

 private:
  std::deque<std::pair<int64_t, uint64_t>> steps_;  // (from ts, count), ts increasing
  static constexpr int64_t kKeepNs =
      600'000'000'000;  // ten minutes: longer holds are integrated as if 0 before
};

// A stack as text, outermost first, for a folded line: "file:function;...".
struct ResolvedFrame {
  std::string qualname, file;
  int32_t line = 0, first_line = 0;
};

// One piece of an interval with the stack that covers it.
struct StackPiece {
  int64_t tid = 0;
  GilRole role = GilRole::kHolding;
  int64_t from = 0, to = 0;  // ns, on the recording's timeline
  uint32_t stack = 0;        // 0: no sample during the interval
  int64_t contended_ns = 0;  // holds: the part of [from, to) during which at least one thread waited
  double waiter_ns = 0;      // holds: the waiters counter integrated over it
};

// Matches samples with intervals and cuts each interval into pieces, in time order; calls `on_interval` with
// them as each interval ends. Feed it every record.
class StackPieces {
 public:
  using OnInterval = std::function<void(const std::vector<StackPiece>& pieces)>;
  explicit StackPieces(OnInterval on_interval) : on_interval_(std::move(on_interval)) {}
  void add(const Record& r);
  // The released stretches still open, as pieces up to `end` (one on_interval each), left open.
  void open_released(int64_t end, const OnInterval& on_interval) const;
  // ...and the holds and waits still open that have a sample (from the sample's `since`, cut at each later
  // one), each as its own on_interval: what a live view credits to the window so far.
  void open_intervals(int64_t end, const OnInterval& on_interval) const;
  // ...and closed at `end`, through the callback given at construction.
  void finish(int64_t end);
  const std::unordered_map<uint32_t, FrameDef>& frames() const { return frames_; }
  const std::unordered_map<uint32_t, StackDef>& stacks() const { return stacks_; }
  // The innermost frame of a stack; nullptr for stack 0 or an unknown one.
  const FrameDef* innermost(uint32_t stack) const;

 private:
  void interval(GilRole role, int64_t tid, int64_t ts, int64_t dur);
  // The thread's released stretch up to `to` (its next interval's start, or its end) through on_interval_;
  // its released samples leave pending_.
  void close_released(int64_t tid, int64_t to);
  // The pieces of thread tid's released samples in `samples`, from no earlier than `floor` to `to`.
  static void released_pieces(int64_t tid, const std::vector<StackSample>& samples, int64_t floor, int64_t to,
                              std::vector<StackPiece>* out);
  OnInterval on_interval_;
  std::vector<StackPiece> pieces_;  // reused
  std::unordered_map<uint32_t, FrameDef> frames_;
  std::unordered_map<uint32_t, StackDef> stacks_;
  std::unordered_map<int64_t, std::vector<StackSample>> pending_;  // per thread, in time order
  std::unordered_map<int64_t, int64_t> last_end_;  // per thread: where its latest hold or wait ended
  WaiterHistory waiters_;
};

// Where a hold or wait whose stack was not read is counted: in place of its innermost function.
inline constexpr const char* kNoStackSample = "[no stack sample]";

struct HolderRow {
  std::string function, file;  // the innermost frame's qualname and file; "[no stack sample]" when none
  int32_t first_line = 0;
  int64_t hold_ns = 0, contended_ns = 0, longest_ns = 0;
  uint64_t holds = 0;
  double mean_waiters = 0;  // time-weighted over hold_ns
};

struct WaitSiteRow {
  std::string function, file;
  int32_t line = 0;
  int64_t wait_ns = 0, longest_ns = 0;
  uint64_t waits = 0;
};

// A call site where threads spent time neither holding nor waiting (record --all-threads): in C, in I/O,
// asleep.
struct ReleasedSiteRow {
  std::string function, file;
  int32_t line = 0;
  int64_t released_ns = 0, longest_ns = 0;
  uint64_t stretches = 0;  // released stretches that spent time there (a stretch read again counts once)
};

class StackSummary {
 public:
  StackSummary();
  void add(const Record& r);
  bool any_samples() const { return samples_ > 0; }
  const StackStats& costs() const { return costs_; }
  // The n functions that held the GIL longest while others waited (then by hold time), and the n call sites
  // threads waited at longest.
  std::vector<HolderRow> top_holders(size_t n) const;
  std::vector<WaitSiteRow> wait_sites(size_t n) const;
  // The n call sites threads spent longest at without the GIL, the stretches still open counted to `end_ns`
  // (the recording's timeline); empty without --all-threads.
  std::vector<ReleasedSiteRow> released_sites(size_t n, int64_t end_ns) const;
  nlohmann::json to_json(int64_t duration_ns, int64_t end_ns) const;

 private:
  StackPieces pieces_;
  std::map<std::string, HolderRow> holders_;
  std::map<std::string, WaitSiteRow> waits_;
  std::map<std::string, ReleasedSiteRow> released_;
  void on_interval(const std::vector<StackPiece>& pieces);
  // One released stretch's pieces into `rows`.
  void add_released(std::map<std::string, ReleasedSiteRow>& rows,
                    const std::vector<StackPiece>& pieces) const;
  uint64_t samples_ = 0;
  StackStats costs_;
};

}  // namespace gilspy::raw
