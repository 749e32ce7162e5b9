#include "convert/stack_slices.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gilspy::convert {
namespace {

std::string frame_text(const raw::FrameDef& f) {
  return fmt::format("{} ({}:{})", f.qualname, f.file, f.line);
}

}  // namespace

// Members in name order, as the nlohmann::json objects that wrote them before had them.
void FrameSlice::write_args(JsonWriter& w) const {
  w.field("file", frame.file).field("first_line", frame.first_line).field("line", frame.line);
}

void StackArgs::write(JsonWriter& w) const {
  w.field("file", inner.file).field("function", inner.qualname).field("line", inner.line);
  if (samples > 1) w.field("samples", samples);
  w.key("stack").begin_array();
  for (const std::string& s : stack) w.value(s);
  w.end_array();
  if (truncated) w.field("stack_truncated", true);
}

StackSlices::StackSlices() : pieces_([this](const std::vector<raw::StackPiece>& p) { on_interval(p); }) {}

void StackSlices::on_interval(const std::vector<raw::StackPiece>& pieces) {
  if (pieces.empty() || pieces.front().role != raw::GilRole::kReleased) {
    last_ = pieces;
    return;
  }
  released_.push_back({.tid = pieces.front().tid,
                       .start_ns = pieces.front().from,
                       .end_ns = pieces.back().to,
                       .stacks = stacks_of(pieces)});
}

std::vector<ReleasedStretch> StackSlices::take_released() {
  std::vector<ReleasedStretch> out;
  out.swap(released_);
  return out;
}

void StackSlices::add(const raw::Record& r) {
  last_.clear();
  pieces_.add(r);
}

IntervalStacks StackSlices::take() {
  return stacks_of(last_);
}

IntervalStacks StackSlices::stacks_of(const std::vector<raw::StackPiece>& pieces) const {
  IntervalStacks out;
  if (pieces.empty()) return out;
  const PieceFrames frames = piece_frames(pieces);
  if (std::all_of(frames.begin(), frames.end(), [](const auto& f) { return f.empty(); })) return out;
  out.args = stack_args(pieces, frames);
  out.frames = frame_runs(pieces, frames);
  return out;
}

StackSlices::PieceFrames StackSlices::piece_frames(const std::vector<raw::StackPiece>& pieces) const {
  PieceFrames frames(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto s = pieces_.stacks().find(pieces[i].stack);
    if (s == pieces_.stacks().end()) continue;
    for (auto it = s->second.frames.rbegin(); it != s->second.frames.rend(); ++it) {
      const auto f = pieces_.frames().find(*it);
      if (f != pieces_.frames().end()) frames[i].push_back(&f->second);
    }
  }
  return frames;
}

// The first stack (the one the interval began in), innermost first.
StackArgs StackSlices::stack_args(const std::vector<raw::StackPiece>& pieces,
                                  const PieceFrames& frames) const {
  const auto first = std::find_if(frames.begin(), frames.end(), [](const auto& f) { return !f.empty(); });
  StackArgs args{.inner = *first->back(), .samples = pieces.size()};
  for (auto it = first->rbegin(); it != first->rend(); ++it) args.stack.push_back(frame_text(**it));
  const auto def = pieces_.stacks().find(pieces[static_cast<size_t>(first - frames.begin())].stack);
  args.truncated = def != pieces_.stacks().end() && def->second.truncated;
  return args;
}

// Level by level, runs of consecutive pieces that share the frame and everything above it; then parents
// before children, each level in time order: the order viewers expect on a lane.
std::vector<FrameSlice> StackSlices::frame_runs(const std::vector<raw::StackPiece>& pieces,
                                                const PieceFrames& frames) const {
  std::vector<FrameSlice> runs;
  size_t max_depth = 0;
  for (const auto& f : frames) max_depth = std::max(max_depth, f.size());
  for (size_t d = 0; d < max_depth; ++d) {
    for (size_t i = 0; i < pieces.size();) {
      if (frames[i].size() <= d) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < pieces.size() && frames[j].size() > d &&
             std::equal(frames[i].begin(), frames[i].begin() + static_cast<std::ptrdiff_t>(d) + 1,
                        frames[j].begin())) {
        ++j;
      }
      const int64_t start = pieces[i].from;
      const int64_t end = pieces[j - 1].to - static_cast<int64_t>(d) - 2;
      if (end > start) {
        runs.push_back(
            {.frame = *frames[i][d], .start_ns = start, .end_ns = end, .depth = static_cast<int>(d)});
      }
      i = j;
    }
  }
  std::stable_sort(runs.begin(), runs.end(), [](const FrameSlice& a, const FrameSlice& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
  });
  return runs;
}

}  // namespace gilspy::convert
