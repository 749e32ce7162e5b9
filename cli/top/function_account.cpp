#include "cli/top/function_account.hpp"

#include <algorithm>

namespace gilspy::top {

bool FunctionFigures::any() const {
  return std::any_of(own_ns.begin(), own_ns.end(), [](int64_t v) { return v > 0; }) ||
         std::any_of(total_ns.begin(), total_ns.end(), [](int64_t v) { return v > 0; });
}

FunctionAccount::Entry& FunctionAccount::entry(const std::string& function) {
  const auto found = entries_.find(function);
  if (found != entries_.end()) return found->second;
  if (entries_.size() >= kMaxFunctions) return entries_[kOtherFunctions];
  return entries_[function];
}

void FunctionAccount::add(Role role, const std::vector<std::string>& functions, int64_t ns) {
  if (functions.empty() || ns <= 0) return;
  const auto r = static_cast<std::size_t>(role);
  Entry& inner = entry(functions.front());
  inner.window.own_ns[r] += ns;
  inner.total.own_ns[r] += ns;
  // Total: once per function, however often it recurs on the stack.
  std::vector<Entry*> seen;
  for (const std::string& f : functions) {
    Entry* e = &entry(f);
    if (std::find(seen.begin(), seen.end(), e) != seen.end()) continue;
    seen.push_back(e);
    e->window.total_ns[r] += ns;
    e->total.total_ns[r] += ns;
  }
}

std::vector<FunctionRow> FunctionAccount::close_window() {
  std::vector<FunctionRow> rows;
  for (auto& [function, e] : entries_) {
    if (e.window.any() || e.total.any())
      rows.push_back({.function = function, .interval = e.window, .total = e.total});
    e.window = {};
  }
  return rows;
}

void FunctionAccount::reset() {
  entries_.clear();
}

}  // namespace gilspy::top
