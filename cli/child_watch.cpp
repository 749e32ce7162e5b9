#include "cli/child_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "base/proc_files.hpp"
#include "cli/process_discovery.hpp"

namespace gilspy::cli {

namespace {

constexpr int kScanEveryDrains = 40;  // 2 s: a /proc scan reads one small file per process

}  // namespace

void ChildWatchSink::stats(const LiveStats&) {
  if (calls_++ % kScanEveryDrains == 0) scan();
}

void ChildWatchSink::scan() {
  for (const pid_t pid : python_descendants(targets_)) {
    if (std::find(targets_.begin(), targets_.end(), pid) == targets_.end()) unrecorded_.insert(pid);
  }
}

}  // namespace gilspy::cli
