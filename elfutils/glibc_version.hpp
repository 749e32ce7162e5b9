#pragma once
// Which glibc a process runs: its structures (pthread_cond_t, struct pthread) change between releases, and a
// container or a distribution interpreter may bring a glibc other than this machine's.
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "elfutils/proc_maps.hpp"

namespace gilspy::elf {

struct GlibcVersion {
  int major = 0;
  int minor = 0;
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// From glibc's banner ("GNU C Library ... release version 2.43.") in the bytes of a libc; nullopt without it.
std::optional<GlibcVersion> glibc_version_from_banner(std::string_view bytes);

// The glibc mapped in the process (libc.so.6 / libc-2.NN.so), else one linked into `fallback_path` (a static
// executable); nullopt when neither tells. Files are opened inside the process's root, like the interpreter.
std::optional<GlibcVersion> locate_glibc(pid_t pid, const std::vector<Mapping>& maps,
                                         const std::string& fallback_path);

}  // namespace gilspy::elf
