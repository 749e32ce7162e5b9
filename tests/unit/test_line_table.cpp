// The line-table decoders (cpython_layouts/line_table.cpp) on real code objects' bytes: the fixtures captured
// from every supported interpreter (tests/data/line_tables.json), and live, every code object of
// tests/data/line_table_fixtures.py's sample as each installed interpreter compiles it, against the line
// CPython itself gives each instruction (dis.findlinestarts on 3.8-3.9, co_lines() on 3.10+).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpython_layouts/line_table.hpp"
#include "unit/pyenv_installs.hpp"

namespace gl = gilspy::layouts;
using nlohmann::json;

// Named per file, so that the unity build can put test files together.
namespace unit_line_table {
namespace {

std::vector<uint8_t> unhex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

gl::LineTableKind kind_for(const std::string& version) {
  const int minor = std::stoi(version.substr(2));
  return minor <= 9    ? gl::LineTableKind::kLnotab
         : minor == 10 ? gl::LineTableKind::kLinetable310
                       : gl::LineTableKind::kLocationTable;
}

// Every instruction address of every code object: the decoder must give CPython's line. Returns how many
// addresses were compared.
size_t check_version(const std::string& version, const json& codes) {
  const auto kind = kind_for(version);
  size_t compared = 0;
  for (const json& c : codes) {
    const std::vector<uint8_t> table = unhex(c.at("table").get<std::string>());
    const int first = c.at("first_line").get<int>();
    const int unit = c.at("unit").get<int>();
    const json& lines = c.at("lines");
    size_t wrong = 0;
    std::string first_wrong;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].is_null()) continue;
      const int want = lines[i].get<int>();
      const gl::LineLookup got = gl::line_for_address(kind, table, first, static_cast<int64_t>(i) * unit);
      ++compared;
      if (!got.ok || got.line != want) {
        if (wrong++ == 0) {
          first_wrong = "address " + std::to_string(i * static_cast<size_t>(unit)) + ": want " +
                        std::to_string(want) + ", got " +
                        (got.ok ? std::to_string(got.line) : std::string("not ok"));
        }
      }
    }
    CHECK_MESSAGE(wrong == 0, "python " << version << " " << c.at("name").get<std::string>() << ": " << wrong
                                        << " of " << lines.size() << " addresses wrong, first "
                                        << first_wrong);
  }
  return compared;
}

std::string run(const std::string& python, const std::string& script) {
  std::string out;
  FILE* p = ::popen(("'" + python + "' '" + script + "' 2>/dev/null").c_str(), "r");
  if (p == nullptr) return out;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return ::pclose(p) == 0 ? out : std::string();
}

std::string debian_unstable_root() {
  if (const char* env = std::getenv("GILSPY_DEBIAN_PYTHONS"); env != nullptr && *env) return env;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return (cache != nullptr && *cache ? std::string(cache) : std::string(home ? home : "/root") + "/.cache") +
         "/gilspy/debian-unstable";
}

}  // namespace

TEST_CASE("line tables: the captured tables of every supported version decode to CPython's lines") {
  std::ifstream in(std::string(GILSPY_SOURCE_DIR) + "/tests/data/line_tables.json");
  REQUIRE(in.good());
  const json doc = json::parse(in);
  std::vector<int> minors;
  for (const auto& [version, codes] : doc.at("versions").items()) {
    CAPTURE(version);
    CHECK(check_version(version, codes) > 50);
    minors.push_back(std::stoi(version.substr(2)));
  }
  for (int minor = 8; minor <= 15; ++minor) {
    CHECK_MESSAGE(std::find(minors.begin(), minors.end(), minor) != minors.end(),
                  "no captured table for 3." << minor);
  }
}

TEST_CASE("line tables: every code object of the sample, as each installed interpreter compiles it") {
  const std::string script = std::string(GILSPY_SOURCE_DIR) + "/tests/data/line_table_fixtures.py";
  std::vector<std::string> pythons;
  const std::string root = gilspy::testing::pyenv_root();
  for (int minor = 8; minor <= 13; ++minor) {
    for (const auto& install : gilspy::testing::installs_of(root, minor)) {
      pythons.push_back(root + "/versions/" + install.version + "/bin/python3." + std::to_string(minor));
    }
  }
  for (const char* minor : {"3.14", "3.15"})
    pythons.push_back(debian_unstable_root() + "/root/usr/bin/python" + minor);
  pythons.push_back("/usr/bin/python3.11");
  size_t ran = 0;
  for (const auto& python : pythons) {
    if (!std::filesystem::exists(python)) {
      MESSAGE("SKIPPED: " << python << " not found");
      continue;
    }
    const std::string out = run(python, script);
    CAPTURE(python);
    REQUIRE_MESSAGE(!out.empty(), python << " did not print the fixtures");
    const json doc = json::parse(out);
    const std::string version = doc.at("version").get<std::string>();
    const size_t compared = check_version(version, doc.at("code"));
    CHECK(compared > 200);
    MESSAGE(python << " (" << version << "): " << doc.at("code").size() << " code objects, " << compared
                   << " instruction addresses");
    ++ran;
  }
  if (gilspy::testing::ci_strict()) CHECK(ran >= 9);
}

