#pragma once
// Thread ids as the target sees them -> thread ids as /proc here sees them. A target in another PID namespace
// (any container) stores namespace tids (1, 4, 5, ...) in its thread states and in glibc's struct pthread;
// /proc/PID/task/ and everything gilspy writes use ours. The kernel lists both in the `NSpid:` line of
// /proc/PID/task/TID/status: our view first, the target's own namespace last.
//
// Outside a namespace the translation is the identity and costs nothing. Inside one, a table of the target's
// threads is kept and rebuilt (at most once per walk) when an unknown thread shows up; it never allocates.
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gilspy::sampler {

// The last number of a status file's NSpid line (the innermost namespace's id); 0 when absent or malformed.
int32_t innermost_nspid(std::string_view status_text);

class NamespaceTids {
 public:
  static constexpr size_t kCapacity = 8192;  // the target's threads a table holds (more: some map to 0)

  // Whether `pid` lives in another PID namespace than gilspy (compares /proc/self/ns/pid with the target's).
  explicit NamespaceTids(pid_t pid);

  bool translating() const { return translating_; }
  // The next lookup that misses may rescan the target's threads (call once per walk).
  void allow_rescan() { rescan_allowed_ = true; }
  // Our id of the target's thread `ns_tid`; 0 when no thread of the target has it (it exited, or is not one).
  int32_t to_host(int32_t ns_tid);
  // The target's own id of its thread `host_tid` (for output); 0 when unknown.
  int32_t to_namespace(int32_t host_tid) const;

 private:
  void rescan();
  pid_t pid_;
  bool translating_ = false;
  bool rescan_allowed_ = true;
  struct Pair {
    int32_t ns_tid;
    int32_t host_tid;
  };
  std::array<Pair, kCapacity> table_{};
  size_t size_ = 0;
};

}  // namespace gilspy::sampler
