// ScreenSink's function view: see cli/screen_sink.hpp.
#include <algorithm>

#include "cli/screen_sink.hpp"

namespace gilspy::cli {
namespace {

// "qualname (file.py:first line)": a function, not a line of it; the file's last component, as the thread
// table's function column has it.
std::string function_text(const raw::FrameDef& f) {
  const auto slash = f.file.rfind('/');
  return f.qualname + " (" + (slash == std::string::npos ? f.file : f.file.substr(slash + 1)) + ":" +
         std::to_string(f.first_line) + ")";
}

}  // namespace

void ScreenSink::start_functions(raw::TargetId id) {
  FunctionStacks& f = function_stacks_[id];
  f.pieces = std::make_unique<raw::StackPieces>([this, id](const std::vector<raw::StackPiece>& pieces) {
    function_pieces(id, pieces, functions_credited_ns_);  // credited up to the last tick while it was open
  });
}

const std::vector<std::string>& ScreenSink::function_texts(FunctionStacks& f, uint32_t stack) {
  auto [it, added] = f.texts.try_emplace(stack);
  if (!added) return it->second;
  const auto s = f.pieces->stacks().find(stack);
  if (s == f.pieces->stacks().end()) return it->second;
  for (const uint32_t frame : s->second.frames) {
    const auto def = f.pieces->frames().find(frame);
    if (def != f.pieces->frames().end()) it->second.push_back(function_text(def->second));
  }
  return it->second;
}

void ScreenSink::function_pieces(raw::TargetId id, const std::vector<raw::StackPiece>& pieces,
                                 int64_t from_ns) {
  FunctionStacks& f = function_stacks_[id];
  for (const raw::StackPiece& p : pieces) {
    const int64_t ns = p.to - std::max(p.from, from_ns);
    if (p.stack == 0 || ns <= 0) continue;
    // A stack defined after the sample that names it (not the sampler's order) is looked up again next time.
    const std::vector<std::string>& texts = function_texts(f, p.stack);
    if (texts.empty()) {
      f.texts.erase(p.stack);
      continue;
    }
    model_.function_time(role_of(p.role), texts, ns);
  }
}

void ScreenSink::open_function_pieces(int64_t tick_ns) {
  for (auto& [id, f] : function_stacks_) {
    const raw::TargetId target = id;
    f.pieces->open_intervals(tick_ns, [&](const std::vector<raw::StackPiece>& pieces) {
      function_pieces(target, pieces, functions_credited_ns_);
    });
  }
  functions_credited_ns_ = std::max(functions_credited_ns_, tick_ns);
}

}  // namespace gilspy::cli
