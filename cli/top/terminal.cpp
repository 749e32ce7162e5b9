#include "cli/top/terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"

namespace gilspy::top {

namespace {
// DEC private modes: 1049 = alternate screen (saving the cursor), 25 = cursor visible.
constexpr std::string_view kEnter = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
constexpr std::string_view kLeave = "\x1b[?25h\x1b[?1049l";
}  // namespace

TerminalGuard::TerminalGuard(int in_fd, int out_fd) : in_fd_(in_fd), out_fd_(out_fd) {
  if (!isatty(in_fd) || !isatty(out_fd)) {
    throw Error(ErrorKind::kIo, "gilspy top: standard input and output must be a terminal for the live view");
  }
  if (tcgetattr(in_fd, &saved_) != 0) {
    throw Error(ErrorKind::kIo,
                std::string("gilspy top: cannot read the terminal's settings: ") + std::strerror(errno));
  }
  struct termios raw = saved_;
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 1;  // a read returns as soon as one key is there
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(in_fd, TCSANOW, &raw) != 0) {
    throw Error(ErrorKind::kIo,
                std::string("gilspy top: cannot set up the terminal: ") + std::strerror(errno));
  }
  active_ = true;
  write_all(out_fd_, kEnter);
}

TerminalGuard::~TerminalGuard() {
  restore();
}

void TerminalGuard::restore() noexcept {
  if (!active_.exchange(false)) return;
  write_all(out_fd_, kLeave);
  // TCSAFLUSH drops keys typed but not read, so that a stray 'q' does not land in the user's shell.
  tcsetattr(in_fd_, TCSAFLUSH, &saved_);
}

std::string compose_frame(const std::vector<std::string>& lines) {
  std::string out = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\r\n";
    out += lines[i];
    out += "\x1b[K";
  }
  out += "\x1b[J";
  return out;
}

bool write_all(int fd, std::string_view data) noexcept {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<TerminalSize> terminal_size(int fd) {
  struct winsize ws {};
  if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) return std::nullopt;
  return TerminalSize{ws.ws_col, ws.ws_row};
}

bool colour_wanted(bool output_is_terminal, const char* no_color, const char* term) {
  if (!output_is_terminal) return false;
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

bool colour_wanted_for(int fd) {
  return colour_wanted(isatty(fd) == 1, std::getenv("NO_COLOR"), std::getenv("TERM"));
}

}  // namespace gilspy::top
