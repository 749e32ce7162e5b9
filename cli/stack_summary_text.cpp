#include "cli/stack_summary_text.hpp"
#include "cli/summary_text.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "base/terminal_text.hpp"

namespace gilspy::cli {
namespace {

// "qualname (file:line)", escaped; the file's directories are dropped when the whole would not fit a line.
std::string place(const std::string& function, const std::string& file, int32_t line) {
  if (file.empty()) return escape_for_terminal(function);
  std::string where = file;
  if (function.size() + file.size() > 60) {
    const auto slash = file.rfind('/');
    if (slash != std::string::npos) where = ".../" + file.substr(slash + 1);
  }
  return fmt::format("{} ({}:{})", escape_for_terminal(function), escape_for_terminal(where), line);
}

// A row of time with a stack sample (a place in the code), not raw::kNoStackSample.
template <class Row>
bool sampled(const Row& r) {
  return !r.file.empty() || r.function != raw::kNoStackSample;
}

// --all-threads: where threads were when they neither held the GIL nor waited for it.
void released_lines(std::string& out, const raw::StackSummary& stacks, int64_t end_ns, size_t rows) {
  const auto sites = stacks.released_sites(rows, end_ns);
  if (sites.empty()) return;
  out += "  where threads spend their time without the GIL (in C, I/O or asleep: --all-threads):\n";
  fmt::format_to(std::back_inserter(out), "    {:>13} {:>8} {:>13}  {}\n", "WITHOUT GIL", "VISITS", "LONGEST",
                 "CALL SITE");
  for (const raw::ReleasedSiteRow& r : sites) {
    fmt::format_to(std::back_inserter(out), "    {:>13} {:>8} {:>13}  {}\n", duration_text(r.released_ns),
                   r.stretches, duration_text(r.longest_ns), place(r.function, r.file, r.line));
  }
}

}  // namespace

void stack_summary_lines(std::string& out, const raw::StackSummary& stacks, int64_t duration_ns,
                         int64_t end_ns, size_t rows) {
  const raw::StackStats& c = stacks.costs();
  if (c.walks == 0 && !stacks.any_samples()) return;  // --no-stacks, or a version whose stacks are not read
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  fmt::format_to(
      std::back_inserter(out),
      "  Python stacks: {} samples ({:.0f}/s; {} of them a hold's start, where its thread's wait "
      "was read), {:.0f} bytes read per stack, {:.2f} % of a core; dropped: {} torn, {} invalid; {} "
      "not read in time\n",
      c.samples, seconds > 0 ? static_cast<double>(c.samples) / seconds : 0.0, c.reused,
      c.walks > 0 ? static_cast<double>(c.bytes) / static_cast<double>(c.walks) : 0.0,
      seconds > 0 ? 100.0 * static_cast<double>(c.read_ns) / 1e9 / seconds : 0.0, c.torn, c.invalid,
      c.skipped);
  // Functions that held the GIL only while nobody waited are not what blocked anyone: left out, unless no
  // function held it while others waited (then the longest holders are shown).
  auto holders = stacks.top_holders(rows);
  if (!holders.empty() && holders.front().contended_ns > 0) {
    std::erase_if(holders, [](const raw::HolderRow& r) { return r.contended_ns == 0; });
  }
  // Time no stack was read for is not a place in the code: after the places, whatever its size, and said why.
  std::stable_partition(holders.begin(), holders.end(), [](const raw::HolderRow& r) { return sampled(r); });
  bool unsampled =
      std::any_of(holders.begin(), holders.end(), [](const raw::HolderRow& r) { return !sampled(r); });
  if (!holders.empty()) {
    out +=
        "  top GIL holders while others waited (innermost function; WHILE WAITED: held while another thread "
        "waited):\n";
    fmt::format_to(std::back_inserter(out), "    {:>13} {:>10} {:>13} {:>8}  {}\n", "WHILE WAITED", "HELD",
                   "LONGEST HOLD", "WAITERS", "FUNCTION");
    for (const raw::HolderRow& r : holders) {
      fmt::format_to(std::back_inserter(out), "    {:>13} {:>10} {:>13} {:>8.1f}  {}\n",
                     duration_text(r.contended_ns), duration_text(r.hold_ns), duration_text(r.longest_ns),
                     r.mean_waiters, place(r.function, r.file, r.first_line));
    }
  }
  auto sites = stacks.wait_sites(rows);
  std::stable_partition(sites.begin(), sites.end(), [](const raw::WaitSiteRow& r) { return sampled(r); });
  unsampled = unsampled ||
              std::any_of(sites.begin(), sites.end(), [](const raw::WaitSiteRow& r) { return !sampled(r); });
  if (!sites.empty()) {
    out += "  where threads wait for the GIL (the line that asked for it):\n";
    fmt::format_to(std::back_inserter(out), "    {:>13} {:>8} {:>13}  {}\n", "WAITED", "WAITS",
                   "LONGEST WAIT", "CALL SITE");
    for (const raw::WaitSiteRow& r : sites) {
      fmt::format_to(std::back_inserter(out), "    {:>13} {:>8} {:>13}  {}\n", duration_text(r.wait_ns),
                     r.waits, duration_text(r.longest_ns), place(r.function, r.file, r.line));
    }
  }
  released_lines(out, stacks, end_ns, rows);
  if (unsampled) {
    fmt::format_to(
        std::back_inserter(out),
        "  [no stack sample]: holds and waits whose stack was not read ({} reads not done in time, "
        "{} torn): too short, or past the stack reads' share of --cpu-budget (a higher one reads "
        "more)\n",
        c.skipped, c.torn);
  }
}

}  // namespace gilspy::cli
