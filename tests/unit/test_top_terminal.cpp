// gilspy top, terminal handling: the guard against a real pseudo-terminal (settings changed, then restored
// exactly, twice without harm), frames, the window size, key decoding and the colour decision.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "base/error.hpp"
#include "cli/top/keys.hpp"
#include "cli/top/terminal.hpp"

namespace top = gilspy::top;

// Named per file, so that the unity build can put test files together.
namespace unit_top_terminal {
namespace {

// A pseudo-terminal pair; `ok` is false where the machine has none (then the tests that need it say so).
struct Pty {
  int master = -1, slave = -1;
  bool ok = false;
  Pty() {
    master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return;
    const char* name = ptsname(master);
    if (!name) return;
    slave = open(name, O_RDWR | O_NOCTTY);
    ok = slave >= 0;
  }
  ~Pty() {
    if (slave >= 0) close(slave);
    if (master >= 0) close(master);
  }
  std::string drain() const {  // what the program wrote to the terminal
    std::string out;
    char buf[4096];
    pollfd p{master, POLLIN, 0};
    while (poll(&p, 1, 50) > 0 && (p.revents & POLLIN)) {
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
};

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "terminal guard: key-at-a-time on the alternate screen, everything restored, restore twice is safe") {
  Pty pty;
  if (!pty.ok) {
    MESSAGE("no pseudo-terminal on this machine; guard test skipped");
    return;
  }
  termios before{};
  REQUIRE(tcgetattr(pty.slave, &before) == 0);
  REQUIRE((before.c_lflag & ICANON));
  REQUIRE((before.c_lflag & ECHO));
  {
    top::TerminalGuard guard(pty.slave, pty.slave);
    termios during{};
    REQUIRE(tcgetattr(pty.slave, &during) == 0);
    CHECK_FALSE((during.c_lflag & ICANON));
    CHECK_FALSE((during.c_lflag & ECHO));
    CHECK((during.c_lflag & ISIG));  // Ctrl+C still raises SIGINT
    CHECK(during.c_cc[VMIN] == 1);
    const std::string entered = pty.drain();
    CHECK(entered.find("\x1b[?1049h") != std::string::npos);
    CHECK(entered.find("\x1b[?25l") != std::string::npos);
    guard.restore();
    guard.restore();
  }  // and the destructor once more
  termios after{};
  REQUIRE(tcgetattr(pty.slave, &after) == 0);
  CHECK(after.c_lflag == before.c_lflag);
  CHECK(after.c_cc[VMIN] == before.c_cc[VMIN]);
  CHECK(after.c_cc[VTIME] == before.c_cc[VTIME]);
  const std::string left = pty.drain();
  CHECK(count(left, "\x1b[?1049l") == 1);
  CHECK(count(left, "\x1b[?25h") == 1);
}

TEST_CASE("terminal guard: refuses what is not a terminal") {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  CHECK_THROWS_AS(top::TerminalGuard(pipefd[0], pipefd[1]), gilspy::Error);
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST_CASE("terminal size from TIOCGWINSZ") {
  Pty pty;
  if (!pty.ok) {
    MESSAGE("no pseudo-terminal on this machine; size test skipped");
    return;
  }
  winsize ws{};
  ws.ws_col = 132;
  ws.ws_row = 43;
  REQUIRE(ioctl(pty.master, TIOCSWINSZ, &ws) == 0);
  const auto size = top::terminal_size(pty.slave);
  REQUIRE(size);
  CHECK(size->columns == 132);
  CHECK(size->rows == 43);
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  CHECK_FALSE(top::terminal_size(pipefd[1]));
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST_CASE("frames overwrite in place: home, clear each line's tail, clear below, no final newline") {
  const std::string frame = top::compose_frame({"one", "two", "three"});
  CHECK(frame == "\x1b[Hone\x1b[K\r\ntwo\x1b[K\r\nthree\x1b[K\x1b[J");
  CHECK(frame.find("\x1b[2J") == std::string::npos);  // a full clear would flicker
  CHECK(top::compose_frame({}) == "\x1b[H\x1b[J");
}

TEST_CASE("write_all writes everything") {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  const std::string data(10000, 'x');
  REQUIRE(top::write_all(pipefd[1], data));
  close(pipefd[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  close(pipefd[0]);
  CHECK(got == data);
}

TEST_CASE("keys: commands decoded, escape sequences skipped whole") {
  using K = top::Key;
  CHECK(top::decode_keys("hwitprq") == std::vector<K>{K::kSortHold, K::kSortWait, K::kSortTid,
                                                      K::kToggleTotals, K::kTogglePause, K::kReset,
                                                      K::kQuit});
  CHECK(top::decode_keys("Q") == std::vector<K>{K::kQuit});
  CHECK(top::decode_keys("x1 \n").empty());
  CHECK(top::decode_keys("\x1b[A\x1b[1;5Pq").size() == 1);  // arrow up, Ctrl+F1, then q
  CHECK(top::decode_keys("\x1bOP").empty());                // F1 is not 'p'
  CHECK(top::decode_keys("\x1bp").empty());                 // Alt+p is not p
  CHECK(top::decode_keys("\x1b[").empty());                 // a cut sequence
  CHECK(top::decode_keys("\x1b").empty());
}

TEST_CASE("keys: view keys change the render options, the others are the session's") {
  top::RenderOptions o;
  CHECK(top::apply_view_key(top::Key::kSortWait, o));
  CHECK(o.sort == top::SortKey::kWait);
  CHECK(top::apply_view_key(top::Key::kSortTid, o));
  CHECK(o.sort == top::SortKey::kTid);
  CHECK(top::apply_view_key(top::Key::kToggleTotals, o));
  CHECK(o.totals);
  CHECK(top::apply_view_key(top::Key::kToggleTotals, o));
  CHECK_FALSE(o.totals);
  CHECK(top::apply_view_key(top::Key::kTogglePause, o));
  CHECK(o.paused);
  CHECK_FALSE(top::apply_view_key(top::Key::kReset, o));
  CHECK_FALSE(top::apply_view_key(top::Key::kQuit, o));
}

TEST_CASE("colour only on a terminal, without NO_COLOR, not on a dumb terminal") {
  CHECK(top::colour_wanted(true, nullptr, "xterm-256color"));
  CHECK(top::colour_wanted(true, nullptr, nullptr));
  CHECK_FALSE(top::colour_wanted(false, nullptr, "xterm-256color"));
  CHECK_FALSE(top::colour_wanted(true, "1", "xterm"));
  CHECK(top::colour_wanted(true, "", "xterm"));  // no-color.org: an empty NO_COLOR does not count
  CHECK_FALSE(top::colour_wanted(true, nullptr, "dumb"));
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  CHECK_FALSE(top::colour_wanted_for(pipefd[1]));  // a pipe never gets colour, whatever the environment
  close(pipefd[0]);
  close(pipefd[1]);
}

}  // namespace unit_top_terminal
