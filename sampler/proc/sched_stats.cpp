#include "sampler/proc/sched_stats.hpp"

#include <charconv>
#include <type_traits>

namespace gilspy::sampler {

namespace {

// The unsigned number at the start of `s` (after spaces and tabs); advances `s` past it.
template <class T>
bool take_number(std::string_view& s, T& out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc()) return false;
  if constexpr (std::is_signed_v<T>) {
    if (out < 0) return false;
  }
  s.remove_prefix(static_cast<size_t>(ptr - s.data()));
  return true;
}

// The number after "key:" on the line that starts with `key`.
bool field(std::string_view text, std::string_view key, uint64_t& out) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    std::string_view line =
        text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      return take_number(line, out);
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return false;
}

}  // namespace

std::optional<SchedStat> parse_schedstat(std::string_view text) {
  SchedStat s;
  if (!take_number(text, s.cpu_ns) || !take_number(text, s.run_delay_ns) || !take_number(text, s.slices)) {
    return std::nullopt;
  }
  return s;
}

std::optional<SwitchCounts> parse_status_switches(std::string_view text) {
  SwitchCounts c;
  if (!field(text, "voluntary_ctxt_switches", c.voluntary) ||
      !field(text, "nonvoluntary_ctxt_switches", c.involuntary)) {
    return std::nullopt;
  }
  return c;
}

std::optional<SchedStat> TaskSchedStatFile::read() {
  char buf[128];
  const ssize_t n = file_.read(buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  return parse_schedstat(std::string_view(buf, static_cast<size_t>(n)));
}

std::optional<SwitchCounts> read_task_switches(pid_t pid, int32_t tid) {
  TaskFile file("status");
  file.reset(pid, tid);
  char buf[4096];
  const ssize_t n = file.read(buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  return parse_status_switches(std::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace gilspy::sampler
