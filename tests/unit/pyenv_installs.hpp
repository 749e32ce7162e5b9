#pragma once
// Finding the pyenv interpreters the unit tests check against: one place for the tests that need them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace gilspy::testing {

namespace fs = std::filesystem;

// GILSPY_PYENV_ROOT, else `pyenv root`, else $HOME/.pyenv.
inline std::string pyenv_root() {
  if (const char* env = std::getenv("GILSPY_PYENV_ROOT"); env != nullptr && *env != '\0') return env;
  if (FILE* p = ::popen("pyenv root 2>/dev/null", "r"); p != nullptr) {
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    const int rc = ::pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
    if (rc == 0 && !out.empty()) return out;
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.pyenv";
}

inline bool ci_strict() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

struct Install {
  std::string version;  // directory name, "3.11.7"
  std::string libpython;
};

// <root>/versions/3.<minor>.*/lib/libpython3.<minor>.so.1.0, sorted by name.
inline std::vector<Install> installs_of(const std::string& root, int minor) {
  std::vector<Install> found;
  const std::string prefix = "3." + std::to_string(minor) + ".";
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(root) / "versions", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const fs::path lib = it->path() / "lib" / ("libpython3." + std::to_string(minor) + ".so.1.0");
    if (fs::is_regular_file(lib, ec)) found.push_back({name, lib.string()});
  }
  std::sort(found.begin(), found.end(),
            [](const Install& a, const Install& b) { return a.version < b.version; });
  return found;
}

}  // namespace gilspy::testing
