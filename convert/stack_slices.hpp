#pragma once
// The Python stacks of a trace: for each hold_gil / take_gil slice, the args that name its innermost function
// and carry its stack, and the frames as nested slices under it (category "stack"), so a viewer shows the
// code inside the hold: a hold sampled at its start and every 10 ms shows, level by level, the frames each
// piece of it ran in, merged where consecutive pieces share a frame. Each level ends (level + 2) ns before
// the one above it, so every child lies strictly inside its parent in the viewers' double arithmetic
// (tests/support/trace_check.hpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/json_writer.hpp"
#include "raw/stack_summary.hpp"

namespace gilspy::convert {

// A frame's slice under a GIL slice (category "stack"), named by the frame's qualified name.
struct FrameSlice {
  raw::FrameDef frame;
  int64_t start_ns = 0, end_ns = 0;
  int depth = 0;                         // 0: the outermost frame, right under the GIL slice
  void write_args(JsonWriter& w) const;  // file, first_line, line
};

// A GIL slice's args: the function it began in (its first stack sample's innermost frame) and that stack.
struct StackArgs {
  raw::FrameDef inner;
  std::vector<std::string> stack = {};  // "qualname (file:line)", innermost first
  bool truncated = false;               // the stack had more frames than were read
  size_t samples = 0;                   // the interval's stack samples
  void write(JsonWriter& w) const;
};

struct IntervalStacks {
  std::optional<StackArgs> args;  // none without a stack sample
  std::vector<FrameSlice> frames;
};

// A stretch in which a thread neither held nor waited, with the stacks it was read in (record --all-threads).
struct ReleasedStretch {
  int64_t tid = 0, start_ns = 0, end_ns = 0;
  IntervalStacks stacks;
};

class StackSlices {
 public:
  StackSlices();
  // Every record of the input, in order; a Hold or Wait then has its stacks ready for take().
  void add(const raw::Record& r);
  // The stacks of the interval whose record was just added.
  IntervalStacks take();
  // The released stretches that records added so far closed (each ends where its thread's next interval
  // begins, or where it ended), in order; then they are forgotten.
  std::vector<ReleasedStretch> take_released();
  // At the end of the input: the stretches still open closed at `end_ns`, for take_released().
  void finish(int64_t end_ns) { pieces_.finish(end_ns); }

 private:
  using PieceFrames = std::vector<std::vector<const raw::FrameDef*>>;  // per piece, outermost first
  IntervalStacks stacks_of(const std::vector<raw::StackPiece>& pieces) const;
  PieceFrames piece_frames(const std::vector<raw::StackPiece>& pieces) const;
  StackArgs stack_args(const std::vector<raw::StackPiece>& pieces, const PieceFrames& frames) const;
  std::vector<FrameSlice> frame_runs(const std::vector<raw::StackPiece>& pieces,
                                     const PieceFrames& frames) const;
  void on_interval(const std::vector<raw::StackPiece>& pieces);

  raw::StackPieces pieces_;
  std::vector<raw::StackPiece> last_;
  std::vector<ReleasedStretch> released_;
};

}  // namespace gilspy::convert
