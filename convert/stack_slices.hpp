#pragma once
// The Python stacks of a trace: for each hold_gil / take_gil slice, the args that name its innermost function
// and carry its stack, and the frames as nested slices under it (category "stack"), so a viewer shows the
// code inside the hold: a hold sampled at its start and every 10 ms shows, level by level, the frames each
// piece of it ran in, merged where consecutive pieces share a frame. Each level ends (level + 2) ns before
// the one above it, so every child lies strictly inside its parent in the viewers' double arithmetic
// (tests/support/trace_check.hpp).
#include <cstdint>
#include <string>
#include <vector>

#include "raw/stack_summary.hpp"

namespace gilspy::convert {

struct FrameSlice {
  std::string name_json;  // a JSON string: the frame's qualified name
  std::string args_json;  // {"file":...,"line":...}
  int64_t start_ns = 0, end_ns = 0;
  int depth = 0;  // 0: the outermost frame, right under the GIL slice
};

struct IntervalStacks {
  std::string args_json;  // the GIL slice's args; empty without a stack sample
  std::vector<FrameSlice> frames;
};

class StackSlices {
 public:
  StackSlices();
  // Every record of the input, in order; a Hold or Wait then has its stacks ready for take().
  void add(const raw::Record& r);
  // The stacks of the interval whose record was just added.
  IntervalStacks take();

 private:
  raw::StackPieces pieces_;
  std::vector<raw::StackPiece> last_;
};

}  // namespace gilspy::convert
