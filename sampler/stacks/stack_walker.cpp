#include "sampler/stacks/stack_walker.hpp"

#include <algorithm>
#include <cstring>

#include "base/address_range.hpp"
#include "base/byte_fields.hpp"
#include "base/clock.hpp"

namespace gilspy::sampler {
namespace {

constexpr size_t kFramesBetweenClockChecks = 8;
// Shim and sentinel frames are skipped, not counted: a chain longer than this is not a stack (a cycle).
constexpr size_t kMaxChain = 8192;

}  // namespace

StackWalker::StackWalker(RemoteObjects& objects, CodeCache& codes, size_t max_depth)
    : objects_(objects),
      codes_(codes),
      layout_(objects.layout()),
      max_depth_(max_depth),
      code_addrs_(max_depth + 1),
      instrs_(max_depth + 1),
      keys_(max_depth + 1),
      frame_addrs_(max_depth + 1),
      links_(2 * (max_depth + 1)),
      recheck_(2 * (max_depth + 1)),
      regions_(3 * (max_depth + 1) + kMaxWindows + 2 + kMaxAlso + CodeCache::kMaxRevalidate),
      refs_again_(max_depth + 1),
      window_bytes_(kMaxWindows * kWindowBytes),
      recheck_bytes_(kMaxWindows * kWindowBytes),
      frame_window_(max_depth + 1) {}

const uint8_t* StackWalker::frame_bytes(uint64_t frame, size_t read_size, int* window) {
  for (size_t w = 0; w < window_count_; ++w) {
    const Window& win = windows_[w];
    // A link near the top of the address space (a torn read) once wrapped `frame + read_size` past zero
    // here, passed, and indexed far outside the window (record crashed under CI).
    if (range_within(win.base, win.len, frame, read_size)) {
      *window = static_cast<int>(w);
      return window_bytes_.data() + w * kWindowBytes + (frame - win.base);
    }
  }
  if (window_count_ < kMaxWindows) {
    const uint64_t base = frame & ~uint64_t{kPage - 1};
    const size_t len = static_cast<size_t>(frame - base) + read_size;
    uint8_t* bytes = window_bytes_.data() + window_count_ * kWindowBytes;
    if (objects_.read_one(base, bytes, len)) {
      windows_[window_count_] = {base, len};
      *window = static_cast<int>(window_count_++);
      return bytes + (frame - base);
    }
  }
  // Out of windows, or the page could not be read from its start (only a reader that serves the frame
  // alone does that; memory is mapped a page at a time): the frame alone.
  *window = -1;
  return objects_.read_one(frame, alone_, read_size) ? alone_ : nullptr;
}

bool StackWalker::current_frame(uint64_t tstate, uint64_t* frame, std::span<const ReadRegion> also,
                                FrameGuess guess) {
  const auto& f = layout_.frame;
  *frame = 0;
  cframe_ = 0;
  preloaded_frame_ = 0;
  if (also.size() > kMaxAlso) return false;
  uint64_t p = 0;
  ReadRegion r[1 + kMaxAlso + 2];
  size_t n = 0;
  r[n++] = field_region(tstate, f.tstate_frame, &p);
  for (const ReadRegion& a : also) r[n++] = a;
  const size_t needed = n;
  // The guesses go last: a guess that cannot be read (the thread's stack moved) costs only itself.
  uint64_t guessed_current = 0;
  const bool cframe_guess = f.cframe_current && guess.cframe != 0;
  if (cframe_guess) r[n++] = field_region(guess.cframe, *f.cframe_current, &guessed_current);
  Window guessed{};
  if (guess.frame != 0 && (guess.frame & 7) == 0 && f.read_size <= kMaxFrameRead) {
    guessed.base = guess.frame & ~uint64_t{kPage - 1};
    guessed.len = static_cast<size_t>(guess.frame - guessed.base) + f.read_size;
    r[n++] = {guessed.base, window_bytes_.data(), guessed.len};
  }
  const size_t got = objects_.read({r, n});
  if (got < needed) return false;
  if (f.cframe_current && p != 0) {
    cframe_ = p;
    if (cframe_guess && p == guess.cframe && got > needed) {
      p = guessed_current;  // read with the thread's _PyCFrame pointer, which still names that _PyCFrame
    } else if (!objects_.read_one(p + f.cframe_current->off, &p, 8)) {
      return false;
    }
  }
  *frame = p;
  // Both read in full (the window last) and the thread's frame is the guessed one: the walk starts from
  // that window. What it finds is checked by the walk's last read like any window.
  if (guessed.len != 0 && got == n && p == guess.frame) {
    windows_[0] = guessed;
    preloaded_frame_ = p;
  }
  return true;
}

WalkResult StackWalker::walk(uint64_t tstate, int64_t deadline, WalkOutput* out) {
  uint64_t frame = 0;
  if (!current_frame(tstate, &frame)) {
    *out = WalkOutput{};
    depth_ = 0;
    return WalkResult::kTorn;
  }
  return walk_from(tstate, frame, deadline, out);
}

WalkResult StackWalker::walk_from(uint64_t tstate, uint64_t frame, int64_t deadline, WalkOutput* out,
                                  std::span<const ReadRegion> after) {
  *out = WalkOutput{};
  depth_ = 0;
  const auto& f = layout_.frame;
  if (after.size() > kMaxAlso) return WalkResult::kInvalid;
  out->first_frame = frame;
  // 1. The chain of frames: each frame's code object and instruction.
  size_t n = 0;
  if (f.read_size > kMaxFrameRead) return WalkResult::kInvalid;
  window_count_ = preloaded_frame_ != 0 && preloaded_frame_ == frame ? 1 : 0;
  guesses_taken_ += window_count_;
  preloaded_frame_ = 0;
  for (size_t chain = 0; frame != 0; ++chain) {
    if (chain >= kMaxChain || (frame & 7) != 0) return WalkResult::kTorn;
    if (chain % kFramesBetweenClockChecks == kFramesBetweenClockChecks - 1 && monotonic_ns() >= deadline) {
      return WalkResult::kBudget;
    }
    int window = -1;
    const uint8_t* bytes = frame_bytes(frame, f.read_size, &window);
    if (bytes == nullptr) return WalkResult::kTorn;
    const RemoteBytes buf(bytes, f.read_size);
    ++out->frames_read;
    if (f.refcount && load(buf, *f.refcount) <= 0) return WalkResult::kTorn;  // a frame kept for reuse
    const uint64_t previous = load(buf, f.previous);
    if (f.owner && load(buf, *f.owner) >= f.first_skipped_owner) {
      frame = previous;  // a C-stack shim or the interpreter's sentinel: not Python code
      continue;
    }
    if (n == max_depth_) {
      out->truncated = true;
      break;
    }
    frame_addrs_[n] = frame;
    frame_window_[n] = static_cast<int8_t>(window);
    links_[2 * n] = previous;
    links_[2 * n + 1] = load(buf, f.code);
    code_addrs_[n] = load(buf, f.code) & f.code_pointer_mask;
    instrs_[n] = f.kind == layouts::FrameLayout::Kind::kFrameObject
                     ? load<int32_t>(buf, f.instr)
                     : static_cast<int64_t>(load<uint64_t>(buf, f.instr));
    ++n;
    frame = previous;
  }
  if (n == 0) return WalkResult::kEmpty;
  // 2 and 3, twice at most: a cached code object that the last read finds changed is resolved again.
  for (int attempt = 0;; ++attempt) {
    const WalkResult codes = resolve_codes(n);
    if (codes != WalkResult::kOk) return codes;
    bool codes_same = false;
    const WalkResult check = check_chain(tstate, out->first_frame, n, after, &codes_same);
    if (check != WalkResult::kOk) return check;
    if (codes_same) break;
    if (attempt == 1) return WalkResult::kTorn;
  }
  out->depth = depth_;
  return WalkResult::kOk;
}

WalkResult StackWalker::resolve_codes(size_t n) {
  // 2. The code objects, through the cache (its entries checked with the last read, in check_chain()).
  depth_ = 0;
  for (size_t i = 0; i < n; ++i) {
    const CodeInfo* code = nullptr;
    switch (codes_.lookup(code_addrs_[i], &code)) {
      case CodeResult::kOk:
        break;
      // A frame whose code is not a code object: the C-stack shims that run none are skipped above by their
      // owner, so this is a frame read while it was being reused (a stack unwinding under us).
      case CodeResult::kNotCode:
        return WalkResult::kInvalid;
      case CodeResult::kInvalid:
        return WalkResult::kInvalid;
      case CodeResult::kFull:
        return WalkResult::kFull;
    }
    const layouts::LineLookup line = codes_.line(*code, instrs_[i]);
    if (!line.ok) return WalkResult::kInvalid;
    // Source lines count from 1: a line (or, without one, a first line) below that is a misread code object.
    if ((line.line >= 0 ? line.line : code->first_line) < 1) return WalkResult::kInvalid;
    keys_[depth_++] = {.qualname = code->qualname,
                       .file = code->file,
                       .line = line.line >= 0 ? line.line : code->first_line,
                       .first_line = code->first_line};
  }
  return depth_ == 0 ? WalkResult::kEmpty : WalkResult::kOk;
}

WalkResult StackWalker::check_chain(uint64_t tstate, uint64_t first_frame, size_t n,
                                    std::span<const ReadRegion> after, bool* codes_same) {
  // 3. The chain again, in one read (its windows, and the frames read alone), with the thread's frame
  // pointer, the caller's `after` and the cached code objects: a thread that ran on under the walk can unwind
  // and call again, and come back to the same innermost frame (frames are reused, newest first), so the
  // check against the innermost frame alone lets a mix of two stacks through. Every kept frame must still
  // link to the frame and the code it linked to, and each code object still be the one cached.
  const auto& f = layout_.frame;
  size_t regions = 0;
  for (size_t w = 0; w < window_count_; ++w) {
    regions_[regions++] = {windows_[w].base, recheck_bytes_.data() + w * kWindowBytes, windows_[w].len};
  }
  for (size_t i = 0; i < n; ++i) {
    if (frame_window_[i] >= 0) continue;
    regions_[regions++] = field_region(frame_addrs_[i], f.previous, &recheck_[2 * i]);
    regions_[regions++] = field_region(frame_addrs_[i], f.code, &recheck_[2 * i + 1]);
    if (f.refcount) regions_[regions++] = field_region(frame_addrs_[i], *f.refcount, &refs_again_[i]);
  }
  const bool through_cframe = f.cframe_current && cframe_ != 0;
  regions_[regions++] = field_region(tstate, f.tstate_frame, through_cframe ? &cframe_again_ : &frame_again_);
  if (through_cframe) regions_[regions++] = field_region(cframe_, *f.cframe_current, &frame_again_);
  for (const ReadRegion& r : after) regions_[regions++] = r;
  const size_t before_codes = regions;
  regions += codes_.revalidate_regions({code_addrs_.data(), n},
                                       {regions_.data() + regions, regions_.size() - regions});
  const size_t got = objects_.read({regions_.data(), regions});
  *codes_same = codes_.revalidated(got > before_codes ? got - before_codes : 0);
  if (got != regions) return WalkResult::kTorn;
  if (frame_again_ != first_frame || (through_cframe && cframe_again_ != cframe_)) {
    return WalkResult::kTorn;
  }
  for (size_t i = 0; i < n; ++i) {
    if (frame_window_[i] >= 0) {
      const size_t w = static_cast<size_t>(frame_window_[i]);
      const RemoteBytes again(recheck_bytes_.data() + w * kWindowBytes + (frame_addrs_[i] - windows_[w].base),
                              f.read_size);
      recheck_[2 * i] = load(again, f.previous);
      recheck_[2 * i + 1] = load(again, f.code);
      if (f.refcount) refs_again_[i] = load(again, *f.refcount);
    }
    if (recheck_[2 * i] != links_[2 * i] || recheck_[2 * i + 1] != links_[2 * i + 1])
      return WalkResult::kTorn;
    if (f.refcount && refs_again_[i] <= 0) return WalkResult::kTorn;
  }
  return WalkResult::kOk;
}

}  // namespace gilspy::sampler
