// render_json: the machine-readable batch output of `gilspy top`. Shares are fractions, lengths seconds, so
// that a consumer needs no unit table; missing figures (no stats tick yet) are null, not zero.
#include <nlohmann/json.hpp>

#include "cli/top/function_table.hpp"
#include "cli/top/top_render.hpp"

namespace gilspy::top {

namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json gc_figures(const std::optional<GcFigures>& g) {
  if (!g) return nullptr;
  return {{"collections", {g->collections[0], g->collections[1], g->collections[2]}},
          {"timed", g->timed},
          {"pause_s", seconds(g->pause_ns)},
          {"longest_pause_s", seconds(g->longest_ns)},
          {"time_share", g->time_share},
          {"wait_share", or_null(g->wait_share)},
          {"enabled", g->enabled}};
}

nlohmann::json process_figures(const ProcessFigures& f) {
  return {{"gc", gc_figures(f.gc)},
          {"duration_s", seconds(f.duration_ns)},
          {"gil_busy", f.gil_busy_share},
          {"mean_waiters", or_null(f.mean_waiters)},
          {"max_waiters", or_null(f.max_waiters)},
          {"handoffs_per_s", or_null(f.handoffs_per_s)},
          {"coverage", or_null(f.coverage)},
          {"poll_rate_hz", or_null(f.poll_rate_hz)},
          {"late_polls", f.late_polls},
          {"missed_polls", f.missed_polls}};
}

nlohmann::json thread_figures(const ThreadFigures& f) {
  return {{"lifetime_s", seconds(f.lifetime_ns)},
          {"hold", f.hold_share},
          {"wait", f.wait_share},
          {"released", f.released_share},
          {"share_ci95", f.share_ci95 < 0 ? nlohmann::json(nullptr) : nlohmann::json(f.share_ci95)},
          {"holds", f.holds},
          {"holds_per_s", f.holds_per_s},
          {"mean_hold_s", seconds(f.mean_hold_ns)},
          {"longest_hold_s", seconds(f.longest_hold_ns)},
          {"longest_wait_s", seconds(f.longest_wait_ns)}};
}

// Per role: seconds on a CPU and waiting for one, over the seconds covered; perf ratios where counted.
nlohmann::json cpu_figures(const CpuFigures& f) {
  if (!f.any) return nullptr;
  auto piece = [](const CpuPiece& p) {
    nlohmann::json j = {{"time_s", seconds(p.time_ns)},
                        {"cpu_s", seconds(p.cpu_ns)},
                        {"run_delay_s", seconds(p.run_delay_ns)},
                        {"slices", p.slices}};
    if (p.counted) {
      j["cycles"] = p.cycles;
      j["instructions"] = p.instructions;
    }
    if (p.misses_counted) {
      j["cache_misses"] = p.cache_misses;
      j["branch_misses"] = p.branch_misses;
    }
    return j;
  };
  return {{"holding", piece(f.role(Role::kHolding))},
          {"waiting", piece(f.role(Role::kWaiting))},
          {"released", piece(f.role(Role::kReleased))}};
}

}  // namespace

std::string render_json(const TopSnapshot& s) {
  nlohmann::json processes = nlohmann::json::array();
  for (const ProcessRow& p : s.processes) {
    nlohmann::json threads = nlohmann::json::array();
    for (const ThreadRow& t : p.threads) {
      threads.push_back(
          {{"tid", t.tid},
           {"name", t.name},
           {"function", t.function.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.function)},
           {"ended", t.ended},
           {"interval", thread_figures(t.interval)},
           {"total", thread_figures(t.total)},
           {"cpu_interval", cpu_figures(t.cpu_interval)},
           {"cpu_total", cpu_figures(t.cpu_total)}});
    }
    nlohmann::json extra = nlohmann::json::array();
    for (const Figure& f : p.extra)
      extra.push_back({{"label", f.label}, {"value", f.value}, {"unit", f.unit}});
    processes.push_back({{"id", p.id},
                         {"pid", p.pid},
                         {"command", p.command},
                         {"python_version", p.python_version},
                         {"rank", p.rank},
                         {"mode", p.exact ? "exact" : "sampled"},
                         {"ended", p.ended},
                         {"warning", p.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.warning)},
                         {"interval", process_figures(p.interval)},
                         {"total", process_figures(p.total)},
                         {"extra", extra},
                         {"threads", threads}});
  }
  const nlohmann::json j = {{"now_ns", s.now_ns},
                            {"interval_s", seconds(s.now_ns - s.interval_start_ns)},
                            {"totals_s", seconds(s.now_ns - s.totals_start_ns)},
                            {"processes", processes},
                            {"functions", functions_json(s, 50)}};
  // Thread names and commands come from the target: not necessarily UTF-8, and dump() must not throw on them.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gilspy::top
