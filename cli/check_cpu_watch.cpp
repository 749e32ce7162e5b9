#include "cli/check_cpu_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>

#include "base/clock.hpp"

namespace gilspy::cli {

namespace {
constexpr auto kReadPeriod = std::chrono::milliseconds(50);
}

CheckCpuWatch::CheckCpuWatch(std::vector<pid_t> pids, double untraced_s)
    : pids_(std::move(pids)), tick_s_(1.0 / static_cast<double>(std::max(1L, ::sysconf(_SC_CLK_TCK)))) {
  untraced_from_ = gilspy::monotonic_ns();
  read_all();
  reader_ = std::jthread([this](std::stop_token stop) {
    std::mutex sleep_mu;
    std::condition_variable_any wake;
    std::unique_lock lock(sleep_mu);
    while (!stop.stop_requested()) {
      wake.wait_for(lock, stop, kReadPeriod, [] { return false; });  // a sleep that a stop ends early
      if (!stop.stop_requested()) read_all();
    }
  });
  std::this_thread::sleep_for(std::chrono::duration<double>(untraced_s));
  untraced_to_ = gilspy::monotonic_ns();
}

CheckCpuWatch::~CheckCpuWatch() = default;  // the jthread asks its reader to stop and joins it

void CheckCpuWatch::read_all() {
  for (const pid_t pid : pids_) {
    const auto tasks = sampler::read_process_cpu(pid);
    if (!tasks) continue;
    const int64_t now = gilspy::monotonic_ns();
    const std::lock_guard lock(mu_);
    totals_[pid].add(now, *tasks);
  }
}

std::optional<CheckCpu> CheckCpuWatch::figures(pid_t pid, int64_t from_ns, int64_t to_ns) {
  read_all();  // a read after the window's end, however the 50 ms reads fell
  const std::lock_guard lock(mu_);
  const auto t = totals_.find(pid);
  if (t == totals_.end()) return std::nullopt;
  if (t->second.points().empty()) return std::nullopt;
  // From the first read on: the clock was read just before it.
  const auto untraced =
      t->second.rates(std::max(untraced_from_, t->second.points().front().mono_ns), untraced_to_, tick_s_);
  const auto window = t->second.rates(from_ns, to_ns, tick_s_);
  if (!untraced || !window) return std::nullopt;
  return CheckCpu{.untraced_s = static_cast<double>(untraced_to_ - untraced_from_) / 1e9,
                  .window_s = static_cast<double>(to_ns - from_ns) / 1e9,
                  .threads = t->second.most_threads(),
                  .tick_s = tick_s_,
                  .untraced_user_cpus = untraced->user_cpus,
                  .untraced_system_cpus = untraced->system_cpus,
                  .window_user_cpus = window->user_cpus,
                  .window_system_cpus = window->system_cpus};
}

}  // namespace gilspy::cli
