#pragma once
// The sink of `gilspy top`: adapts the session's records to the window model (cli/top/top_model.hpp) and
// hands out a snapshot per stats tick of the poll loop. The session's stats tick is set to the refresh
// interval, so each snapshot closes the window exactly at a tick: after that tick's Stats and ThreadState
// records (the open holds and waits) and before any later record.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/sink.hpp"
#include "cli/stack_texts.hpp"
#include "cli/top/top_model.hpp"
#include "raw/stack_summary.hpp"

namespace gilspy::cli {

class ScreenSink final : public Sink {
 public:
  // `on_snapshot` gets each snapshot, on the session's thread; `last` is set for the one finish() takes when
  // the targets exited (the model then shows them ended).
  using OnSnapshot = std::function<void(top::TopSnapshot snapshot, bool last)>;
  explicit ScreenSink(OnSnapshot on_snapshot);

  void start(const SessionTarget& target) override;
  void record(const SessionTarget& target, const raw::Record& r) override;
  void stats(const LiveStats& live) override;
  void finish(const SessionEnd& end) override;

  // Totals and the window restart now (a key): a tick still waiting is shown first.
  void reset();
  // Now on the session's timeline (0 before the first target started).
  int64_t now_ns() const;

 private:
  static top::Role role_of(raw::GilRole r);
  void take_snapshot(bool last);
  void flush_tick();  // the tick whose records were delivered, if any, becomes a snapshot
  // The CPU columns (screen_sink_cpu.cpp): where each target's perf values sit, and its pieces into the
  // model.
  void counter_setup(raw::TargetId id, const raw::CounterSetup& s);
  void counter_sample(raw::TargetId id, const raw::CounterSample& s);
  struct CounterIndex {
    int cycles = -1, instructions = -1, cache_misses = -1, branch_misses = -1;
  };
  std::map<raw::TargetId, CounterIndex> counter_index_;

  OnSnapshot on_snapshot_;
  top::TopModel model_{0};
  std::optional<top::TopSnapshot>
      shown_;              // the last snapshot handed out (the last screen may keep its interval)
  int64_t anchor_ns_ = 0;  // CLOCK_MONOTONIC of the session's time 0
  bool anchored_ = false;
  // A stats tick whose records are coming in: the snapshot is taken at its time once they are all in.
  std::optional<int64_t> tick_ns_;
  bool tick_in_this_drain_ = false;
  // Per target: threads alive, and when the last one ended. A target none of whose threads lives is over.
  struct Liveness {
    std::set<int64_t> threads;
    int64_t last_end_ns = -1;
    bool ended = false;
  };
  std::map<raw::TargetId, Liveness> live_;
  StackTexts stacks_;  // each thread's current function, from its stack samples

  // The function view (screen_sink_functions.cpp): each target's holds, waits and stretches without the GIL
  // cut at their stack samples, into the model by function. A hold, a wait or a stretch without the GIL may
  // last longer than a window (a thread blocked in recv, the whole run): what of it is open is credited at
  // each tick, and when it ends only what came after the last tick.
  struct FunctionStacks {
    std::unique_ptr<raw::StackPieces> pieces;
    std::unordered_map<uint32_t, std::vector<std::string>> texts;  // stack -> its functions, innermost first
  };
  void start_functions(raw::TargetId id);
  void function_pieces(raw::TargetId id, const std::vector<raw::StackPiece>& pieces, int64_t from_ns);
  void open_function_pieces(int64_t tick_ns);
  const std::vector<std::string>& function_texts(FunctionStacks& f, uint32_t stack);
  std::map<raw::TargetId, FunctionStacks> function_stacks_;
  int64_t functions_credited_ns_ = 0;  // the last tick the open stretches were credited up to
};

}  // namespace gilspy::cli
