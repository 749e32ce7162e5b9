#pragma once
// One thread's Python stack, read from the target: from the thread state's innermost frame along the
// previous-frame pointers, each frame's code object (through the code cache) and the line of its current
// instruction. Allocation-free; the buffers hold `max_depth` frames.
//
// Frames are read a page at a time (a window: from the start of the frame's page to the frame's end). 3.11+
// keeps a thread's frames side by side in its data stack, each caller below its callee, so the window of the
// innermost frame usually holds the whole chain: one process_vm_readv instead of one per frame. A read costs
// about the same for a page as for 100 bytes (the kernel's cost is per call and per page pinned), and a
// stack read costs the target nothing, but the poll thread's CPU is what --cpu-budget and the stack share
// limit. A frame outside every window read so far opens another; past kMaxWindows, frames are read alone.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "sampler/stacks/code_cache.hpp"
#include "sampler/stacks/remote_objects.hpp"
#include "sampler/stacks/stack_tables.hpp"

namespace gilspy::sampler {

enum class WalkResult : uint8_t {
  kOk,
  kEmpty,    // no Python frame (a thread between two calls, or not started)
  kTorn,     // a frame or its code could not be read where it was a moment ago: the thread ran on
  kInvalid,  // what was read is not a stack (a bad code object, an impossible line)
  kBudget,   // out of time before the walk ended
  kFull,     // the string table is full
};

// Where a thread's innermost frame was when its stack was last read (0: unknown): a guess for the next read.
struct FrameGuess {
  uint64_t frame = 0;
  uint64_t cframe = 0;  // 3.11-3.12: the _PyCFrame it was reached through
};

struct WalkOutput {
  size_t depth = 0;          // frames in `frames`, innermost first
  bool truncated = false;    // the thread had more than max_depth frames
  uint64_t first_frame = 0;  // the innermost frame's address
  size_t frames_read = 0;
};

class StackWalker {
 public:
  StackWalker(RemoteObjects& objects, CodeCache& codes, size_t max_depth);

  static constexpr size_t kMaxAlso = 4;  // regions a caller may add to the first and the last read

  // The innermost frame of thread state `tstate` as it is now (0 when none) into *frame; `also` (at most
  // kMaxAlso regions: the caller's look at the GIL) is read in the same process_vm_readv. False when any of
  // it could not be read. With a `guess` (where this thread's frame was at its last read), the same read
  // also takes the guessed _PyCFrame's frame pointer and the guessed frame's window: a thread that waits or
  // loops where it did before (most reads: a waiter blocks at its call again, a holder resamples the same
  // loop) is then walked from that window, and its read costs one process_vm_readv fewer (two on 3.11-3.12,
  // whose frame pointer is behind the _PyCFrame). A wrong guess costs a page more in the one read.
  bool current_frame(uint64_t tstate, uint64_t* frame, std::span<const ReadRegion> also = {},
                     FrameGuess guess = {});
  // What current_frame() found, as the guess for the thread's next read.
  FrameGuess found(uint64_t frame) const { return {frame, cframe_}; }
  uint64_t guesses_taken() const { return guesses_taken_; }  // reads walked from a guessed window
  // Walks the stack of `tstate` from `frame` (what current_frame() read); the frames go to frames()
  // (FrameKeys: string ids, line, first line). Checks the clock every few frames and gives up at `deadline`
  // (CLOCK_MONOTONIC ns). Its last read checks the chain, the thread's frame pointer and `after` (at most
  // kMaxAlso regions, the caller's second look) at once: a frame pointer that moved, or a link that changed,
  // is kTorn.
  WalkResult walk_from(uint64_t tstate, uint64_t frame, int64_t deadline, WalkOutput* out,
                       std::span<const ReadRegion> after = {});
  // Both: the frame pointer, then the walk.
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
  ZeroedArray<int64_t> refs_again_;  // 3.8-3.10: the kept frames' reference counts, read again
  size_t depth_ = 0;

 public:
  static constexpr size_t kPage = 4096;
  static constexpr size_t kMaxFrameRead = 128;  // the largest FrameLayout::read_size
  static constexpr size_t kWindowBytes = kPage + kMaxFrameRead;
  static constexpr size_t kMaxWindows = 8;

 private:
  struct Window {
    uint64_t base = 0;
    size_t len = 0;
  };
  // The frame at `frame` (read_size bytes) from a window read in this walk, or from a new one; nullptr when
  // it cannot be read.
  const uint8_t* frame_bytes(uint64_t frame, size_t read_size, int* window);
  // The kept frames' code objects into keys_ (depth_).
  WalkResult resolve_codes(size_t n);
  // The walk's last read and what it must find; *codes_same false when a cached code object changed.
  // `first_frame`: the innermost frame the walk began at.
  WalkResult check_chain(uint64_t tstate, uint64_t first_frame, size_t n, std::span<const ReadRegion> after,
                         bool* codes_same);
  std::array<Window, kMaxWindows> windows_{};
  size_t window_count_ = 0;
  ZeroedArray<uint8_t> window_bytes_;   // kMaxWindows * kWindowBytes
  ZeroedArray<uint8_t> recheck_bytes_;  // the windows read again at the end
  ZeroedArray<int8_t> frame_window_;    // per kept frame: its window, or -1 (read alone)
  uint8_t alone_[kMaxFrameRead];
  // current_frame()'s _PyCFrame (3.11-3.12), and the frame pointer read again at the end of a walk.
  uint64_t cframe_ = 0;
  uint64_t cframe_again_ = 0, frame_again_ = 0;
  // current_frame() read the window of `preloaded_frame_` into window 0: walk_from() at that frame keeps it.
  uint64_t preloaded_frame_ = 0;
  uint64_t guesses_taken_ = 0;
};

}  // namespace gilspy::sampler
