#pragma once
// `gilspy top`'s function view (key f, --functions): time by Python function, as py-spy's top shows it, split
// by GIL role. It is fed the pieces of holds, waits and (record --all-threads) stretches without the GIL as
// their intervals end (raw/stack_summary.hpp): a piece's time goes to its innermost function (own) and once
// to every function on its stack (total), in the window the interval ended in, so a hold of 30 s shows in
// the window it ends in.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli/top/top_types.hpp"

namespace gilspy::top {

// Functions kept at most; time of any beyond them goes to kOtherFunctions (a target that generates code).
inline constexpr std::size_t kMaxFunctions = 20'000;
inline constexpr const char* kOtherFunctions = "[other functions]";

class FunctionAccount {
 public:
  // `functions`: the piece's stack, innermost first, a text per frame's function (repeats allowed).
  void add(Role role, const std::vector<std::string>& functions, int64_t ns);
  // Every function with time in the window or the totals; then the window restarts.
  std::vector<FunctionRow> close_window();
  void reset();  // the totals and the window restart

 private:
  struct Entry {
    FunctionFigures window, total;
  };
  Entry& entry(const std::string& function);
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace gilspy::top
