#include "sampler/target/threads.hpp"

#include "base/byte_fields.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.hpp"

namespace gilspy::sampler {

bool task_exists(pid_t pid, int32_t tid) {
  if (tid <= 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task/%d", static_cast<int>(pid), static_cast<int>(tid));
  struct stat st;
  return ::stat(path, &st) == 0;
}

ThreadWalker::ThreadWalker(pid_t pid, const layouts::Layout& layout, uint64_t interp_addr)
    : pid_(pid), layout_(layout), interp_addr_(interp_addr), ns_(pid) {
  const auto& ts = layout_.tstate;
  const Field<uint64_t> fields[] = {ts.prev, ts.next, ts.interp, ts.thread_id,
                                    ts.native_thread_id.value_or(ts.thread_id)};
  span_start_ = UINT32_MAX;
  uint32_t span_end = 0;
  for (const auto& f : fields) {
    span_start_ = std::min(span_start_, f.off);
    span_end = std::max(span_end, f.end());
  }
  span_size_ = span_end - span_start_;
  if (span_size_ > kNodeSpan) {
    throw Error(ErrorKind::kLayoutMismatch, "thread state fields span " + std::to_string(span_size_) +
                                                " bytes, more than " + std::to_string(kNodeSpan) +
                                                " read per node");
  }
}

uint64_t ThreadWalker::identity_addr(const ThreadRef& t) const {
  return t.tstate + layout_.tstate.native_thread_id.value_or(layout_.tstate.thread_id).off;
}

uint64_t ThreadWalker::identity_value(const ThreadRef& t) const {
  return layout_.tstate.native_thread_id ? static_cast<uint64_t>(static_cast<uint32_t>(t.ns_tid))
                                         : t.pthread_id;
}

size_t ThreadWalker::walk(MemoryReader& reader, std::span<ThreadRef> out, bool* truncated, bool* complete,
                          bool changed) {
  const auto& ts = layout_.tstate;
  if (truncated != nullptr) *truncated = false;
  if (complete != nullptr) *complete = false;
  ns_.allow_rescan();
  out = out.first(std::min(out.size(), kMaxThreads));  // the scratch below holds that many
  size_t count = changed ? SIZE_MAX : batch_walk(reader, out);
  const bool batched = count != SIZE_MAX;
  if (batched) {
    if (complete != nullptr) *complete = true;
  } else {
    bool whole = false;
    count = step_walk(reader, out, truncated, &whole);
    if (complete != nullptr) *complete = whole;
    last_count_ = 0;
    if (whole && count <= kBatchMax && count > 0) {
      // Checked in one read next time (the TIDs below are filled in once known).
      for (size_t i = 0; i < count; ++i) last_[i] = out[i];
      last_count_ = count;
    }
  }
  if (!batched && !ts.native_thread_id && count > 0) {
    if (!calibrated_) calibrate_pthread_tid(reader, out.first(count));
    if (pthread_tid_offset_) {
      for (size_t i = 0; i < count; ++i) {
        int32_t tid = 0;
        const ReadRegion r{out[i].pthread_id + *pthread_tid_offset_, &tid, sizeof tid};
        out[i].tid = reader.read({&r, 1}) == 1 ? tid : 0;
      }
    }
    if (!pthread_tid_offset_) last_count_ = 0;  // nothing to check the TIDs with
  }
  if (!batched) {
    for (size_t i = 0; i < last_count_; ++i) last_[i].tid = out[i].tid;
  }
  // The target's tids are its own namespace's; /proc here and the output use ours.
  for (size_t i = 0; i < count; ++i) {
    out[i].ns_tid = out[i].tid;
    out[i].tid = ns_.to_host(out[i].tid);
  }
  // A thread state that is being set up for a new thread does not name its own thread yet: from 3.11 its
  // native_thread_id is 0 until the thread starts; before 3.11 it carries the creating thread's thread_id
  // (the list is newest first, so the creator comes later in it). Such an entry is left out until its
  // thread runs, or the creator would be seen twice. The new thread writes its two ids one after the other
  // (3.10-3.11 thread_run: thread_id, then native_thread_id), so for a moment the entry has its own
  // thread_id and the creator's tid: a tid seen again further down the list marks a placeholder too.
  for (size_t i = 0; i < count; ++i) placeholder_[i] = out[i].tid <= 0 ? 1 : 0;
  mark_earlier_duplicates(out.first(count), [](const ThreadRef& t) { return t.pthread_id; });
  mark_earlier_duplicates(out.first(count), [](const ThreadRef& t) { return static_cast<uint64_t>(t.tid); });
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (placeholder_[i] == 0) out[kept++] = out[i];
  }
  return kept;
}

template <class Key>
void ThreadWalker::mark_earlier_duplicates(std::span<const ThreadRef> list, Key key) {
  // Sorted by (key, position), not compared pairwise: a list of 1 500 threads at one walk per poll.
  for (size_t i = 0; i < list.size(); ++i) order_[i] = static_cast<uint32_t>(i);
  const auto end = order_.begin() + static_cast<ptrdiff_t>(list.size());
  std::sort(order_.begin(), end, [&](uint32_t a, uint32_t b) {
    const uint64_t ka = key(list[a]), kb = key(list[b]);
    return ka != kb ? ka < kb : a < b;
  });
  for (size_t k = 0; k + 1 < list.size(); ++k) {
    if (key(list[order_[k]]) == key(list[order_[k + 1]])) placeholder_[order_[k]] = 1;
  }
}

size_t ThreadWalker::step_walk(MemoryReader& reader, std::span<ThreadRef> out, bool* truncated,
                               bool* complete) {
  const auto& ts = layout_.tstate;
  uint64_t tstate = 0;
  const ReadRegion head = field_region(interp_addr_, layout_.interp.threads_head, &tstate);
  if (reader.read({&head, 1}) != 1) return 0;

  size_t count = 0;
  uint64_t came_from = 0;  // the head's prev is NULL
  // Bound the walk so a corrupted (cyclic) list cannot hang us.
  for (size_t guard = 0; tstate != 0 && guard < 4 * kMaxThreads; ++guard) {
    if (count == out.size()) {
      if (truncated != nullptr) *truncated = true;
      break;
    }
    // The fields a walk needs lie within the first ~200 bytes of a thread state: one region per node (each
    // region costs the kernel a page lookup, about as much as reading the bytes).
    std::array<uint8_t, kNodeSpan> node;
    const ReadRegion region{tstate + span_start_, node.data(), span_size_};
    if (reader.read({&region, 1}) != 1) {
      tstate = 1;  // not the end of the list: the walk is incomplete
      break;
    }
    FieldReader fields(RemoteBytes(node.data(), span_size_), span_start_);
    const uint64_t prev = fields.get(ts.prev), next = fields.get(ts.next), interp = fields.get(ts.interp);
    const uint64_t thread_id = fields.get(ts.thread_id),
                   native = fields.get(ts.native_thread_id.value_or(ts.thread_id));
    if (!fields.complete()) {  // the layout's fields outside the span read: never decided from
      tstate = 1;
      break;
    }
    // Each node must point back at the one we came from: a stale pointer into a freed (or reused) thread
    // state would otherwise end the walk early as if the list ended there.
    if (interp != interp_addr_ || prev != came_from) {
      tstate = 1;
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
  return count;
}

size_t ThreadWalker::batch_walk(MemoryReader& reader, std::span<ThreadRef> out) {
  const auto& ts = layout_.tstate;
  const size_t n = last_count_;
  if (n == 0 || n > out.size()) return SIZE_MAX;
  const bool with_tids = !ts.native_thread_id;
  uint64_t head = 0;
  size_t k = 0;
  batch_regions_[k++] = field_region(interp_addr_, layout_.interp.threads_head, &head);
  for (size_t i = 0; i < n; ++i) {
    batch_regions_[k++] = {last_[i].tstate + span_start_, batch_nodes_.data() + i * kNodeSpan, span_size_};
  }
  if (with_tids) {
    for (size_t i = 0; i < n; ++i) {
      batch_regions_[k++] = {last_[i].pthread_id + *pthread_tid_offset_, &batch_tids_[i], sizeof(int32_t)};
    }
  }
  if (reader.read({batch_regions_.data(), k}) != k || head != last_[0].tstate) return SIZE_MAX;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* node = batch_nodes_.data() + i * kNodeSpan;
    FieldReader fields(RemoteBytes(node, span_size_), span_start_);
    const uint64_t want_prev = i == 0 ? 0 : last_[i - 1].tstate;
    const uint64_t want_next = i + 1 < n ? last_[i + 1].tstate : 0;
    if (fields.get(ts.interp) != interp_addr_ || fields.get(ts.prev) != want_prev ||
        fields.get(ts.next) != want_next) {
      return SIZE_MAX;
    }
    ThreadRef& t = out[i];
    t.tstate = last_[i].tstate;
    t.pthread_id = fields.get(ts.thread_id);
    if (with_tids) {
      // Before 3.11 the TID word lies in struct pthread: valid only while thread_id still names it.
      if (t.pthread_id != last_[i].pthread_id) return SIZE_MAX;
      t.tid = batch_tids_[i];
    } else {
      t.tid = static_cast<int32_t>(fields.get(*ts.native_thread_id));
    }
    if (!fields.complete()) return SIZE_MAX;
    last_[i].tid = t.tid;  // a thread state set up for a new thread gets its TID later
  }
  return n;
}

void ThreadWalker::calibrate_pthread_tid(MemoryReader& reader, std::span<const ThreadRef> threads) {
  // A candidate offset is right when, for most threads, the int there is a live TID of the process. Most, not
  // all: a target can forge one thread state's thread_id, and requiring every thread to fit would then find
  // no offset and lose every thread for the whole recording. The forged thread's TID reads as no live thread,
  // and the walk leaves it out like any thread whose id is not known.
  auto fits = [&](uint32_t off) {
    size_t live = 0;
    for (const auto& t : threads) {
      int32_t tid = 0;
      const ReadRegion r{t.pthread_id + off, &tid, sizeof tid};
      if (t.pthread_id != 0 && reader.read({&r, 1}) == 1 && task_exists(pid_, ns_.to_host(tid))) ++live;
    }
    return live > 0 && 2 * live >= threads.size();
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
