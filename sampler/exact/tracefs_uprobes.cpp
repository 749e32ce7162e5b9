#include "sampler/exact/tracefs_uprobes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/proc_files.hpp"

namespace gilspy::sampler::exact {

namespace {

// One line to uprobe_events; errno on failure (0: done).
int write_definition(const std::string& tracefs, const std::string& line) {
  const int fd = ::open((tracefs + "/uprobe_events").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = n == static_cast<ssize_t>(line.size()) ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

std::string find_tracefs() {
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    struct stat st {};
    if (::stat((std::string(dir) + "/uprobe_events").c_str(), &st) == 0) return dir;
  }
  throw Error(
      ErrorKind::kUnavailable,
      "--exact needs tracefs with uprobe events: mount it (mount -t tracefs nodev /sys/kernel/tracing) "
      "on a kernel built with uprobes");
}

TracefsUprobes::TracefsUprobes(std::string tracefs, std::string group)
    : tracefs_(std::move(tracefs)), group_(std::move(group)) {}

TracefsUprobes::~TracefsUprobes() {
  for (const std::string& name : names_) write_definition(tracefs_, "-:" + group_ + "/" + name + "\n");
}

uint64_t TracefsUprobes::define(const std::string& name, const std::string& path, uint64_t offset,
                                bool retprobe) {
  const std::string line =
      fmt::format("{}:{}/{} {}:{:#x}\n", retprobe ? 'r' : 'p', group_, name, path, offset);
  if (const int err = write_definition(tracefs_, line); err != 0) {
    throw Error(ErrorKind::kUnavailable,
                fmt::format("the kernel refused a uprobe in {}/uprobe_events ({}){}", tracefs_,
                            std::strerror(err), err == EACCES || err == EPERM ? ": --exact needs root" : ""));
  }
  names_.push_back(name);
  const auto id_text = read_proc_file(fmt::format("{}/events/{}/{}/id", tracefs_, group_, name));
  uint64_t id = 0;
  if (!id_text || std::from_chars(id_text->data(), id_text->data() + id_text->size(), id).ec != std::errc{}) {
    throw Error(ErrorKind::kUnavailable, "the kernel gave the uprobe " + group_ + "/" + name + " no id");
  }
  return id;
}

void TracefsUprobes::remove_stale(const std::string& tracefs) {
  DIR* d = ::opendir((tracefs + "/events").c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view group(e->d_name);
    if (!group.starts_with("gilspy_")) continue;
    pid_t owner = 0;
    const auto rest = group.substr(7);
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), owner);
    if (ec != std::errc{} || owner <= 0 || *end != '_') continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // its gilspy still runs (or may)
    stale.emplace_back(group);
  }
  ::closedir(d);
  for (const std::string& group : stale) {
    DIR* g = ::opendir((tracefs + "/events/" + group).c_str());
    if (g == nullptr) continue;
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(g)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') names.emplace_back(e->d_name);
    }
    ::closedir(g);
    for (const std::string& name : names) write_definition(tracefs, "-:" + group + "/" + name + "\n");
  }
}

int open_tracepoint_event(uint64_t id, pid_t tid, int cpu, bool inherit) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = id;
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;  // the poll loop's clock: the samples need no conversion
  attr.inherit = inherit ? 1 : 0;
  attr.inherit_thread = inherit ? 1 : 0;  // a fork()ed child is another process: not followed
  attr.sample_id_all = 1;                 // lost-record notices carry the identifier too
  const long fd = ::syscall(SYS_perf_event_open, &attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

std::string probe_open_failure(int error) {
  switch (error) {
    case EACCES:
    case EPERM:
      return "the kernel refused a probe event (" + std::string(std::strerror(error)) +
             "): --exact needs root, and a container may forbid perf_event_open altogether";
    case EMFILE:
    case ENFILE:
      return "out of file descriptors for the probes (one per thread, CPU and probe point)";
    case ENOSPC:
    case ENOMEM:
      return "the kernel has no room for more probes (" + std::string(std::strerror(error)) + ")";
    default:
      return "perf_event_open failed for a probe: " + std::string(std::strerror(error));
  }
}

}  // namespace gilspy::sampler::exact
