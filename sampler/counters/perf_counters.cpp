#include "sampler/counters/perf_counters.hpp"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/error.hpp"

namespace gilspy::sampler {

namespace {

struct EventSpec {
  uint32_t type;
  uint64_t config;
};

EventSpec spec_of(raw::CounterKind k) {
  using K = raw::CounterKind;
  switch (k) {
    case K::kTaskClock:
      return {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK};
    case K::kContextSwitches:
      return {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES};
    case K::kCpuMigrations:
      return {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS};
    case K::kPageFaults:
      return {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS};
    case K::kCycles:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES};
    case K::kInstructions:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS};
    case K::kCacheReferences:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES};
    case K::kCacheMisses:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES};
    case K::kBranches:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS};
    case K::kBranchMisses:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES};
    case K::kStalledCyclesFrontend:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND};
    case K::kStalledCyclesBackend:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND};
    case K::kRefCycles:
      return {PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES};
    case K::kUnknown:
      break;
  }
  return {PERF_TYPE_MAX, 0};
}

int open_event(raw::CounterKind kind, pid_t tid, int group_fd) {
  const EventSpec spec = spec_of(kind);
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = spec.type;
  attr.config = spec.config;
  // Counting starts at once (the first read is the baseline); no sampling, no inheritance: one thread each.
  attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return static_cast<int>(::syscall(SYS_perf_event_open, &attr, tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC));
}

int paranoid_level() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int level = 2;
  in >> level;
  return level;
}

int64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Does the group count everything at once on this thread? A group the PMU cannot schedule as a whole counts
// only part of the time it is enabled (or never).
bool group_counts_fully(std::span<const raw::CounterKind> kinds) {
  PerfGroup g;
  if (g.open(0, kinds) != 0) return false;
  const int64_t until = thread_cpu_ns() + 3'000'000;  // 3 ms on a CPU: several scheduling chances
  volatile uint64_t sink = 0;
  while (thread_cpu_ns() < until) {
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  PerfReading r;
  return g.read(r) && r.enabled_ns > 0 && r.running_ns >= r.enabled_ns;
}

}  // namespace

int PerfGroup::open(pid_t tid, std::span<const raw::CounterKind> kinds) {
  close();
  for (const raw::CounterKind k : kinds) {
    if (count_ == fds_.size()) break;
    const int fd = open_event(k, tid, count_ == 0 ? -1 : fds_[0]);
    if (fd < 0) {
      const int error = errno;
      close();
      return error;
    }
    fds_[count_++] = fd;
  }
  return 0;
}

void PerfGroup::close() {
  // Members first, then the leader.
  while (count_ > 0) ::close(fds_[--count_]);
  fds_.fill(-1);
}

bool PerfGroup::read(PerfReading& out) const {
  if (count_ == 0) return false;
  uint64_t buf[3 + raw::kMaxCounterValues];
  const ssize_t n = ::read(fds_[0], buf, sizeof buf);
  if (n < static_cast<ssize_t>(3 * sizeof(uint64_t))) return false;
  const uint64_t nr = buf[0];
  if (nr != count_ || static_cast<size_t>(n) < (3 + nr) * sizeof(uint64_t)) return false;
  out.enabled_ns = buf[1];
  out.running_ns = buf[2];
  out.count = static_cast<uint8_t>(nr);
  for (size_t i = 0; i < nr; ++i) out.values[i] = buf[3 + i];
  return true;
}

std::vector<raw::CounterKind> parse_counter_list(const std::string& list) {
  std::vector<raw::CounterKind> out;
  auto add = [&](raw::CounterKind k) {
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  // The software events come first, always: they cost nothing and exist everywhere.
  for (const auto& info : raw::kCounterKinds) {
    if (!info.hardware) add(info.kind);
  }
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = list.find(',', at);
    std::string name = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? list.size() + 1 : comma + 1;
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (name.empty()) continue;
    if (name == "all") {
      for (const auto& info : raw::kCounterKinds) add(info.kind);
      continue;
    }
    const auto kind = raw::counter_kind_named(name);
    if (!kind) {
      std::string valid;
      for (const auto& info : raw::kCounterKinds) valid += std::string(valid.empty() ? "" : ", ") + info.name;
      // The name comes from the command line: quoted as given, the caller escapes the line for the terminal.
      throw Error(ErrorKind::kUsage, "--counters: unknown counter '" + name + "'; valid: all, " + valid);
    }
    add(*kind);
  }
  return out;
}

std::string perf_open_failure(raw::CounterKind kind, int error) {
  switch (error) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
    case EINVAL:
      return raw::counter_is_hardware(kind)
                 ? "not supported: this machine has no hardware counter for it (no PMU, as in most VMs)"
                 : "not supported by this kernel";
    case EACCES:
    case EPERM:
      return "not permitted: perf_event_paranoid is " + std::to_string(paranoid_level()) +
             " and gilspy lacks CAP_PERFMON (run as root, grant CAP_PERFMON, or lower "
             "kernel.perf_event_paranoid "
             "to 1)";
    case EMFILE:
    case ENFILE:
      return "no file descriptor left for it";
    case ESRCH:
      return "the thread was gone";
    default:
      return std::string("perf_event_open failed: ") + std::strerror(error);
  }
}

