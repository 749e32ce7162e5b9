#pragma once
// Raw recordings to folded stacks ("outer;...;inner N" lines, the input of flamegraph.pl, inferno and
// speedscope): which code held the GIL, weighted by
// - hold: the time it held the GIL,
// - contention (the default): the time it held the GIL while at least one other thread waited for it,
// - wait: the time threads waited for the GIL at each call site (the stack sampled when the wait began),
// - released: the time threads spent neither holding nor waiting (in C, I/O, asleep) at each stack, from a
//   recording made with --all-threads,
// - all: hold + wait + released: where the threads spent their time, whatever their GIL role (py-spy's
//   --idle view, with the GIL's part in it).
// Weights are integer microseconds. Holds and waits without a stack sample (the read was skipped or torn) go
// under "[no stack sample]", so the weights add up to the recording's. Several inputs add up.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/output_file.hpp"
#include "raw/raw_format.hpp"

namespace gilspy::convert {

enum class FoldWeight { kHold, kContention, kWait, kReleased, kAll };

struct CollapsedOptions {
  FoldWeight weight = FoldWeight::kContention;
  mode_t mode = kDefaultOutputMode;
  bool salvage = false;
};

struct CollapsedReport {
  size_t lines = 0;                     // distinct stacks written
  uint64_t total_us = 0;                // the sum of the weights
  uint64_t unattributed_us = 0;         // under "[no stack sample]"
  size_t stack_samples = 0;             // in the inputs
  std::vector<std::string> incomplete;  // inputs cut short or salvaged
};

// The inputs' stacks and their weights in ns under each of `weights`, keyed by the folded line's stack text
// ("outer;...;inner"), in one pass over the inputs; fills the report's stack_samples and incomplete. Throws
// as convert_to_collapsed().
using FoldedWeights = std::map<std::string, int64_t>;
std::vector<FoldedWeights> fold_weights(const std::vector<std::string>& inputs,
                                        const std::vector<FoldWeight>& weights, bool salvage,
                                        CollapsedReport& report);

// Throws as convert_to_chrome_trace does (kIo, kBadInput, kCorrupt); nothing is left behind on failure.
CollapsedReport convert_to_collapsed(const std::vector<std::string>& inputs, const std::string& output,
                                     const CollapsedOptions& options = {});

// "X.json" -> "X.folded" (and ".partial" dropped), as default_output_path() does for traces.
std::string default_collapsed_path(const std::string& input);

}  // namespace gilspy::convert
