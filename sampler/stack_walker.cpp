#include "sampler/stack_walker.hpp"

#include <cstring>

#include "sampler/poll_loop.hpp"

namespace gilspy::sampler {
namespace {

template <class T>
T at(const uint8_t* p, size_t off) {
  T v{};
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

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
      regions_(2 * (max_depth + 1)) {}

uint64_t StackWalker::current_frame(uint64_t tstate, bool* ok) {
  const auto& f = layout_.frame;
  uint64_t p = 0;
  *ok = objects_.read_one(tstate + f.tstate_frame, &p, 8);
  if (*ok && f.cframe_current && p != 0) {
    uint64_t frame = 0;
    *ok = objects_.read_one(p + *f.cframe_current, &frame, 8);
    p = frame;
  }
  return *ok ? p : 0;
}

WalkResult StackWalker::walk(uint64_t tstate, int64_t deadline, WalkOutput* out) {
  *out = WalkOutput{};
  depth_ = 0;
  const auto& f = layout_.frame;
  bool ok = false;
  uint64_t frame = current_frame(tstate, &ok);
  if (!ok) return WalkResult::kTorn;
  out->first_frame = frame;
  // 1. The chain of frames: each frame's code object and instruction.
  size_t n = 0;
  uint8_t buf[128];
  if (f.read_size > sizeof buf) return WalkResult::kInvalid;
  for (size_t chain = 0; frame != 0; ++chain) {
    if (chain >= kMaxChain || (frame & 7) != 0) return WalkResult::kTorn;
    if (chain % kFramesBetweenClockChecks == kFramesBetweenClockChecks - 1 && monotonic_ns() >= deadline) {
      return WalkResult::kBudget;
    }
    if (!objects_.read_one(frame, buf, f.read_size)) return WalkResult::kTorn;
    ++out->frames_read;
    const uint64_t previous = at<uint64_t>(buf, f.previous);
    if (f.owner && at<uint8_t>(buf, *f.owner) >= f.first_skipped_owner) {
      frame = previous;  // a C-stack shim or the interpreter's sentinel: not Python code
      continue;
    }
    if (n == max_depth_) {
      out->truncated = true;
      break;
    }
    frame_addrs_[n] = frame;
    links_[2 * n] = previous;
    links_[2 * n + 1] = at<uint64_t>(buf, f.code);
    code_addrs_[n] = at<uint64_t>(buf, f.code) & f.code_pointer_mask;
    instrs_[n] = f.kind == layouts::FrameLayout::Kind::kFrameObject
                     ? at<int32_t>(buf, f.instr)
                     : static_cast<int64_t>(at<uint64_t>(buf, f.instr));
    ++n;
    frame = previous;
  }
  if (n == 0) return WalkResult::kEmpty;
  // 2. The code objects: cached ones checked in one read, the others resolved.
  codes_.revalidate({code_addrs_.data(), n});
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
  if (depth_ == 0) return WalkResult::kEmpty;
  // 3. The chain again, in one read: a thread that ran on under the walk can unwind and call again, and
  // come back to the same innermost frame (frames are reused, newest first), so the check against the
  // innermost frame alone lets a mix of two stacks through. Every kept frame must still link to the frame
  // and the code it linked to.
  for (size_t i = 0; i < n; ++i) {
    regions_[2 * i] = {frame_addrs_[i] + f.previous, &recheck_[2 * i], 8};
    regions_[2 * i + 1] = {frame_addrs_[i] + f.code, &recheck_[2 * i + 1], 8};
  }
  if (objects_.read({regions_.data(), 2 * n}) != 2 * n) return WalkResult::kTorn;
  for (size_t i = 0; i < 2 * n; ++i) {
    if (recheck_[i] != links_[i]) return WalkResult::kTorn;
  }
  out->depth = depth_;
  return WalkResult::kOk;
}

}  // namespace gilspy::sampler
