#pragma once
// The live status line of `gilspy record` on a terminal: elapsed time, polls and their rate, late polls,
// hand-offs seen / happened, redrawn every fifth drain (250 ms) and cleared at the end.
#include <string>
#include <vector>

#include "cli/sink.hpp"

namespace gilspy::cli {

class StatusLineSink final : public Sink {
 public:
  void start(const SessionTarget& target) override { targets_.push_back(&target); }
  void record(const SessionTarget&, const raw::Record&) override {}
  void stats(const LiveStats& live) override;
  void finish(const SessionEnd&) override;

 private:
  void put(const std::string& text);
  std::vector<const SessionTarget*> targets_;
  int calls_ = 0;
  bool gone_ = false;  // stderr could not be written (terminal closed): print no more
};

}  // namespace gilspy::cli
