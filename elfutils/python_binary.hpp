#pragma once
// Finds the CPython runtime in a live process from its mapped files alone: which binary holds
// `_PyRuntime` (libpython or the executable), where it is loaded, and which CPython version it is.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "elfutils/glibc_version.hpp"
#include "elfutils/proc_maps.hpp"

namespace gilspy::elf {

struct PyVersion {
  int major = 0;
  int minor = 0;
  int micro = -1;            // -1: not known (before 3.11 only the file name may tell the version)
  uint32_t hex = 0;          // PY_VERSION_HEX where known (Py_Version, 3.11+), else built from the numbers
  std::string text() const;  // "3.11.7", or "3.9" when the micro version is not known
  bool at_least(int maj, int min) const { return major > maj || (major == maj && minor >= min); }
};

struct PythonBinary {
  std::string path;             // as the target sees it (from /proc/PID/maps)
  std::string open_path;        // the same file from our mount namespace
  bool shared_library = false;  // libpython, as opposed to the executable itself
  bool stripped = false;        // no .symtab (e.g. Debian's /usr/bin/python3.11)
  uint64_t load_bias = 0;       // added to a link-time address gives the runtime address
  uint64_t runtime_addr = 0;    // &_PyRuntime in the target
  uint64_t runtime_size = 0;
  PyVersion version;
  std::string version_source;         // "Py_Version", "soname", "version string", ...
  std::optional<GlibcVersion> glibc;  // the target's own glibc, where its banner tells
};

// Parses "3.11.7", "3.13.0rc1" etc.; nullopt when it is no version.
std::optional<PyVersion> parse_version_text(const std::string& text);
PyVersion version_from_hex(uint32_t hex);

// Throws Error(kNoSuchProcess), Error(kNotPython) with what was looked at, Error(kUnsupportedVersion) for a
// Python found but too old to have `_PyRuntime` (3.6 and older).
PythonBinary locate_python(pid_t pid);
// The same from a maps listing already read (lets tests and the launch loop avoid a second read).
PythonBinary locate_python(pid_t pid, const std::vector<Mapping>& maps);

}  // namespace gilspy::elf
