// gilspy top: target-controlled text (thread names, commands) must reach the terminal inert, and widths must
// be counted in columns so that no rendered line overflows.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "base/terminal_text.hpp"

using gilspy::cut_to_width;
using gilspy::display_width;
using gilspy::escape_for_terminal;
using gilspy::fit_with_marker;

TEST_CASE("escape: printable ASCII and valid UTF-8 pass unchanged") {
  CHECK(escape_for_terminal("MainThread") == "MainThread");
  CHECK(escape_for_terminal("Thread-1 (worker)") == "Thread-1 (worker)");
  CHECK(escape_for_terminal("caf\xC3\xA9") == "caf\xC3\xA9");                            // é
  CHECK(escape_for_terminal("\xE6\x97\xA5\xE6\x9C\xAC") == "\xE6\x97\xA5\xE6\x9C\xAC");  // 日本
  CHECK(escape_for_terminal("\xF0\x9F\x90\x8D") == "\xF0\x9F\x90\x8D");                  // 🐍
  CHECK(escape_for_terminal("") == "");
}

TEST_CASE("escape: control characters become visible") {
  CHECK(escape_for_terminal("\x1b[2J\x1b]0;pwned\x07") == "\\x1B[2J\\x1B]0;pwned\\x07");
  CHECK(escape_for_terminal("a\rb\nc\td") == "a\\x0Db\\x0Ac\\x09d");
  CHECK(escape_for_terminal(std::string("x\0y", 3)) == "x\\x00y");
  CHECK(escape_for_terminal("del\x7f") == "del\\x7F");
  CHECK(escape_for_terminal("back\\slash") == "back\\\\slash");  // an escape cannot be faked
}

TEST_CASE("escape: C1 controls, bidi overrides and invisible characters become visible") {
  CHECK(escape_for_terminal("\xC2\x9B"
                            "31m") == "\\u009B31m");                              // 8-bit CSI
  CHECK(escape_for_terminal("evil\xE2\x80\xAEtxt.exe") == "evil\\u202Etxt.exe");  // RIGHT-TO-LEFT OVERRIDE
  CHECK(escape_for_terminal("\xE2\x81\xA6x\xE2\x81\xA9") == "\\u2066x\\u2069");   // isolates
  CHECK(escape_for_terminal("a\xE2\x80\x8B"
                            "b") == "a\\u200Bb");                   // zero width space
  CHECK(escape_for_terminal("\xEF\xBB\xBFname") == "\\uFEFFname");  // BOM
  CHECK(escape_for_terminal("l1\xE2\x80\xA8l2") == "l1\\u2028l2");  // LINE SEPARATOR
}

TEST_CASE("escape: invalid UTF-8 is shown byte by byte") {
  CHECK(escape_for_terminal("\xFF\xFE") == "\\xFF\\xFE");
  CHECK(escape_for_terminal("a\x80"
                            "b") == "a\\x80b");                              // stray continuation
  CHECK(escape_for_terminal("\xC0\xAF") == "\\xC0\\xAF");                    // overlong '/'
  CHECK(escape_for_terminal("\xED\xA0\x80") == "\\xED\\xA0\\x80");           // a surrogate
  CHECK(escape_for_terminal("\xF4\x90\x80\x80") == "\\xF4\\x90\\x80\\x80");  // above U+10FFFF
  CHECK(escape_for_terminal("ok\xE6\x97") == "ok\\xE6\\x97");  // cut in the middle of a character
}

TEST_CASE("escape: random bytes never leave a control byte or an ESC") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 2000; ++round) {
    std::string in;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) in += static_cast<char>(rng() % 256);
    const std::string out = escape_for_terminal(in);
    bool inert = true;
    for (const char c : out) {
      const auto b = static_cast<unsigned char>(c);
      inert = inert && b >= 0x20 && b != 0x7F;
    }
    REQUIRE(inert);
    // What is left is valid UTF-8 with nothing to escape (only backslashes, which double again).
    std::string again = escape_for_terminal(out), undoubled;
    for (std::size_t i = 0; i < again.size(); ++i) {
      undoubled += again[i];
      if (again[i] == '\\') ++i;
    }
    REQUIRE(undoubled == out);
  }
}

TEST_CASE("display width counts columns, cuts fall on character boundaries") {
  CHECK(display_width("abc") == 3);
  CHECK(display_width("caf\xC3\xA9") == 4);
  CHECK(display_width("\xE6\x97\xA5\xE6\x9C\xAC") == 4);  // two wide characters
  CHECK(cut_to_width("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", 5) == "\xE6\x97\xA5\xE6\x9C\xAC");
  CHECK(cut_to_width("caf\xC3\xA9!", 4) == "caf\xC3\xA9");
  CHECK(cut_to_width("abc", 0) == "");
  CHECK(fit_with_marker("worker-thread-17", 8) == "worker-~");
  CHECK(fit_with_marker("short", 8) == "short");
  CHECK(display_width(fit_with_marker("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", 4)) <= 4);
}
