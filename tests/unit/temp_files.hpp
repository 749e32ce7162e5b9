#pragma once
// Files for the unit tests: a private temporary folder removed at the end of the test, whole-file reads and
// writes, and a folded-stacks file (convert --format collapsed) read back.
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>

#include <doctest/doctest.h>

namespace gilspy::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gilspy_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void spit(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// "outer;...;inner N" lines: stack -> N.
inline std::map<std::string, uint64_t> read_folded(const std::string& path) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    const auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    out[line.substr(0, space)] = std::stoull(line.substr(space + 1));
  }
  return out;
}

}  // namespace gilspy::test
