#include "elfutils/python_binary.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "elfutils/elf_image.hpp"

namespace gilspy::elf {

std::string PyVersion::text() const {
  std::string t = std::to_string(major) + "." + std::to_string(minor);
  if (micro < 0) return t;
  t += "." + std::to_string(micro);
  // A pre-release says so (3.16.0a1, 3.15.0rc2), as sys.version does: PY_VERSION_HEX's low byte is the
  // release level (0xA alpha, 0xB beta, 0xC candidate, 0xF final) and the serial.
  const unsigned level = (hex >> 4) & 0xF, serial = hex & 0xF;
  if (level == 0xA || level == 0xB || level == 0xC) {
    t += (level == 0xA ? "a" : level == 0xB ? "b" : "rc") + std::to_string(serial);
  }
  return t;
}

namespace {

// Reads a run of digits at `pos` (at most 4, so no overflow); -1 when there is none.
int digits_at(const std::string& s, size_t* pos) {
  int value = -1;
  for (size_t n = 0; *pos < s.size() && n < 4 && std::isdigit(static_cast<unsigned char>(s[*pos]));
       ++n, ++*pos) {
    value = (value < 0 ? 0 : value * 10) + (s[*pos] - '0');
  }
  return value;
}

}  // namespace

std::optional<PyVersion> parse_version_text(const std::string& text) {
  // MAJOR.MINOR[.MICRO], anything after that (rc1, +) ignored.
  size_t pos = 0;
  PyVersion v;
  v.major = digits_at(text, &pos);
  if (v.major < 0 || pos >= text.size() || text[pos] != '.') return std::nullopt;
  ++pos;
  v.minor = digits_at(text, &pos);
  if (v.minor < 0) return std::nullopt;
  if (pos + 1 < text.size() && text[pos] == '.') {
    ++pos;
    v.micro = digits_at(text, &pos);
  }
  v.hex = (static_cast<uint32_t>(v.major) << 24) | (static_cast<uint32_t>(v.minor) << 16) |
          (static_cast<uint32_t>(std::max(v.micro, 0)) << 8) | 0xF0;
  return v;
}

PyVersion version_from_hex(uint32_t hex) {
  PyVersion v;
  v.major = static_cast<int>((hex >> 24) & 0xFF);
  v.minor = static_cast<int>((hex >> 16) & 0xFF);
  v.micro = static_cast<int>((hex >> 8) & 0xFF);
  v.hex = hex;
  return v;
}

namespace {

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "libpython3.9.so.1.0" -> 3.9 ; "python3.11" -> 3.11 ; "python3" -> nothing.
std::optional<PyVersion> version_from_name(const std::string& name) {
  for (size_t pos = name.find("python"); pos != std::string::npos; pos = name.find("python", pos + 1)) {
    auto v = parse_version_text(name.substr(pos + 6));
    if (v) {
      v->micro = -1;  // "libpython3.9.so.1.0": the ".so" is no micro version
      v->hex &= 0xFFFF00FF;
      return v;
    }
  }
  return std::nullopt;
}

// "3.9.18", "3.13.0rc1", "3.12.1+": the form of PY_VERSION.
bool looks_like_py_version(const std::string& token) {
  size_t pos = 0, dots = 0;
  while (pos < token.size() && (std::isdigit(static_cast<unsigned char>(token[pos])) || token[pos] == '.')) {
    dots += token[pos] == '.' ? 1 : 0;
    ++pos;
  }
  if (dots != 2 || pos == 0 || token[pos - 1] == '.') return false;
  for (; pos < token.size(); ++pos) {
    if (!std::isalnum(static_cast<unsigned char>(token[pos])) && token[pos] != '+') return false;
  }
  return true;
}

// Before 3.11 there is no Py_Version: the PY_VERSION literal ("3.9.18", what Py_GetVersion() prints first)
// sits NUL-terminated in .rodata. The linker merges a string into the tail of a longer one that ends the same
// way, and a build whose prefix ends in the version (pyenv: /root/.pyenv/versions/3.9.18; the build directory
// .../Python-3.9.18) keeps the literal only as such a tail. So look for "<major>.<minor>.<micro...>\0" that
// starts a string or follows '/' or '-', and accept it only when every such tail says the same version: a
// version is read from the binary or not at all, never guessed.
std::optional<PyVersion> version_from_rodata(const ElfImage& image, const PyVersion& hint) {
  const auto rodata = image.section_bytes(".rodata");
  if (!rodata) return std::nullopt;
  const std::string needle = std::to_string(hint.major) + "." + std::to_string(hint.minor) + ".";
  const std::string_view hay(reinterpret_cast<const char*>(rodata->data()), rodata->size());
  std::optional<std::string> whole, tail;  // a string of its own; a tail of a longer string
  bool tails_disagree = false;
  for (size_t pos = hay.find(needle); pos != std::string_view::npos; pos = hay.find(needle, pos + 1)) {
    const char before = pos == 0 ? '\0' : hay[pos - 1];
    if (before != '\0' && before != '/' && before != '-') continue;
    const size_t end = hay.find('\0', pos);
    if (end == std::string_view::npos || end - pos > 16) continue;
    const std::string token(hay.substr(pos, end - pos));
    if (!looks_like_py_version(token)) continue;
    if (before == '\0') {
      whole = token;
      break;
    }
    if (tail && *tail != token) tails_disagree = true;
    tail = token;
  }
  if (whole) return parse_version_text(*whole);
  if (tail && !tails_disagree) return parse_version_text(*tail);
  return std::nullopt;
}

struct Candidate {
  std::string path;
  uint64_t offset0_start = 0;  // start of its offset-0 mapping
  bool is_libpython = false;
};

std::vector<Candidate> candidates_from_maps(const std::vector<Mapping>& maps) {
  std::vector<Candidate> libs, others;
  for (const auto& m : maps) {
    if (m.path.empty() || m.path[0] != '/' || m.offset != 0) continue;
    const std::string base = basename_of(m.path);
    bool seen = false;
    for (const auto* list : {&libs, &others}) {
      for (const auto& c : *list) seen = seen || c.path == m.path;
    }
    if (seen) continue;
    if (base.rfind("libpython", 0) == 0) {
      libs.push_back({m.path, m.start, true});
    } else if (base.find(".so") == std::string::npos) {
      others.push_back({m.path, m.start, false});  // executables (the first one is the main program)
    }
  }
  libs.insert(libs.end(), others.begin(), others.end());
  return libs;
}

// Which CPython the binary holding _PyRuntime is: Py_Version (3.11+), else the version string in .rodata
// near the one its file name says, else any 3.x's (an embedding executable). Sets bin.version and
// bin.version_source; leaves the source empty when nothing tells.
void read_python_version(const ElfImage& image, const std::optional<PyVersion>& name_version,
                         PythonBinary& bin) {
  if (const auto sym = image.symbol("Py_Version")) {
    if (const auto bytes = image.read_vaddr(sym->value, 4)) {
      uint32_t hex = 0;
      std::memcpy(&hex, bytes->data(), 4);
      bin.version = version_from_hex(hex);
      bin.version_source = "Py_Version";
    }
  }
  if (bin.version_source.empty() && name_version) {
    const auto exact = version_from_rodata(image, *name_version);
    bin.version = exact ? *exact : *name_version;
    bin.version_source = exact ? "version string in .rodata" : "file name";
  }
  if (bin.version_source.empty()) {
    // No name hint (an embedding executable): try every 3.x the tool knows of.
    for (int minor = 7; minor <= 20 && bin.version_source.empty(); ++minor) {
      if (const auto exact = version_from_rodata(image, *parse_version_text("3." + std::to_string(minor)))) {
        bin.version = *exact;
        bin.version_source = "version string in .rodata";
      }
    }
  }
}

// The candidate whose image holds _PyRuntime (`runtime`), described.
PythonBinary python_binary_of(pid_t pid, const std::vector<Mapping>& maps, const Candidate& cand,
                              const ElfImage& image, const Symbol& runtime,
                              const std::optional<PyVersion>& name_version) {
  PythonBinary bin;
  bin.path = cand.path;
  bin.open_path = path_in_process(pid, cand.path);
  bin.shared_library = cand.is_libpython;
  bin.stripped = !image.has_symtab();
  bin.load_bias = image.is_executable() ? 0 : cand.offset0_start - image.first_load_vaddr();
  bin.runtime_addr = runtime.value + bin.load_bias;
  bin.runtime_size = runtime.size;
  read_python_version(image, name_version, bin);
  if (bin.version_source.empty()) {
    throw Error(ErrorKind::kNotPython,
                "found _PyRuntime in " + cand.path + " but cannot tell which CPython version it is");
  }
  bin.glibc = locate_glibc(pid, maps, cand.path);
  return bin;
}

// No candidate held _PyRuntime: says why, most useful first (too old a Python, the process gone, the
// interpreter unreadable, nothing mapped, no _PyRuntime in what was looked at).
[[noreturn]] void refuse_not_found(pid_t pid, const std::optional<PyVersion>& old_python,
                                   const std::string& unreadable_python,
                                   const std::vector<std::string>& looked_at) {
  if (old_python) {
    throw Error(ErrorKind::kUnsupportedVersion,
                "process " + std::to_string(pid) + " runs Python " + std::to_string(old_python->major) + "." +
                    std::to_string(old_python->minor) +
                    ", which gilspy does not support (it supports CPython 3.8 and newer)");
  }
  // Before saying "not Python": the process may have exited while its files were read, or its interpreter
  // may be there but unreadable (permission denied, a file gone): say that, it is what to act on.
  if (::kill(pid, 0) != 0 && errno == ESRCH) {
    throw Error(ErrorKind::kNoSuchProcess,
                "process " + std::to_string(pid) + " exited while gilspy attached");
  }
  if (!unreadable_python.empty()) {
    throw Error(ErrorKind::kElf,
                "process " + std::to_string(pid) + " looks like Python, but " + unreadable_python);
  }
  if (looked_at.empty()) {
    // Nothing mapped at all: a process that has just exited (a zombie until its parent reaps it, such as a
    // child gilspy found as it ended), or a kernel thread.
    const auto state = process_state(pid);
    if (!state || *state == 'Z' || *state == 'X') {
      throw Error(ErrorKind::kNoSuchProcess,
                  "process " + std::to_string(pid) + " exited while gilspy attached");
    }
    throw Error(ErrorKind::kNotPython, "process " + std::to_string(pid) +
                                           " is not a CPython 3 process (it maps no executable or library: a "
                                           "kernel thread?)");
  }
  std::string what;
  for (const auto& p : looked_at) what += (what.empty() ? "" : ", ") + p;
  throw Error(ErrorKind::kNotPython, "process " + std::to_string(pid) +
                                         " is not a CPython 3 process (no _PyRuntime in " + what + ")");
}

}  // namespace

PythonBinary locate_python(pid_t pid) {
  return locate_python(pid, read_maps(pid));
}

PythonBinary locate_python(pid_t pid, const std::vector<Mapping>& maps) {
  std::vector<std::string> looked_at;
  std::optional<PyVersion> old_python;
  std::string unreadable_python;  // why the first file that looks like the interpreter could not be read
  for (const auto& cand : candidates_from_maps(maps)) {
    std::optional<ElfImage> image;
    try {
      image.emplace(ElfImage::open_in_process(pid, cand.path));
    } catch (const Error& e) {
      // A data file or something we cannot read: not the interpreter, unless its name says it is.
      const std::string base = basename_of(cand.path);
      if (unreadable_python.empty() && (cand.is_libpython || base.rfind("python", 0) == 0)) {
        unreadable_python = e.what();
      }
      continue;
    }
    looked_at.push_back(cand.path);
    const auto runtime = image->symbol("_PyRuntime");
    const auto name_version = version_from_name(basename_of(cand.path));
    if (runtime) return python_binary_of(pid, maps, cand, *image, *runtime, name_version);
    if (name_version && !name_version->at_least(3, 7)) old_python = name_version;
    if (!name_version && image->symbol("Py_Initialize")) old_python = parse_version_text("3.0");
  }
  refuse_not_found(pid, old_python, unreadable_python, looked_at);
}

}  // namespace gilspy::elf
