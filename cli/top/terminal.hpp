#pragma once
// The terminal side of `gilspy top`: a guard that puts the terminal in a key-at-a-time mode on the alternate
// screen and always puts it back, flicker-free frames, the window size, and whether to use colour. Everything
// that can be decided without a terminal is a pure function, so that it is unit-tested.
#include <termios.h>

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gilspy::top {

// Keys without Enter and without echo (ICANON and ECHO off; ISIG stays on, so Ctrl+C still raises SIGINT for
// the session's signal handling), the alternate screen (the user's scrollback is left as it was), no cursor.
// The destructor restores all of it; so does restore(), which may be called any number of times, and from a
// signal handler (it only calls write() and tcsetattr(), both async-signal-safe).
class TerminalGuard {
 public:
  // Throws gilspy::Error (kIo) when either descriptor is not a terminal: the caller then runs in batch mode.
  TerminalGuard(int in_fd, int out_fd);
  ~TerminalGuard();
  TerminalGuard(const TerminalGuard&) = delete;
  TerminalGuard& operator=(const TerminalGuard&) = delete;

  void restore() noexcept;

 private:
  int in_fd_, out_fd_;
  struct termios saved_ {};
  std::atomic<bool> active_{false};
};

// What one redraw writes: cursor home, each line followed by clear-to-end-of-line, then
// clear-to-end-of-screen. Nothing is erased before it is overwritten, so the screen never flashes blank.
// Lines must already fit the width (render_screen's promise): a wrapped line would scroll the frame. No
// newline after the last line, so a frame as tall as the terminal does not scroll either.
std::string compose_frame(const std::vector<std::string>& lines);

// Writes all of `data`, through partial writes and EINTR. False on any other error.
bool write_all(int fd, std::string_view data) noexcept;

struct TerminalSize {
  int columns = 0, rows = 0;
};
// TIOCGWINSZ; empty when fd is not a terminal or the terminal does not know (0x0).
std::optional<TerminalSize> terminal_size(int fd);

// Colour when the output is a terminal, NO_COLOR is not set to a non-empty value (https://no-color.org) and
// TERM is not "dumb". The getenv() results are arguments (nullptr: unset) so that the rule is testable.
bool colour_wanted(bool output_is_terminal, const char* no_color, const char* term);
bool colour_wanted_for(int fd);  // the same, from isatty(fd) and this process's environment

}  // namespace gilspy::top
