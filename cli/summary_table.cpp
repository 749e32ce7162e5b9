#include "cli/summary_table.hpp"

#include <algorithm>
#include <map>

#include "base/name_pattern.hpp"
#include "base/share_interval.hpp"

namespace gilspy::cli {

namespace {

constexpr size_t kMinGroup = 3;  // fewer threads of a pattern say more on their own rows
// A thread whose hold + wait is under 1/2000 of its life shows as 0.0 % and 0.0 %: idle.
constexpr int64_t kIdleShareInverse = 2000;

double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

SummaryRow row_of(const raw::ThreadSummary& t) {
  SummaryRow r;
  r.tid = t.tid;
  r.name = t.name;
  r.life_ns = std::max<int64_t>(0, t.last_ns - t.first_ns);
  r.hold_ns = t.hold_ns;
  r.wait_ns = t.wait_ns;
  r.holds = t.holds;
  r.longest_hold_ns = t.longest_hold_ns;
  r.longest_wait_ns = t.longest_wait_ns;
  r.state_var_ns2 = t.state_var_ns2;
  return r;
}

void merge_into(SummaryRow& group, const SummaryRow& r) {
  group.threads += r.threads;
  group.life_ns += r.life_ns;
  group.hold_ns += r.hold_ns;
  group.wait_ns += r.wait_ns;
  group.holds += r.holds;
  group.longest_hold_ns = std::max(group.longest_hold_ns, r.longest_hold_ns);
  group.longest_wait_ns = std::max(group.longest_wait_ns, r.longest_wait_ns);
  group.state_var_ns2 =
      group.state_var_ns2 < 0 || r.state_var_ns2 < 0 ? -1 : group.state_var_ns2 + r.state_var_ns2;
}

SummaryRow row_of(const raw::FoldedThreads& f) {
  SummaryRow r;
  r.tid = f.busiest_tid;
  r.name = f.pattern;
  r.threads = f.threads;
  r.life_ns = f.life_ns;
  r.hold_ns = f.hold_ns;
  r.wait_ns = f.wait_ns;
  r.holds = f.holds;
  r.longest_hold_ns = f.longest_hold_ns;
  r.longest_wait_ns = f.longest_wait_ns;
  r.state_var_ns2 = f.state_var_ns2;
  return r;
}

bool busier(const SummaryRow& a, const SummaryRow& b) {
  const int64_t ta = a.hold_ns + a.wait_ns, tb = b.hold_ns + b.wait_ns;
  if (ta != tb) return ta > tb;
  return a.tid < b.tid;
}

// Short-lived threads by name pattern; a pattern with enough of them becomes one row, joined by the folded
// threads of the same pattern (taken out of `folded_rows`). The other threads get a row each.
void group_short_lived(const std::vector<raw::ThreadSummary>& threads, int64_t duration_ns,
                       std::map<std::string, SummaryRow>& folded_rows, std::vector<SummaryRow>& rows,
                       SummaryTable& table) {
  std::map<std::string, std::vector<SummaryRow>> short_lived;
  for (const auto& t : threads) {
    SummaryRow r = row_of(t);
    if (duration_ns > 0 && 2 * r.life_ns < duration_ns) {
      short_lived[name_pattern(r.name)].push_back(std::move(r));
    } else {
      rows.push_back(std::move(r));
    }
  }
  for (auto& [pattern, members] : short_lived) {
    const auto f = folded_rows.find(pattern);
    if (members.size() < kMinGroup && f == folded_rows.end()) {
      for (auto& r : members) rows.push_back(std::move(r));
      continue;
    }
    SummaryRow group;
    group.threads = 0;
    group.name = pattern;
    group.state_var_ns2 = 0;
    for (const auto& r : members) merge_into(group, r);
    group.tid = std::min_element(members.begin(), members.end(), busier)->tid;
    if (f != folded_rows.end()) {  // the same pattern's folded threads join the group
      if (busier(f->second, *std::min_element(members.begin(), members.end(), busier)))
        group.tid = f->second.tid;
      merge_into(group, f->second);
      folded_rows.erase(f);
    }
    rows.push_back(std::move(group));
    table.grouped = true;
  }
}

// `rows` sorted busiest first: threads that neither held nor waited (0.0 / 0.0 on their row) say nothing on a
// row of their own: they join the rest line, after every thread that did. With max_rows (0: no limit), the
// rows past it are summed into the table's rest.
void keep_busiest_rows(std::vector<SummaryRow>& rows, size_t max_rows, SummaryTable& table) {
  const auto idle = [](const SummaryRow& r) {
    return (r.hold_ns + r.wait_ns) * kIdleShareInverse < r.life_ns;
  };
  const auto first_idle =
      std::stable_partition(rows.begin(), rows.end(), [&](const SummaryRow& r) { return !idle(r); });
  const bool limited = max_rows > 0;
  if (limited) max_rows = std::min<size_t>(max_rows, static_cast<size_t>(first_idle - rows.begin()));
  if (!limited || rows.size() <= max_rows) return;
  for (auto it = rows.begin() + static_cast<std::ptrdiff_t>(max_rows); it != rows.end(); ++it) {
    table.rest_threads += it->threads;
    table.rest_hold_ns += it->hold_ns;
    table.rest_wait_ns += it->wait_ns;
    table.rest_life_ns += it->life_ns;
  }
  rows.resize(max_rows);
  table.grouped = std::any_of(rows.begin(), rows.end(), [](const SummaryRow& r) { return r.threads > 1; });
}

}  // namespace

double SummaryRow::hold_share() const {
  return share(hold_ns, life_ns);
}
double SummaryRow::wait_share() const {
  return share(wait_ns, life_ns);
}
double SummaryRow::share_ci95() const {
  return gilspy::share_ci95(state_var_ns2, life_ns);
}

std::string name_pattern(const std::string& name) {
  return gilspy::name_pattern(name);
}

SummaryTable build_summary_table(const std::vector<raw::ThreadSummary>& threads, int64_t duration_ns,
                                 size_t max_rows, const std::map<std::string, raw::FoldedThreads>& folded) {
  SummaryTable table;
  table.total_threads = threads.size();
  std::vector<SummaryRow> rows;
  // Threads the summary folded as they ended are groups already (one per pattern), whatever max_rows says.
  std::map<std::string, SummaryRow> folded_rows;
  for (const auto& [pattern, f] : folded) {
    folded_rows.emplace(pattern, row_of(f));
    table.total_threads += f.threads;
  }
  if (max_rows == 0) {
    for (const auto& t : threads) rows.push_back(row_of(t));
  } else {
    group_short_lived(threads, duration_ns, folded_rows, rows, table);
  }
  for (auto& [pattern, row] : folded_rows) {
    rows.push_back(std::move(row));
    table.grouped = true;
  }
  std::sort(rows.begin(), rows.end(), busier);
  keep_busiest_rows(rows, max_rows, table);
  table.rows = std::move(rows);
  return table;
}

}  // namespace gilspy::cli
