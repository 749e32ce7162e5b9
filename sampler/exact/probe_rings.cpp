#include "sampler/exact/probe_rings.hpp"

#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "base/error.hpp"
#include "base/proc_files.hpp"

namespace gilspy::sampler::exact {

namespace {

std::vector<pid_t> thread_ids(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw Error(ErrorKind::kNoSuchProcess, "process " + std::to_string(pid) + " is gone");
  std::vector<pid_t> tids;
  while (const dirent* e = ::readdir(d)) {
    pid_t tid = 0;
    const std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), tid).ec == std::errc{} && tid > 0)
      tids.push_back(tid);
  }
  ::closedir(d);
  return tids;
}

// One descriptor per event: a process with a few hundred threads on a large machine needs thousands.
void raise_file_limit(size_t wanted) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= wanted + 256) return;
  r.rlim_cur = std::min<rlim_t>(r.rlim_max, wanted + 256);
  ::setrlimit(RLIMIT_NOFILE, &r);
}

const char* event_name(ProbeKind k) {
  switch (k) {
    case ProbeKind::kTakeEntry:
      return "take";
    case ProbeKind::kTakeReturn:
      return "taken";
    case ProbeKind::kDropEntry:
      return "drop";
  }
  return "probe";
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!part.empty() && (part.back() == '\n' || part.back() == ' ')) part.remove_suffix(1);
    int lo = 0, hi = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), lo);
    if (ec != std::errc{}) continue;
    hi = lo;
    if (end != part.data() + part.size() && *end == '-')
      std::from_chars(end + 1, part.data() + part.size(), hi);
    for (int c = lo; c <= hi && c - lo < 65536; ++c) cpus.push_back(c);
  }
  return cpus;
}

ProbeRings::ProbeRings(pid_t pid, const elf::ElfImage& image, const GilProbes& probes)
    : pid_(pid), probes_(probes) {
  const std::string tracefs = find_tracefs();
  TracefsUprobes::remove_stale(tracefs);
  defined_ = std::make_unique<TracefsUprobes>(
      tracefs, "gilspy_" + std::to_string(::getpid()) + "_" + std::to_string(pid));
  const auto online = read_proc_file("/sys/devices/system/cpu/online");
  cpus_ = online ? parse_cpu_list(*online) : std::vector<int>{};
  if (cpus_.empty()) {
    for (long c = 0; c < ::sysconf(_SC_NPROCESSORS_ONLN); ++c) cpus_.push_back(static_cast<int>(c));
  }
  rings_.resize(cpus_.size());
  try {
    // The kernel resolves the binary through our own descriptor of it, never a path in the target's tree.
    std::vector<uint64_t> tracepoints;
    for (size_t i = 0; i < probes_.points.size(); ++i) {
      const ProbePoint& p = probes_.points[i];
      tracepoints.push_back(defined_->define(std::string(event_name(p.kind)) + "_" + std::to_string(i),
                                             image.descriptor_path(), p.file_offset,
                                             p.kind == ProbeKind::kTakeReturn));
    }
    // Threads started while we open inherit the events of the thread that started them, if its came
    // first; else the next listing finds them.
    std::vector<pid_t> done;
    for (int round = 0; round < 16; ++round) {
      std::vector<pid_t> fresh;
      for (const pid_t tid : thread_ids(pid)) {
        if (std::find(done.begin(), done.end(), tid) == done.end()) fresh.push_back(tid);
      }
      if (fresh.empty()) break;
      const size_t total = (done.size() + fresh.size()) * cpus_.size() * probes_.points.size();
      if (total > kMaxEvents) {
        throw Error(ErrorKind::kUnavailable,
                    std::to_string(done.size() + fresh.size()) + " threads x " +
                        std::to_string(cpus_.size()) + " CPUs x " + std::to_string(probes_.points.size()) +
                        " probe points would be " + std::to_string(total) + " probe events, more than " +
                        std::to_string(kMaxEvents) +
                        "; launch the program under gilspy instead (the threads it starts later cost none)");
      }
      raise_file_limit(total + cpus_.size());
      for (const pid_t tid : fresh) {
        open_thread(tid, tracepoints);
        done.push_back(tid);
      }
    }
    threads_ = done.size();
  } catch (...) {
    close_all();  // nothing left in the target
    throw;
  }
}

