// elfutils: version parsing, /proc/PID/maps parsing, and ElfImage on real CPython binaries (the pyenv
// libpython builds 3.8+ and Debian's stripped /usr/bin/python3.11). A missing binary is reported as SKIPPED;
// with CI=true it is a failure instead.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "elfutils/elf_image.hpp"
#include "elfutils/proc_maps.hpp"
#include "elfutils/python_binary.hpp"
#include "unit/pyenv_installs.hpp"

// Named per file, so that the unity build can put test files together.
namespace unit_python_binary {
namespace {

namespace fs = std::filesystem;
using gilspy::elf::ElfImage;
using gilspy::elf::PyVersion;

using gilspy::testing::ci_strict;
using gilspy::testing::Install;
using gilspy::testing::installs_of;
using gilspy::testing::pyenv_root;

uint32_t le32(const std::vector<uint8_t>& bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4 && i < bytes.size(); ++i) v |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return v;
}

void expect_elf_error(const std::string& path) {
  try {
    (void)ElfImage::open(path);
    FAIL("ElfImage::open(" << path << ") did not throw");
  } catch (const gilspy::Error& e) {
    CHECK(e.kind() == gilspy::ErrorKind::kElf);
    CHECK_MESSAGE(std::string(e.what()).find(path) != std::string::npos, e.what());
  }
}

// Py_Version (3.11+) read from the file, as a PyVersion.
std::optional<PyVersion> py_version_of(const ElfImage& image) {
  const auto sym = image.symbol("Py_Version");
  if (!sym) return std::nullopt;
  const auto bytes = image.read_vaddr(sym->value, 4);
  if (!bytes) return std::nullopt;
  return gilspy::elf::version_from_hex(le32(*bytes));
}

void check_libpython(int minor, const Install& install) {
  const std::string& v = install.version;
  INFO("python " << v << " (" << install.libpython << ")");
  const ElfImage image = ElfImage::open(install.libpython);
  CHECK(image.path() == install.libpython);
  CHECK_FALSE(image.is_executable());
  CHECK(image.has_symtab());
  CHECK(image.first_load_vaddr() == 0);
  CHECK(image.soname() == "libpython3." + std::to_string(minor) + ".so.1.0");

  const auto runtime = image.symbol("_PyRuntime");
  REQUIRE(runtime.has_value());
  CHECK(runtime->value != 0);
  CHECK(runtime->size > 0);

  CHECK_FALSE(image.symbol("gilspy_no_such_symbol").has_value());
  CHECK_FALSE(image.section(".gilspy_no_such_section").has_value());
  CHECK_FALSE(image.read_vaddr(0xffff'ffff'0000'0000ULL, 8).has_value());
  CHECK_FALSE(image.section_bytes(".gilspy_no_such_section").has_value());
  const auto rodata = image.section_bytes(".rodata");
  REQUIRE(rodata.has_value());
  CHECK(rodata->size() == image.section(".rodata")->size);

  const auto expected = gilspy::elf::parse_version_text(v);
  REQUIRE(expected.has_value());
  if (minor >= 11) {
    const auto version = py_version_of(image);
    REQUIRE_MESSAGE(version.has_value(), "Py_Version not found or not readable");
    CHECK(version->major == expected->major);
    CHECK(version->minor == expected->minor);
    CHECK(version->micro == expected->micro);
    CHECK(version->text() == expected->text());

  } else {
    CHECK_FALSE(image.symbol("Py_Version").has_value());
  }
  // The version locate_python reports, micro included, from the file alone (before 3.11 from the PY_VERSION
  // string in .rodata, which the linker may keep only as the tail of the install prefix): as if this process
  // had the library mapped.
  const std::vector<gilspy::elf::Mapping> maps = {{.start = 0x7f0000000000,
                                                   .end = 0x7f0000100000,
                                                   .offset = 0,
                                                   .perms = "r--p",
                                                   .path = install.libpython}};
  const auto bin = gilspy::elf::locate_python(::getpid(), maps);
  CHECK(bin.version.text() == expected->text());
  CHECK(bin.version_source == (minor >= 11 ? "Py_Version" : "version string in .rodata"));
  // `.PyRuntime`, started by _PyRuntime: required from 3.11; the pyenv 3.10 build has it too, 3.8/3.9 do not.
  const auto section = image.section(".PyRuntime");
  if (minor >= 10) {
    REQUIRE_MESSAGE(section.has_value(), "no .PyRuntime section");
    CHECK(section->addr == runtime->value);
    CHECK(section->size >= runtime->size);
  } else {
    CHECK_FALSE(section.has_value());
  }
  if (minor >= 13) {  // _PyRuntime starts with _Py_DebugOffsets: the cookie is in the file's initialised data
    const auto head = image.read_vaddr(runtime->value, 8);
    REQUIRE(head.has_value());
    CHECK(std::string(head->begin(), head->end()) == "xdebugpy");
  }
}

}  // namespace

TEST_CASE("python_binary: parse_version_text") {
  const auto v = gilspy::elf::parse_version_text("3.11.7");
  REQUIRE(v.has_value());
  CHECK(v->major == 3);
  CHECK(v->minor == 11);
  CHECK(v->micro == 7);
  CHECK(v->hex == 0x030B07F0u);
  CHECK(v->text() == "3.11.7");

  const auto rc = gilspy::elf::parse_version_text("3.13.0rc1");
  REQUIRE(rc.has_value());
  CHECK(rc->major == 3);
  CHECK(rc->minor == 13);
  CHECK(rc->micro == 0);
  CHECK(rc->text() == "3.13.0");

  const auto two = gilspy::elf::parse_version_text("3.9");
  REQUIRE(two.has_value());
  CHECK(two->major == 3);
  CHECK(two->minor == 9);
  CHECK(two->micro <= 0);  // no micro given: unknown (-1) or 0, never a made-up number
  CHECK(two->hex == 0x030900F0u);

  const auto plus = gilspy::elf::parse_version_text("3.12.1+");
  REQUIRE(plus.has_value());
  CHECK(plus->text() == "3.12.1");

  const auto big = gilspy::elf::parse_version_text("3.10.13");
  REQUIRE(big.has_value());
  CHECK(big->minor == 10);
  CHECK(big->micro == 13);
  CHECK(big->hex == 0x030A0DF0u);

  CHECK_FALSE(gilspy::elf::parse_version_text("").has_value());
  CHECK_FALSE(gilspy::elf::parse_version_text("python").has_value());
  CHECK_FALSE(gilspy::elf::parse_version_text("3").has_value());
  CHECK_FALSE(gilspy::elf::parse_version_text("v3.11.7").has_value());

  CHECK(v->at_least(3, 11));
  CHECK(v->at_least(3, 8));
  CHECK(v->at_least(2, 99));
  CHECK_FALSE(v->at_least(3, 12));
  CHECK_FALSE(v->at_least(4, 0));
}

TEST_CASE("python_binary: version_from_hex") {
  const auto v = gilspy::elf::version_from_hex(0x030D00F0u);
  CHECK(v.major == 3);
  CHECK(v.minor == 13);
  CHECK(v.micro == 0);
  CHECK(v.hex == 0x030D00F0u);
  CHECK(v.text() == "3.13.0");

  const auto rc = gilspy::elf::version_from_hex(0x030E00C1u);  // 3.14.0rc1: the release level is said
  CHECK(rc.text() == "3.14.0rc1");
  CHECK(rc.hex == 0x030E00C1u);
  CHECK(gilspy::elf::version_from_hex(0x031000A1u).text() == "3.16.0a1");
  CHECK(gilspy::elf::version_from_hex(0x030F00B3u).text() == "3.15.0b3");

  CHECK(gilspy::elf::version_from_hex(0x030B07F0u).text() == "3.11.7");
  // Round trip with the text parser for a final release.
  CHECK(gilspy::elf::version_from_hex(gilspy::elf::parse_version_text("3.12.1")->hex).text() == "3.12.1");
}

TEST_CASE("proc_maps: parse_maps on a realistic listing") {
  const std::string text =
      "55c7951bc000-55c7951be000 r--p 00000000 fe:00 247134                     /usr/bin/python3.11\n"
      "55c7951be000-55c7951c3000 r-xp 00002000 fe:00 247134                     /usr/bin/python3.11\n"
      "55c7c872c000-55c7c874d000 rw-p 00000000 00:00 0                          [heap]\n"
      "7fc0c7a4f000-7fc0c7b13000 rw-p 00000000 00:00 0 \n"
      "7fc0c7b13000-7fc0c7b6a000 r--p 00000000 fe:01 320475                     "
      "/home/some user/my envs/py 3.12/lib/libpython3.12.so.1.0\n"
      "7fc0c7b6a000-7fc0c7c6b000 r-xp 0009a000 fe:01 320475                     "
      "/home/some user/my envs/py 3.12/lib/libpython3.12.so.1.0\n"
      "7fc0c8000000-7fc0c8001000 r--p 00000000 00:2d 1234                       /tmp/libpython3.11.so.1.0 "
      "(deleted)\n"
      "7ffd5d3e2000-7ffd5d403000 rw-p 00000000 00:00 0                          [stack]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
  const auto maps = gilspy::elf::parse_maps(text);
  REQUIRE(maps.size() == 9);

  CHECK(maps[0].start == 0x55c7951bc000ULL);
  CHECK(maps[0].end == 0x55c7951be000ULL);
  CHECK(maps[0].offset == 0);
  CHECK(maps[0].perms == "r--p");
  CHECK(maps[0].path == "/usr/bin/python3.11");

  CHECK(maps[1].perms == "r-xp");
  CHECK(maps[1].offset == 0x2000);

  CHECK(maps[2].path == "[heap]");
  CHECK(maps[3].path.empty());  // anonymous, with the kernel's trailing blank
  CHECK(maps[3].perms == "rw-p");

  CHECK(maps[4].path == "/home/some user/my envs/py 3.12/lib/libpython3.12.so.1.0");
  CHECK(maps[4].offset == 0);
  CHECK(maps[5].path == maps[4].path);
  CHECK(maps[5].offset == 0x9a000);
  CHECK(maps[5].start == 0x7fc0c7b6a000ULL);
  CHECK(maps[5].end == 0x7fc0c7c6b000ULL);

  CHECK(maps[6].path == "/tmp/libpython3.11.so.1.0 (deleted)");  // the suffix is kept

  CHECK(maps[7].path == "[stack]");
  CHECK(maps[8].start == 0xffffffffff600000ULL);
  CHECK(maps[8].end == 0xffffffffff601000ULL);
  CHECK(maps[8].perms == "--xp");
  CHECK(maps[8].path == "[vsyscall]");

  CHECK(gilspy::elf::parse_maps("").empty());
  CHECK(gilspy::elf::parse_maps("not a maps line\n\n").empty());
}

TEST_CASE("proc_maps: read_maps of this process and path_in_process") {
  const auto maps = gilspy::elf::read_maps(::getpid());
  CHECK_FALSE(maps.empty());
  CHECK(std::any_of(maps.begin(), maps.end(), [](const auto& m) { return m.path == "[stack]"; }));
  CHECK(gilspy::path_in_process(42, "/usr/lib/libpython3.11.so.1.0") ==
        "/proc/42/root/usr/lib/libpython3.11.so.1.0");
}

TEST_CASE("elf_image: pyenv libpython 3.8+") {
  const std::string root = pyenv_root();
  for (int minor = 8; minor <= 14; ++minor) {
    const auto found = installs_of(root, minor);
    if (found.empty()) {
      if (minor == 14) continue;  // no 3.14 is expected on this machine; the layout tables end at 3.13
      SUBCASE(("python 3." + std::to_string(minor) + " (not installed)").c_str()) {
        MESSAGE("SKIPPED: python 3." << minor << " not found under " << root);
        if (ci_strict()) FAIL_CHECK("python 3." << minor << " not found under " << root << " and CI=true");
      }
      continue;
    }
    for (const auto& install : found) {
      SUBCASE(("python " + install.version).c_str()) {
        check_libpython(minor, install);
      }
    }
  }
}

TEST_CASE("elf_image: Debian's stripped /usr/bin/python3.11") {
  const std::string path = "/usr/bin/python3.11";
  if (!fs::exists(path)) {
    MESSAGE("SKIPPED: " << path << " not found");
    if (ci_strict()) FAIL_CHECK(path << " not found and CI=true");
    return;
  }
  const ElfImage image = ElfImage::open(path);
  CHECK(image.is_executable());
  CHECK_FALSE(image.has_symtab());
  CHECK(image.soname().empty());
  const auto runtime = image.symbol("_PyRuntime");  // only .dynsym is left to find it in
  REQUIRE(runtime.has_value());
  CHECK(runtime->size > 0);
  const auto section = image.section(".PyRuntime");
  REQUIRE(section.has_value());
  CHECK(section->addr == runtime->value);
  const auto version = py_version_of(image);
  REQUIRE(version.has_value());
  CHECK(version->major == 3);
  CHECK(version->minor == 11);
}

TEST_CASE("elf_image: open fails with kElf and names the file") {
  SUBCASE("missing file") {
    expect_elf_error("/nonexistent/gilspy/libpython3.99.so");
  }
  SUBCASE("not an ELF file") {
    expect_elf_error(std::string(GILSPY_SOURCE_DIR) + "/CMakeLists.txt");
  }
}

TEST_CASE(
    "python_binary: an unreadable interpreter, or a process gone, is said so, not 'not a CPython process'") {
  const std::vector<gilspy::elf::Mapping> maps = {{.start = 0x10000,
                                                   .end = 0x20000,
                                                   .offset = 0,
                                                   .perms = "r-xp",
                                                   .path = "/nonexistent/libpython3.11.so.1.0"}};
  try {
    gilspy::elf::locate_python(::getpid(), maps);
    FAIL("found Python in a file that cannot be opened");
  } catch (const gilspy::Error& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.kind() == gilspy::ErrorKind::kElf);
    CHECK(what.find("looks like Python") != std::string::npos);
    CHECK(what.find("libpython3.11.so.1.0") != std::string::npos);
    CHECK(what.find("not a CPython") == std::string::npos);
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  try {
    gilspy::elf::locate_python(child, maps);
    FAIL("found Python in a process that has exited");
  } catch (const gilspy::Error& e) {
    CHECK(e.kind() == gilspy::ErrorKind::kNoSuchProcess);
    CHECK(std::string(e.what()).find("exited while gilspy attached") != std::string::npos);
  }
}

TEST_CASE("elf_image: a process's files are opened in its root without following symlinks") {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  REQUIRE(n > 0);
  self[n] = '\0';
  const ElfImage image = ElfImage::open_in_process(::getpid(), self);  // canonical path: opens
  CHECK(image.first_load_vaddr() == ElfImage::open(self).first_load_vaddr());

  char dir[] = "/tmp/gilspy-elf-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string link = std::string(dir) + "/exe", dir_link = std::string(dir) + "/d";
  REQUIRE(::symlink(self, link.c_str()) == 0);
  REQUIRE(::symlink("/proc/self", dir_link.c_str()) == 0);
  CHECK_THROWS_WITH_AS(ElfImage::open_in_process(::getpid(), link), doctest::Contains("symbolic link"),
                       gilspy::Error);
  CHECK_THROWS_AS(ElfImage::open_in_process(::getpid(), dir_link + "/exe"), gilspy::Error);
  ::unlink(link.c_str());
  ::unlink(dir_link.c_str());
  ::rmdir(dir);
}

}  // namespace unit_python_binary
