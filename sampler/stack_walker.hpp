#pragma once
// One thread's Python stack, read from the target: from the thread state's innermost frame along the
// previous-frame pointers, each frame's code object (through the code cache) and the line of its current
// instruction. Allocation-free; the buffers hold `max_depth` frames.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sampler/code_cache.hpp"
#include "sampler/remote_objects.hpp"
#include "sampler/stack_tables.hpp"

namespace gilspy::sampler {

enum class WalkResult : uint8_t {
  kOk,
  kEmpty,    // no Python frame (a thread between two calls, or not started)
  kTorn,     // a frame or its code could not be read where it was a moment ago: the thread ran on
  kInvalid,  // what was read is not a stack (a bad code object, an impossible line)
  kBudget,   // out of time before the walk ended
  kFull,     // the string table is full
};

struct WalkOutput {
  size_t depth = 0;          // frames in `frames`, innermost first
  bool truncated = false;    // the thread had more than max_depth frames
  uint64_t first_frame = 0;  // the innermost frame's address: the torn-read check compares it afterwards
  size_t frames_read = 0;
};

class StackWalker {
 public:
  StackWalker(RemoteObjects& objects, CodeCache& codes, size_t max_depth);

  // The innermost frame of thread state `tstate` as it is now (0 when none, or unreadable: *ok false).
  uint64_t current_frame(uint64_t tstate, bool* ok);
  // Walks the stack of `tstate`; the frames go to frames() (FrameKeys: string ids, line, first line).
  // Checks the clock every few frames and gives up at `deadline` (CLOCK_MONOTONIC ns).
  WalkResult walk(uint64_t tstate, int64_t deadline, WalkOutput* out);
  std::span<const FrameKey> frames() const { return {keys_.data(), depth_}; }

 private:
  RemoteObjects& objects_;
  CodeCache& codes_;
  const layouts::StackLayout& layout_;
  size_t max_depth_;
  ZeroedArray<uint64_t> code_addrs_;
  ZeroedArray<int64_t> instrs_;
  ZeroedArray<FrameKey> keys_;
  // The kept frames' addresses and the links read from them (previous, code: two per frame), read again
  // at the end of a walk into recheck_ through regions_ (one process_vm_readv).
  ZeroedArray<uint64_t> frame_addrs_;
  ZeroedArray<uint64_t> links_;
  ZeroedArray<uint64_t> recheck_;
  ZeroedArray<ReadRegion> regions_;
  size_t depth_ = 0;
};

}  // namespace gilspy::sampler
