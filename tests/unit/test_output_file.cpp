// base/output_file.hpp: files are created without following links at their names, take their final names only
// over a regular file of ours, leave nothing behind when abandoned, and lock the named ones against a second
// writer.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "base/error.hpp"
#include "base/output_file.hpp"
#include "unit/temp_files.hpp"

namespace fs = std::filesystem;
using gilspy::Error;
using gilspy::ErrorKind;
using gilspy::OutputFile;

// Named per file, so that the unity build can put test files together.
namespace unit_output_file {
namespace {

using gilspy::test::slurp;
using gilspy::test::spit;
using gilspy::test::TempDir;

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

void check_refused(const std::function<void()>& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    FAIL("not refused");
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("output file: a temporary file takes its name only when committed, with mode 0600") {
  TempDir dir;
  const fs::path out = dir.path / "out.json";
  {
    OutputFile f = OutputFile::temporary(out.string());
    f.write_all("hello");
    CHECK_FALSE(fs::exists(out));
    CHECK(entries(dir.path) == 0);  // unnamed (O_TMPFILE) on the file systems tests run on
    f.commit();
  }
  CHECK(slurp(out) == "hello");
  CHECK(mode_of(out) == 0600);
  {
    OutputFile f = OutputFile::temporary(out.string(), 0644);
    f.write_all("again");
    f.commit();  // replaces a regular file of ours
  }
  CHECK(slurp(out) == "again");
  CHECK(mode_of(out) == 0644);
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("output file: an abandoned temporary file leaves nothing") {
  TempDir dir;
  {
    OutputFile f = OutputFile::temporary((dir.path / "x.json").string());
    f.write_all("partial");
  }
  CHECK(entries(dir.path) == 0);
  OutputFile f = OutputFile::temporary((dir.path / "y.json").string());
  f.discard();
  CHECK(entries(dir.path) == 0);
}

TEST_CASE("output file: a link at the final name is never written through nor replaced") {
  TempDir dir;
  const fs::path victim = dir.path / "victim";
  spit(victim, "precious");
  const fs::path out = dir.path / "out.json";
  fs::create_symlink(victim, out);
  check_refused([&] { OutputFile::temporary(out.string()); }, ErrorKind::kIo, "symbolic link");
  check_refused([&] { OutputFile::check_replaceable(out.string()); }, ErrorKind::kIo, "symbolic link");
  // Planted after the check, before the commit: refused then too, and the temporary file is gone.
  fs::remove(out);
  {
    OutputFile f = OutputFile::temporary(out.string());
    f.write_all("x");
    fs::create_symlink(victim, out);
    check_refused([&] { f.commit(); }, ErrorKind::kIo, "symbolic link");
  }
  CHECK(slurp(victim) == "precious");
  CHECK(fs::is_symlink(out));
  CHECK(entries(dir.path) == 2);
  // A dangling link (to a file that would be created through it) is refused the same way.
  const fs::path dangling = dir.path / "dangling.json";
  fs::create_symlink(dir.path / "created_through_link", dangling);
  check_refused([&] { OutputFile::named(dangling.string()); }, ErrorKind::kIo, "symbolic link");
  CHECK_FALSE(fs::exists(dir.path / "created_through_link"));
}

TEST_CASE("output file: a named file exists from the start, is locked against a second writer, and stays") {
  TempDir dir;
  const fs::path partial = dir.path / "GIL_1_rank_0.json.partial";
  {
    OutputFile f = OutputFile::named(partial.string());
    f.write_all("{\"format\"");
    CHECK(fs::exists(partial));
    CHECK(mode_of(partial) == 0600);
    check_refused([&] { OutputFile::named(partial.string()); }, ErrorKind::kBusy, "another process");
    CHECK(slurp(partial) == "{\"format\"");
  }
  // Destroyed uncommitted (a killed recording's file): it stays, and is not taken over by the next run.
  CHECK(slurp(partial) == "{\"format\"");
  check_refused([&] { OutputFile::named(partial.string()); }, ErrorKind::kIo, "did not finish");
  CHECK(slurp(partial) == "{\"format\"");
  fs::remove(partial);
  {
    OutputFile f = OutputFile::named(partial.string());
    f.write_all("done");
    f.commit((dir.path / "GIL_1_rank_0.json").string());
  }
  CHECK_FALSE(fs::exists(partial));
  CHECK(slurp(dir.path / "GIL_1_rank_0.json") == "done");
  {
    OutputFile f = OutputFile::named(partial.string());
    f.discard();
  }
  CHECK(entries(dir.path) == 1);
}

TEST_CASE("output file: another user's file, a directory or a fifo at the name is left alone") {
  TempDir dir;
  const fs::path sub = dir.path / "out.json";
  fs::create_directory(sub);
  check_refused([&] { OutputFile::temporary(sub.string()); }, ErrorKind::kIo, "not a regular file");
  const fs::path fifo = dir.path / "f.json.partial";
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  check_refused([&] { OutputFile::named(fifo.string()); }, ErrorKind::kIo, "not a regular file");
  if (::geteuid() == 0) {
    const fs::path theirs = dir.path / "theirs.json";
    spit(theirs, "theirs");
    REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
    check_refused([&] { OutputFile::temporary(theirs.string()); }, ErrorKind::kIo,
                  "another user (uid 65534)");
    CHECK(slurp(theirs) == "theirs");
  }
}

TEST_CASE("output file: the folder is walked name by name; another user's links and folders are refused") {
  TempDir dir;
  const fs::path real = dir.path / "real";
  fs::create_directory(real);
  const fs::path mine = dir.path / "mine";  // a link of ours, relative, then absolute: followed
  fs::create_directory_symlink("real", mine);
  const fs::path abs = dir.path / "abs";
  fs::create_directory_symlink(real, abs);
  for (const fs::path& via : {real, mine, abs, mine / ".." / "mine"}) {
    CAPTURE(via);
    const int fd = gilspy::open_output_dir(via.string());
    struct stat a {
    }, b{};
    REQUIRE(::fstat(fd, &a) == 0);
    REQUIRE(::stat(real.c_str(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);
    ::close(fd);
  }
  OutputFile f = OutputFile::temporary((mine / "x.json").string());
  f.write_all("x");
  f.commit();
  CHECK(slurp(real / "x.json") == "x");
  check_refused([&] { gilspy::open_output_dir((dir.path / "missing").string()); }, ErrorKind::kIo, "missing");
  check_refused([&] { gilspy::open_output_dir((real / "x.json").string()); }, ErrorKind::kIo, "not a folder");
  if (::geteuid() == 0) {
    // As root: a link another user made, and a folder of theirs (what a shared /tmp may hold).
    const fs::path planted = dir.path / "planted";
    fs::create_directory_symlink(real, planted);
    REQUIRE(::lchown(planted.c_str(), 65534, 65534) == 0);
    check_refused([&] { gilspy::open_output_dir(planted.string()); }, ErrorKind::kIo,
                  "symbolic link of another user (uid 65534)");
    check_refused([&] { OutputFile::temporary((planted / "y.json").string()); }, ErrorKind::kIo,
                  "symbolic link of another user");
    const fs::path theirs = dir.path / "theirs";
    fs::create_directory(theirs);
    REQUIRE(::chown(theirs.c_str(), 65534, 65534) == 0);
    check_refused([&] { OutputFile::temporary((theirs / "y.json").string()); }, ErrorKind::kIo,
                  "belongs to another user (uid 65534)");
    CHECK_FALSE(fs::exists(real / "y.json"));
    CHECK(fs::is_empty(theirs));
  }
}

TEST_CASE("output file: --file-mode parsing") {
  CHECK(gilspy::parse_file_mode("0600") == mode_t{0600});
  CHECK(gilspy::parse_file_mode("644") == mode_t{0644});
  CHECK_FALSE(gilspy::parse_file_mode("0800").has_value());
  CHECK_FALSE(gilspy::parse_file_mode("").has_value());
  CHECK_FALSE(gilspy::parse_file_mode("1777").has_value());
  CHECK_FALSE(gilspy::parse_file_mode("rw").has_value());
}

}  // namespace unit_output_file