ProbeRings::~ProbeRings() {
  close_all();
}

void ProbeRings::close_all() {
  for (const Event& e : events_) ::close(e.fd);  // the breakpoints go with the last one (~50 ms)
  events_.clear();
  for (Ring& r : rings_) {
    if (r.base != nullptr) ::munmap(r.base, r.length);
    r = {};
  }
  defined_.reset();  // now that no event uses them
}

void ProbeRings::open_thread(pid_t tid, const std::vector<uint64_t>& tracepoints) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t c = 0; c < cpus_.size(); ++c) {
    for (size_t i = 0; i < probes_.points.size(); ++i) {
      const int fd = open_tracepoint_event(tracepoints[i], tid, cpus_[c], true);
      if (fd == -ESRCH) return;  // the thread ended meanwhile: nothing of it to watch
      if (fd < 0) throw Error(ErrorKind::kUnavailable, probe_open_failure(-fd));
      events_.push_back({fd, 0, probes_.points[i].kind});  // ids only grow: events_ stays sorted by id
      bool ok = ::ioctl(fd, PERF_EVENT_IOC_ID, &events_.back().id) == 0;
      Ring& ring = rings_[c];
      if (ok && ring.fd < 0) {
        const size_t length = (1 + kRingPages) * page;
        void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ok = base != MAP_FAILED;
        if (ok) ring = {cpus_[c], fd, static_cast<uint8_t*>(base), length};
      } else if (ok) {
        ok = ::ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring.fd) == 0;
      }
      if (!ok) {
        const int err = errno;
        throw Error(
            ErrorKind::kUnavailable,
            std::string("cannot set up a probe's ring buffer: ") + std::strerror(err) +
                (err == EPERM ? " (perf_event_mlock_kb, or RLIMIT_MEMLOCK without CAP_IPC_LOCK)" : ""));
      }
    }
  }
}

size_t ProbeRings::read(std::span<ProbeHit> out, size_t used) {
  alignas(8) uint8_t record[256];
  for (Ring& r : rings_) {
    if (r.base == nullptr) continue;
    auto* meta = reinterpret_cast<perf_event_mmap_page*>(r.base);
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    const uint64_t size = meta->data_size;
    const uint8_t* data = r.base + meta->data_offset;
    auto copy = [&](uint8_t* to, uint64_t from, size_t n) {
      const uint64_t at = from % size;
      const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size - at));
      std::memcpy(to, data + at, first);
      std::memcpy(to + first, data, n - first);
    };
    while (tail < head && used < out.size()) {
      perf_event_header h;
      copy(reinterpret_cast<uint8_t*>(&h), tail, sizeof h);
      if (h.size < sizeof h) break;  // cannot be: the ring is the kernel's
      if (h.size <= sizeof record) {
        copy(record, tail, h.size);
        parse(record, static_cast<uint16_t>(h.type), out, used);
      }
      tail += h.size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  }
  return used;
}

void ProbeRings::parse(const uint8_t* record, uint16_t type, std::span<ProbeHit> out, size_t& used) {
  const uint8_t* body = record + sizeof(perf_event_header);
  auto word = [&](size_t i) {
    uint64_t w = 0;
    std::memcpy(&w, body + 8 * i, 8);
    return w;
  };
  if (type == PERF_RECORD_SAMPLE) {
    // PERF_SAMPLE_IDENTIFIER (an inherited event's is its parent's: ours), then TID (pid, tid), then TIME.
    const uint64_t id = word(0);
    const uint64_t pid_tid = word(1);
    const auto pid = static_cast<pid_t>(pid_tid & 0xffffffffu);
    const auto tid = static_cast<int32_t>(pid_tid >> 32);
    const auto it = std::lower_bound(events_.begin(), events_.end(), id,
                                     [](const Event& e, uint64_t want) { return e.id < want; });
    if (pid != pid_ || it == events_.end() || it->id != id) {
      ++counts_.foreign;
      return;
    }
    ++counts_.hits;
    out[used++] = {static_cast<int64_t>(word(2)), tid, it->kind};
  } else if (type == PERF_RECORD_LOST) {
    counts_.lost += word(1);
  } else if (type == PERF_RECORD_THROTTLE) {
    ++counts_.throttled;
  }
}

}  // namespace gilspy::sampler::exact
