#pragma once
// The interpreter's thread states and the OS thread behind each one.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cpython_layouts/layout.hpp"
#include "sampler/proc/ns_tids.hpp"
#include "sampler/remote/memory_reader.hpp"

namespace gilspy::sampler {

struct ThreadRef {
  uint64_t tstate = 0;      // PyThreadState* in the target
  uint64_t pthread_id = 0;  // tstate->thread_id
  int32_t tid = 0;          // OS thread id as /proc here sees it, 0 when it could not be found
  int32_t ns_tid = 0;       // the same thread's id in the target's PID namespace (== tid outside containers)
};

// Does /proc/PID/task/TID exist?
bool task_exists(pid_t pid, int32_t tid);

class ThreadWalker {
 public:
  // Per process; more are counted, not followed (said in the summary). The cap also bounds one walk's cost
  // (sorted, n log n) and the walk's scratch, allocated up front (about 1 MB per process).
  static constexpr size_t kMaxThreads = 2048;

  ThreadWalker(pid_t pid, const layouts::Layout& layout, uint64_t interp_addr);

  // Walks the thread list into `out` and returns how many were found (at most out.size(); `truncated` tells
  // if there were more). Never allocates. A thread state that cannot be read or whose `interp` does not point
  // back ends the walk early (the list changed under us: a thread exited while we followed it); then
  // `complete` is false and a missing thread says nothing about whether it still exists.
  // `changed`: the caller knows the list changed (an unknown holder): the one-read check is skipped.
  size_t walk(MemoryReader& reader, std::span<ThreadRef> out, bool* truncated = nullptr,
              bool* complete = nullptr, bool changed = false);

  // A walk first checks the list it found last time in one read (the head, every node it had, and before 3.11
  // each thread's TID word): when every link still points where it did, that is the walk, one system call
  // instead of one or two per thread. Any difference, and the list is walked node by node.
  static constexpr size_t kBatchMax = kMaxThreads;  // a list of 1 500: 3 system calls instead of 1 500

  // The word that changes when a thread state is freed or reused: per poll, the sampler reads it for each
  // known thread and compares with `identity_value`.
  uint64_t identity_addr(const ThreadRef& t) const;
  uint64_t identity_value(const ThreadRef& t) const;

  // Before 3.11 the TID comes from glibc's struct pthread. The offset is a guess (x86-64 glibc 2.36) that is
  // checked against /proc/PID/task on the first walk and searched for when wrong.
  std::optional<uint32_t> pthread_tid_offset() const { return pthread_tid_offset_; }
  // Whether the target is in another PID namespace (its tids are translated to ours).
  bool in_other_pid_namespace() const { return ns_.translating(); }

 private:
  void calibrate_pthread_tid(MemoryReader& reader, std::span<const ThreadRef> threads);
  // The last complete walk's list, checked in one read; SIZE_MAX when it differs (or there is none).
  size_t batch_walk(MemoryReader& reader, std::span<ThreadRef> out);
  size_t step_walk(MemoryReader& reader, std::span<ThreadRef> out, bool* truncated, bool* complete);
  // Marks in placeholder_ every entry of `list` that a later one shares key(entry) with.
  template <class Key>
  void mark_earlier_duplicates(std::span<const ThreadRef> list, Key key);
  pid_t pid_;
  layouts::Layout layout_;
  uint64_t interp_addr_;
  static constexpr uint32_t kNodeSpan =
      256;                                   // bytes read per thread state; the table's offsets fit (checked)
  uint32_t span_start_ = 0, span_size_ = 0;  // the part of a thread state a walk reads
  std::optional<uint32_t> pthread_tid_offset_;
  bool calibrated_ = false;
  NamespaceTids ns_;
  // The last complete walk (tstate, pthread_id, the target's own tid), and room for checking it in one read;
  // allocated here, so that a walk never allocates.
  std::vector<ThreadRef> last_ = std::vector<ThreadRef>(kBatchMax);
  size_t last_count_ = 0;
  std::vector<uint8_t> batch_nodes_ = std::vector<uint8_t>(kBatchMax * kNodeSpan);
  std::vector<int32_t> batch_tids_ = std::vector<int32_t>(kBatchMax);
  std::vector<ReadRegion> batch_regions_ = std::vector<ReadRegion>(1 + 2 * kBatchMax);
  std::vector<uint32_t> order_ = std::vector<uint32_t>(kMaxThreads);  // scratch of the placeholder check
  std::vector<uint8_t> placeholder_ = std::vector<uint8_t>(kMaxThreads);
};

}  // namespace gilspy::sampler
