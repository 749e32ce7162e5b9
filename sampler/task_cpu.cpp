#include "sampler/task_cpu.hpp"

#include <cerrno>
#include <charconv>

namespace gilspy::sampler {

int parse_stat_processor(std::string_view stat) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return -1;
  std::string_view rest = stat.substr(paren + 1);
  constexpr int kFieldsAfterComm = 36;  // state is field 3, processor field 39
  for (int skipped = 0; skipped < kFieldsAfterComm + 1; ++skipped) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (skipped == kFieldsAfterComm) break;
    const size_t space = rest.find(' ');
    if (space == std::string_view::npos) return -1;
    rest.remove_prefix(space);
  }
  int cpu = -1;
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), cpu);
  (void)ptr;
  return ec == std::errc() ? cpu : -1;
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

int TaskStatFile::cpu() {
  char buf[640];
  const ssize_t n = file_.read(buf, sizeof buf);
  if (n <= 0) return -1;
  return parse_stat_processor(std::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace gilspy::sampler
