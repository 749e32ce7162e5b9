#include "sampler/proc/task_cpu.hpp"

#include <cerrno>
#include <charconv>

namespace gilspy::sampler {

namespace {

// Field `n` (proc(5)'s numbering, n >= 3) of a stat line; empty when there is none. The command name (field
// 2) may hold spaces and parentheses, so fields are counted from its last ')'.
std::string_view stat_field(std::string_view stat, int n) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return {};
  std::string_view rest = stat.substr(paren + 1);
  for (int field = 3;; ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const size_t space = rest.find_first_of(" \n");
    if (field == n) return rest.substr(0, space);
    if (space == std::string_view::npos) return {};
    rest.remove_prefix(space);
  }
}

template <class T>
bool number_of(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

int parse_stat_processor(std::string_view stat) {
  int cpu = -1;
  return number_of(stat_field(stat, 39), cpu) ? cpu : -1;
}

std::optional<StatTimes> parse_stat_times(std::string_view stat) {
  StatTimes t;
  if (!number_of(stat_field(stat, 14), t.user_ticks) || !number_of(stat_field(stat, 15), t.system_ticks))
    return std::nullopt;
  return t;
}

char parse_stat_state(std::string_view stat) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

char TaskStatFile::state(bool* ended) {
  char buf[640];
  const bool was_open = file_.is_open();
  const ssize_t n = file_.read(buf, sizeof buf);
  if (ended != nullptr) *ended = n < 0 && was_open && (errno == ESRCH || errno == ENOENT);
  if (n <= 0) return 0;
  return parse_stat_state(std::string_view(buf, static_cast<size_t>(n)));
}

std::optional<StatTimes> TaskStatFile::times() {
  char buf[640];
  const ssize_t n = file_.read(buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  return parse_stat_times(std::string_view(buf, static_cast<size_t>(n)));
}

int TaskStatFile::cpu() {
  char buf[640];
  const ssize_t n = file_.read(buf, sizeof buf);
  if (n <= 0) return -1;
  return parse_stat_processor(std::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace gilspy::sampler