CounterPlan probe_counters(std::span<const raw::CounterKind> asked) {
  CounterPlan plan;
  for (const raw::CounterKind k : asked) {
    PerfGroup one;
    const raw::CounterKind single[] = {k};
    const int error = one.open(0, single);
    if (error != 0) {
      plan.unavailable.emplace_back(raw::counter_name(k), perf_open_failure(k, error));
    } else if (plan.kinds.size() == raw::kMaxCounterValues) {
      plan.unavailable.emplace_back(
          raw::counter_name(k),
          "a thread's group holds at most " + std::to_string(raw::kMaxCounterValues) + " counters");
    } else {
      plan.kinds.push_back(k);
    }
  }
  // The hardware events must be counted together: drop them from the end until the group counts fully.
  while (!plan.kinds.empty() && raw::counter_is_hardware(plan.kinds.back()) &&
         !group_counts_fully(plan.kinds)) {
    plan.unavailable.emplace_back(
        raw::counter_name(plan.kinds.back()),
        "does not fit in one group with the others (the PMU counts fewer events at once)");
    plan.kinds.pop_back();
  }
  return plan;
}

// ---- the opener
// ------------------------------------------------------------------------------------------------

// Named, not anonymous: PerfOpener::Impl (external linkage) holds them.
namespace opener_detail {

struct Command {
  PerfSlots* slots = nullptr;
  uint16_t slot = 0;
  uint32_t generation = 0;
  int32_t tid = 0;  // 0: close
};

// Single producer (the poll thread), single consumer (the opener). Fixed capacity, no allocation.
class CommandRing {
 public:
  bool push(const Command& c) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= kCapacity) return false;
    items_[head % kCapacity] = c;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  bool pop(Command& c) {
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    c = items_[tail % kCapacity];
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

 private:
  static constexpr size_t kCapacity = 8192;
  std::array<Command, kCapacity> items_{};
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) std::atomic<size_t> tail_{0};
};

}  // namespace opener_detail

using opener_detail::Command;
using opener_detail::CommandRing;

struct PerfOpener::Impl {
  PerfOpener& owner;
  double opens_per_s;
  double burst;
  double tokens;
  size_t fds_open = 0;
  CommandRing ring;
  std::deque<Command> waiting;  // opens held back by the rate limit or the descriptor bound (opener thread)
  std::atomic<bool> stop{false};
  mutable std::mutex failure_mutex;
  std::string failure;
  std::thread thread;

  Impl(PerfOpener& o, double rate, size_t b)
      : owner(o), opens_per_s(rate), burst(static_cast<double>(b)), tokens(burst) {}

  void note_failure(const std::string& why) {
    owner.failed_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(failure_mutex);
    if (failure.empty()) failure = why;
  }

  // Returns false when the open must wait (no token or no descriptor room).
  bool try_open(const Command& c) {
    PerfSlots& s = *c.slots;
    if (s.current_generation(c.slot) != c.generation)
      return true;  // the thread is gone already: nothing to do
    const size_t need = s.kinds().size();
    if (tokens < 1 || fds_open + need > owner.max_fds_) return false;
    tokens -= 1;
    PerfGroup& g = s.group(c.slot);
    if (g.is_open()) close_group(s, c.slot);  // a close still queued behind: the slot is reused
    const int error = g.open(c.tid, s.kinds());
    if (error == ESRCH) return true;  // it ended meanwhile: nothing was lost
    if (error != 0) {
      note_failure(perf_open_failure(s.kinds().front(), error));
      return true;
    }
    fds_open += g.count();
    s.group_generation(c.slot) = c.generation;
    owner.opened_.fetch_add(1, std::memory_order_relaxed);
    s.publish(c.slot, c.generation);
    return true;
  }

  void close_group(PerfSlots& s, uint16_t slot) {
    PerfGroup& g = s.group(slot);
    fds_open -= std::min(fds_open, g.count());
    g.close();
  }

  void step(double elapsed_s) {
    tokens = std::min(burst, tokens + elapsed_s * opens_per_s);
    Command c;
    while (ring.pop(c)) {
      if (c.tid != 0) {
        waiting.push_back(c);
      } else if (c.slots->group_generation(c.slot) == c.generation && c.slots->group(c.slot).is_open()) {
        close_group(*c.slots, c.slot);
      }
    }
    // Opens in the order asked; those of threads gone by now are skipped without cost.
    while (!waiting.empty() && try_open(waiting.front())) waiting.pop_front();
    // Held back (rate, descriptors): what waits is only the threads still alive, or churn would grow it.
    if (!waiting.empty()) {
      std::erase_if(waiting,
                    [](const Command& c) { return c.slots->current_generation(c.slot) != c.generation; });
    }
  }

  void run() {
    auto last = std::chrono::steady_clock::now();
    while (!stop.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto now = std::chrono::steady_clock::now();
      step(std::chrono::duration<double>(now - last).count());
      last = now;
    }
  }
};

PerfOpener::PerfOpener(size_t max_fds, double opens_per_s, size_t burst)
    : impl_(std::make_unique<Impl>(*this, opens_per_s, burst)), max_fds_(max_fds) {
  impl_->thread = std::thread([this] { impl_->run(); });
}

PerfOpener::~PerfOpener() {
  impl_->stop = true;
  impl_->thread.join();
}

void PerfOpener::request_open(PerfSlots& slots, uint16_t slot, uint32_t generation, int32_t tid) {
  if (tid == 0 || !impl_->ring.push({&slots, slot, generation, tid}))
    dropped_.fetch_add(1, std::memory_order_relaxed);
}

void PerfOpener::request_close(PerfSlots& slots, uint16_t slot, uint32_t generation) {
  // A close that finds no room leaves the group open until the session ends (the slots close it then).
  if (!impl_->ring.push({&slots, slot, generation, 0})) dropped_.fetch_add(1, std::memory_order_relaxed);
}

std::string PerfOpener::first_failure() const {
  std::lock_guard lock(impl_->failure_mutex);
  return impl_->failure;
}

PerfSlots::PerfSlots(std::vector<raw::CounterKind> kinds, size_t slots)
    : kinds_(std::move(kinds)), slots_(std::make_unique<Slot[]>(slots)) {}

}  // namespace gilspy::sampler
