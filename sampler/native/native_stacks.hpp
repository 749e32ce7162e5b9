#pragma once
// Native (C) stacks of a live process's threads, for `gilspy dump --native`: where a C extension holds the
// GIL, or what C call a thread without it is in. Through elfutils' libdwfl (Debian's libdw-dev): it attaches
// to one thread at a time with ptrace, reads its registers and stack, unwinds with the binaries' CFI and lets
// the thread go. This is the one place gilspy stops a thread: registers cannot be read while a thread runs,
// and the recording samplers never stop the target, so native stacks are for a one-shot look, not for
// sampling. Symbols come from each mapped binary's own .symtab / .dynsym (opened inside the process's root,
// no symlink followed); separate debug files are not looked for (a host path chosen by the target).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gilspy::sampler {

struct NativeFrame {
  uint64_t pc = 0;
  std::string function = {};  // demangled; empty when no symbol covers pc
  uint64_t offset = 0;        // pc - the symbol's start
  std::string module = {};    // the mapped file's name (last component), "[vdso]", or empty
};

struct NativeStack {
  int64_t tid = 0;
  std::vector<NativeFrame> frames = {};  // innermost first
  bool truncated = false;                // more than max_depth frames
  std::string error = {};  // why nothing (or not all) could be unwound; empty when it ended cleanly
  int64_t stopped_ns = 0;  // how long the thread was held by ptrace for it
};

// Unwinds each of `tids` (threads of `pid`), one after the other, at most `max_depth` frames each. Throws
// Error(kPermission) when the process cannot be traced (not root nor CAP_SYS_PTRACE, a debugger attached)
// and Error(kNoSuchProcess) when it is gone; a thread that cannot be unwound gets its `error` instead.
std::vector<NativeStack> read_native_stacks(pid_t pid, const std::vector<int64_t>& tids, int max_depth = 64);

}  // namespace gilspy::sampler