TEST_CASE("line tables: edges") {
  // A frame that has not started (negative address) is on the first line, whatever the table.
  CHECK(gl::line_for_address(gl::LineTableKind::kLocationTable, {}, 7, -1).line == 7);
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, {}, 7, -2).ok);
  // 3.8 lnotab: an empty table is all on the first line; a negative delta goes back.
  const std::vector<uint8_t> lnotab = {4, 2, 6, 0xFF};  // +4 bytes: line +2; +6 bytes: line -1
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, {}, 3, 100).line == 3);
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, lnotab, 10, 3).line == 10);
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, lnotab, 10, 4).line == 12);
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, lnotab, 10, 10).line == 11);
  // 3.10: -128 is "no line"; past the end of the table is not a line at all.
  const std::vector<uint8_t> t310 = {4, 1, 2, 0x80, 2, 1};
  CHECK(gl::line_for_address(gl::LineTableKind::kLinetable310, t310, 5, 0).line == 6);
  CHECK(gl::line_for_address(gl::LineTableKind::kLinetable310, t310, 5, 4).line == -1);
  CHECK(gl::line_for_address(gl::LineTableKind::kLinetable310, t310, 5, 6).line == 7);
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLinetable310, t310, 5, 8).ok);
  // 3.11+: an entry must start with the top bit set; a varint must end inside the table.
  const std::vector<uint8_t> not_entry = {0x12, 0x80};
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLocationTable, not_entry, 1, 0).ok);
  const std::vector<uint8_t> cut_varint = {0x80 | (13 << 3), 0x41};  // no-columns form, varint continues
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLocationTable, cut_varint, 1, 0).ok);
  // Long form (14): line delta -3 (svarint 7), then end line, column, end column; 2 code units.
  const std::vector<uint8_t> long_form = {0x80 | (14 << 3) | 1, 7, 0, 1, 2, 0x80 | (15 << 3)};
  CHECK(gl::line_for_address(gl::LineTableKind::kLocationTable, long_form, 10, 2).line == 7);
  CHECK(gl::line_for_address(gl::LineTableKind::kLocationTable, long_form, 10, 4).line == -1);
}

TEST_CASE("line tables: a forged first line and deltas past int's range give no line, and no overflow") {
  // The target writes co_firstlineno and the table: 2^31-1 plus any delta is no source line. (Under
  // UBSan, CI's unit test build, the int arithmetic this replaced was a signed overflow here.)
  constexpr int kMax = std::numeric_limits<int>::max();
  constexpr int kMin = std::numeric_limits<int>::min();
  const std::vector<uint8_t> lnotab_up = {2, 100, 2, 100};
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLnotab, lnotab_up, kMax, 10).ok);
  CHECK(gl::line_for_address(gl::LineTableKind::kLnotab, lnotab_up, kMax - 200, 10).line == kMax);
  const std::vector<uint8_t> t310_down = {2, 0x80 | 1, 2, 0x80 | 1};  // line -127 twice
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLinetable310, t310_down, kMin, 2).ok);
  // 3.11+ no-column forms: line +2^30 (svarint 2^31: six 6-bit groups) again and again.
  std::vector<uint8_t> long_up;
  for (int k = 0; k < 8; ++k)
    long_up.insert(long_up.end(), {0x80 | (13 << 3), 0x40, 0x40, 0x40, 0x40, 0x40, 0x02});
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLocationTable, long_up, kMax, 14).ok);
  CHECK_FALSE(gl::line_for_address(gl::LineTableKind::kLocationTable, long_up, 1, 14).ok);  // 1 + 8 * 2^30
  CHECK(gl::line_for_address(gl::LineTableKind::kLocationTable, long_up, 1, 0).line == 1 + (1 << 30));
}

}  // namespace unit_line_table
