#include "cli/counter_setup.hpp"

#include <sys/resource.h>

#include <algorithm>

#include <fmt/format.h>

#include "sampler/target/threads.hpp"

namespace gilspy::cli {

namespace {

// Perf groups may hold half of the descriptors left under the soft limit: the other half stays for the
// sampler's /proc files (two or three per thread) and the output files.
size_t perf_fd_room() {
  struct rlimit files {};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 65536;
  constexpr rlim_t kReserve = 256;
  return files.rlim_cur > kReserve
             ? static_cast<size_t>(std::min<rlim_t>((files.rlim_cur - kReserve) / 2, 1 << 20))
             : 0;
}

}  // namespace

void SessionCounters::start(const std::vector<raw::CounterKind>& asked, const Note& note) {
  if (asked.empty()) return;
  plan_ = sampler::probe_counters(asked);
  for (const auto& [name, why] : plan_.unavailable)
    note(fmt::format("counter {} is not counted: {}", name, why));
  if (plan_.kinds.empty()) {
    note(
        "no perf counter can be counted here; recording goes on with the scheduler figures (CPU time, "
        "run-queue "
        "delay, switches)");
    return;
  }
  max_fds_ = perf_fd_room();
  opener_ = std::make_unique<sampler::PerfOpener>(max_fds_);
}

void SessionCounters::attach(TargetCounters& t, sampler::ProcessSampler& sampler, pid_t pid,
                             sampler::RecordQueue& queue, raw::TargetId id) {
  constexpr size_t kSlots = sampler::ThreadWalker::kMaxThreads;
  if (opener_) t.perf = std::make_unique<sampler::PerfSlots>(plan_.kinds, kSlots);
  t.source = std::make_unique<sampler::ProcCounterSource>(pid, kSlots, t.perf.get(), opener_.get());
  t.threads = std::make_unique<sampler::ThreadCounters>(*t.source, queue, id, kSlots);
  sampler.set_counters(t.threads.get());
}

raw::CounterSetup SessionCounters::setup_record() const {
  raw::CounterSetup r;
  if (opener_) {
    for (const raw::CounterKind k : plan_.kinds) r.kinds[r.count++] = k;
    r.perf_threads_max = static_cast<int64_t>(max_fds_ / std::max<size_t>(1, plan_.kinds.size()));
  }
  r.unavailable = plan_.unavailable;
  return r;
}

void SessionCounters::report(const Note& note) const {
  if (!opener_) return;
  if (opener_->failed() > 0) {
    note(fmt::format("perf counters could not be opened on {} thread{}: {}", opener_->failed(),
                     opener_->failed() == 1 ? "" : "s", opener_->first_failure()));
  }
  if (opener_->dropped() > 0) {
    note(
        fmt::format("{} thread{} went without perf counters (more threads came and went than gilspy opens "
                    "groups for)",
                    opener_->dropped(), opener_->dropped() == 1 ? "" : "s"));
  }
}

}  // namespace gilspy::cli
