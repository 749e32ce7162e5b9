#include "convert/stack_slices.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gilspy::convert {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string frame_text(const raw::FrameDef& f) {
  return fmt::format("{} ({}:{})", f.qualname, f.file, f.line);
}

}  // namespace

StackSlices::StackSlices() : pieces_([this](const std::vector<raw::StackPiece>& p) { last_ = p; }) {}

void StackSlices::add(const raw::Record& r) {
  last_.clear();
  pieces_.add(r);
}

IntervalStacks StackSlices::take() {
  IntervalStacks out;
  if (last_.empty()) return out;
  // Each piece's frames, outermost first.
  std::vector<std::vector<const raw::FrameDef*>> frames(last_.size());
  bool any = false;
  for (size_t i = 0; i < last_.size(); ++i) {
    const auto s = pieces_.stacks().find(last_[i].stack);
    if (s == pieces_.stacks().end()) continue;
    for (auto it = s->second.frames.rbegin(); it != s->second.frames.rend(); ++it) {
      const auto f = pieces_.frames().find(*it);
      if (f != pieces_.frames().end()) frames[i].push_back(&f->second);
    }
    any = any || !frames[i].empty();
  }
  if (!any) return out;
  // The GIL slice's args: its first stack (the one it began in), innermost first.
  const auto first = std::find_if(frames.begin(), frames.end(), [](const auto& f) { return !f.empty(); });
  json stack = json::array();
  for (auto it = first->rbegin(); it != first->rend(); ++it) stack.push_back(frame_text(**it));
  const raw::FrameDef& inner = *first->back();
  const auto def = pieces_.stacks().find(last_[static_cast<size_t>(first - frames.begin())].stack);
  json args = {{"function", inner.qualname}, {"file", inner.file}, {"line", inner.line}, {"stack", stack}};
  if (def != pieces_.stacks().end() && def->second.truncated) args["stack_truncated"] = true;
  if (last_.size() > 1) args["samples"] = last_.size();
  out.args_json = dump(args);
  // Level by level, runs of consecutive pieces that share the frame and everything above it.
  size_t max_depth = 0;
  for (const auto& f : frames) max_depth = std::max(max_depth, f.size());
  for (size_t d = 0; d < max_depth; ++d) {
    for (size_t i = 0; i < last_.size();) {
      if (frames[i].size() <= d) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < last_.size() && frames[j].size() > d &&
             std::equal(frames[i].begin(), frames[i].begin() + static_cast<std::ptrdiff_t>(d) + 1,
                        frames[j].begin())) {
        ++j;
      }
      const int64_t start = last_[i].from;
      const int64_t end = last_[j - 1].to - static_cast<int64_t>(d) - 2;
      if (end > start) {
        const raw::FrameDef& f = *frames[i][d];
        out.frames.push_back(
            {.name_json = dump(f.qualname),
             .args_json = dump({{"file", f.file}, {"line", f.line}, {"first_line", f.first_line}}),
             .start_ns = start,
             .end_ns = end,
             .depth = static_cast<int>(d)});
      }
      i = j;
    }
  }
  // Parents before children, each level in time order: the order viewers expect on a lane.
  std::stable_sort(out.frames.begin(), out.frames.end(), [](const FrameSlice& a, const FrameSlice& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
  });
  return out;
}

}  // namespace gilspy::convert
