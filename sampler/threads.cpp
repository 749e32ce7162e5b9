#include "sampler/threads.hpp"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstring>

namespace gilspy::sampler {

bool task_exists(pid_t pid, int32_t tid) {
  if (tid <= 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task/%d", static_cast<int>(pid), static_cast<int>(tid));
  struct stat st;
  return ::stat(path, &st) == 0;
}

uint64_t ThreadWalker::identity_addr(const ThreadRef& t) const {
  return t.tstate + layout_.tstate.native_thread_id.value_or(layout_.tstate.thread_id);
}

uint64_t ThreadWalker::identity_value(const ThreadRef& t) const {
  return layout_.tstate.native_thread_id ? static_cast<uint64_t>(t.tid) : t.pthread_id;
}

size_t ThreadWalker::walk(MemoryReader& reader, std::span<ThreadRef> out, bool* truncated, bool* complete) {
  const auto& ts = layout_.tstate;
  if (truncated != nullptr) *truncated = false;
  if (complete != nullptr) *complete = false;
  uint64_t tstate = 0;
  const ReadRegion head{interp_addr_ + layout_.interp.threads_head, &tstate, sizeof tstate};
  if (reader.read({&head, 1}) != 1) return 0;

  size_t count = 0;
  uint64_t came_from = 0;  // the head's prev is NULL
  // Bound the walk so a corrupted (cyclic) list cannot hang us.
  for (size_t guard = 0; tstate != 0 && guard < 4 * kMaxThreads; ++guard) {
    if (count == out.size()) {
      if (truncated != nullptr) *truncated = true;
      break;
    }
    uint64_t prev = 0, next = 0, interp = 0, thread_id = 0, native = 0;
    std::array<ReadRegion, 5> regions = {ReadRegion{tstate + ts.prev, &prev, 8}, ReadRegion{tstate + ts.next, &next, 8},
                                         ReadRegion{tstate + ts.interp, &interp, 8},
                                         ReadRegion{tstate + ts.thread_id, &thread_id, 8},
                                         ReadRegion{tstate + ts.native_thread_id.value_or(ts.thread_id), &native, 8}};
    // Each node must point back at the one we came from: a stale pointer into a freed (or reused) thread
    // state would otherwise end the walk early as if the list ended there.
    if (reader.read(regions) != regions.size() || interp != interp_addr_ || prev != came_from) {
      tstate = 1;  // not the end of the list: the walk is incomplete
      break;
    }
    ThreadRef& t = out[count++];
    t.tstate = tstate;
    t.pthread_id = thread_id;
    t.tid = ts.native_thread_id ? static_cast<int32_t>(native) : 0;
    came_from = tstate;
    tstate = next;
  }
  if (complete != nullptr) *complete = tstate == 0 && (truncated == nullptr || !*truncated);
  if (!ts.native_thread_id && count > 0) {
    if (!calibrated_) calibrate_pthread_tid(reader, out.first(count));
    if (pthread_tid_offset_) {
      for (size_t i = 0; i < count; ++i) {
        int32_t tid = 0;
        const ReadRegion r{out[i].pthread_id + *pthread_tid_offset_, &tid, sizeof tid};
        out[i].tid = reader.read({&r, 1}) == 1 ? tid : 0;
      }
    }
  }
  // A thread state that is being set up for a new thread does not name its own thread yet: from 3.11 its
  // native_thread_id is 0 until the thread starts; before 3.11 it carries the creating thread's thread_id
  // (the list is newest first, so the creator comes later in it). Such an entry is left out until its
  // thread runs, or the creator would be seen twice.
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    bool placeholder = out[i].tid <= 0;
    for (size_t k = i + 1; k < count && !placeholder; ++k) placeholder = out[k].pthread_id == out[i].pthread_id;
    if (!placeholder) out[kept++] = out[i];
  }
  return kept;
}

void ThreadWalker::calibrate_pthread_tid(MemoryReader& reader, std::span<const ThreadRef> threads) {
  // A candidate offset is right when, for every thread, the int there is a live TID of the process.
  auto fits = [&](uint32_t off) {
    for (const auto& t : threads) {
      int32_t tid = 0;
      const ReadRegion r{t.pthread_id + off, &tid, sizeof tid};
      if (t.pthread_id == 0 || reader.read({&r, 1}) != 1 || !task_exists(pid_, tid)) return false;
    }
    return true;
  };
  calibrated_ = true;
  if (fits(layouts::kGlibc.pthread_tid)) {
    pthread_tid_offset_ = layouts::kGlibc.pthread_tid;
    return;
  }
  for (uint32_t off = 0; off < 0x800; off += 4) {
    if (fits(off)) {
      pthread_tid_offset_ = off;
      return;
    }
  }
}

}  // namespace gilspy::sampler
