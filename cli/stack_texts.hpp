#pragma once
// What `gilspy top` shows of a stack: its innermost function, "qualname (file:line)", per target from the
// stack records that came in (the frame and stack tables of each target, kept as the records define them).
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "raw/records.hpp"

namespace gilspy::cli {

class StackTexts {
 public:
  void frame(uint32_t target, const raw::FrameDef& f) { targets_[target].frames[f.id] = text(f); }
  void stack(uint32_t target, const raw::StackDef& s) {
    if (!s.frames.empty()) targets_[target].innermost[s.id] = s.frames.front();
  }
  // Empty for a stack not defined (yet).
  std::string innermost_text(uint32_t target, uint32_t stack) const {
    const auto t = targets_.find(target);
    if (t == targets_.end()) return {};
    const auto s = t->second.innermost.find(stack);
    if (s == t->second.innermost.end()) return {};
    const auto f = t->second.frames.find(s->second);
    return f == t->second.frames.end() ? std::string() : f->second;
  }

 private:
  static std::string text(const raw::FrameDef& f) {
    // The file's last component is enough on a screen: where the function is, not the whole path.
    const auto slash = f.file.rfind('/');
    return f.qualname + " (" + (slash == std::string::npos ? f.file : f.file.substr(slash + 1)) + ":" +
           std::to_string(f.line) + ")";
  }
  struct Target {
    std::unordered_map<uint32_t, std::string> frames;
    std::unordered_map<uint32_t, uint32_t> innermost;  // stack -> its innermost frame
  };
  std::map<uint32_t, Target> targets_;
};

}  // namespace gilspy::cli
