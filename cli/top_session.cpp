#include "cli/top_session.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <optional>
#include <utility>  // boost 1.74 asio uses std::exchange without including it

#include <fmt/format.h>

#include "base/terminal_text.hpp"
#include "cli/launch.hpp"
#include "cli/raw_sink.hpp"
#include "cli/screen_sink.hpp"
#include "cli/session.hpp"
#include "cli/target_options.hpp"
#include "cli/top/keys.hpp"
#include "cli/top/terminal.hpp"
#include "cli/top/top_render.hpp"

namespace gilspy::cli {

namespace asio = boost::asio;

namespace {

// What `top` shows, and where: the live screen, or snapshots on stdout. Gets the screen sink's snapshots and,
// on the live screen, the keys.
class TopView {
 public:
  TopView(const TopOptions& o, Session& session, bool live) : o_(o), session_(session), live_(live) {
    view_.colour = live && top::colour_wanted_for(STDOUT_FILENO);
    view_.functions = o.functions;
  }

  void on_snapshot(top::TopSnapshot s, bool last) {
    if (o_.count > 0 && shown_ >= o_.count) return;  // the tick of the stop that -n asked for
    ++shown_;
    if (last) ended_ = true;
    if (live_) {
      if (view_.paused && !last) {
        latest_ = std::move(s);  // frozen: shown when unpaused
      } else {
        view_.paused = false;
        screen_ = std::move(s);
        latest_.reset();
        redraw();
      }
    } else if (o_.json) {
      std::fputs((top::render_json(s) + "\n").c_str(), stdout);
      std::fflush(stdout);
    } else {
      if (shown_ > 1) std::fputs("\n", stdout);
      std::fputs(top::render_batch(s, top::SortKey::kHold, false, !o_.session.counters.empty(), o_.functions)
                     .c_str(),
                 stdout);
      std::fflush(stdout);
    }
    if (o_.count > 0 && shown_ >= o_.count) session_.request_stop();
  }

  // Bytes typed on the live screen.
  void on_input(std::string_view bytes, ScreenSink& sink) {
    for (const top::Key k : top::decode_keys(bytes)) {
      const bool was_paused = view_.paused;
      if (top::apply_view_key(k, view_)) {
        if (was_paused && !view_.paused && latest_) {
          screen_ = std::move(latest_);
          latest_.reset();
        }
      } else if (k == top::Key::kQuit) {
        session_.request_stop();
        return;
      } else if (k == top::Key::kReset) {
        sink.reset();  // the screen shows the next interval's figures from the reset on
      }
    }
    redraw();
  }

  void redraw() {
    const top::TerminalSize size = top::terminal_size(STDOUT_FILENO).value_or(top::TerminalSize{80, 24});
    view_.width = size.columns;
    view_.height = size.rows;
    lines_ = screen_ ? top::render_screen(*screen_, view_) : waiting_screen();
    top::write_all(STDOUT_FILENO, top::compose_frame(lines_));
  }

  // The last screen, kept on the normal screen once the alternate one is gone (the targets exited).
  void print_last_screen(const std::string& note) const {
    std::string out;
    for (const std::string& l : lines_) out += l + "\n";
    out += note + "\n";
    top::write_all(STDOUT_FILENO, out);
  }

  bool ended() const { return ended_; }

 private:
  // Before the first interval has passed: who is watched, and when the figures come.
  std::vector<std::string> waiting_screen() const {
    const auto width = static_cast<std::size_t>(std::max(1, view_.width));
    std::vector<top::Line> lines;
    lines.push_back({{{"gilspy top", top::Style::kBold},
                      {fmt::format("  first figures after {:g} s", o_.interval_s), top::Style::kPlain}},
                     false});
    for (const SessionTarget* t : session_.targets()) {
      lines.push_back(
          {{{fmt::format("pid {}  rank {}  Python {}  ", t->pid, t->rank, t->interp->binary.version.text()),
             top::Style::kBold},
            {escape_for_terminal(t->command), top::Style::kPlain}},
           false});
    }
    std::vector<std::string> out;
    for (const top::Line& l : lines) {
      if (out.size() + 1 >= static_cast<std::size_t>(std::max(1, view_.height))) break;
      out.push_back(top::emit(l, width, view_.colour));
    }
    out.push_back(top::emit({{{top::help_text(width), top::Style::kBold}}, false}, width, view_.colour));
    return out;
  }

  const TopOptions& o_;
  Session& session_;
  bool live_;
  top::RenderOptions view_;
  std::optional<top::TopSnapshot> screen_;  // on the screen
  std::optional<top::TopSnapshot> latest_;  // taken while paused
  std::vector<std::string> lines_;          // as last drawn
  int shown_ = 0;
  bool ended_ = false;
};

// The live screen's input: the terminal opened a second time, so that the non-blocking mode Asio puts on its
// descriptor stays on this open file and never reaches the shell's standard input.
int open_keyboard() {
  const char* name = ::ttyname(STDIN_FILENO);
  const int fd = name != nullptr ? ::open(name, O_RDONLY | O_NOCTTY | O_CLOEXEC) : -1;
  return fd >= 0 ? fd : ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0);
}

// Notes while the live screen is up (a process found, one skipped) wait until the terminal is restored.
struct HeldNotes {
  std::vector<std::string> lines;
  bool holding = false;
  void note(const std::string& line) {
    if (holding) {
      lines.push_back(line);
    } else {
      fmt::print(stderr, "gilspy: {}\n", line);
    }
  }
  void release() {
    holding = false;
    for (const std::string& line : lines) fmt::print(stderr, "gilspy: {}\n", line);
  }
};

// The session on the live screen: keys, resizing, Ctrl+Z, and the last screen kept once the targets exited.
SessionOutcome run_live(Session& session, TopView& view, ScreenSink& screen, HeldNotes& notes) {
  // From here on the terminal is in key-at-a-time mode on the alternate screen; the guard puts it back on
  // every way out of this function: the end of the run, an exception, a signal (the session turns SIGINT and
  // SIGTERM into the end of the run).
  std::optional<top::TerminalGuard> guard(std::in_place, STDIN_FILENO, STDOUT_FILENO);
  asio::io_context& io = session.io_context();
  asio::posix::stream_descriptor keyboard(io, open_keyboard());
  std::function<void(const boost::system::error_code&)> on_key = [&](const boost::system::error_code& ec) {
    if (ec) return;
    char buf[256];
    const ssize_t n = ::read(keyboard.native_handle(), buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;  // the terminal is gone: no more keys
    if (n > 0) view.on_input(std::string_view(buf, static_cast<size_t>(n)), screen);
    keyboard.async_wait(asio::posix::descriptor_base::wait_read, on_key);
  };
  keyboard.async_wait(asio::posix::descriptor_base::wait_read, on_key);

  asio::signal_set winch(io, SIGWINCH);
  std::function<void(const boost::system::error_code&, int)> on_winch =
      [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        view.redraw();  // at the new size; a narrow terminal drops columns (render_screen)
        winch.async_wait(on_winch);
      };
  winch.async_wait(on_winch);

  // Ctrl+Z: the shell gets its terminal back as it was, and the screen comes back on `fg`.
  asio::signal_set tstp(io, SIGTSTP);
  std::function<void(const boost::system::error_code&, int)> on_tstp =
      [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        guard.reset();
        ::kill(::getpid(), SIGSTOP);  // returns once continued
        guard.emplace(STDIN_FILENO, STDOUT_FILENO);
        view.redraw();
        tstp.async_wait(on_tstp);
      };
  tstp.async_wait(on_tstp);

  view.redraw();
  notes.holding = true;
  const SessionOutcome out = session.run();
  guard.reset();
  notes.release();
  if (view.ended()) {
    view.print_last_screen(out.launched ? "gilspy top: the program exited; these are its last figures"
                                        : "gilspy top: the target exited; these are its last figures");
  }
  return out;
}

}  // namespace

int run_top(const TopOptions& o) {
  if (!o.output_dir.empty()) ensure_output_dir(o.output_dir);
  HeldNotes notes;
  SessionOptions so = o.session;
  so.note = [&notes](const std::string& line) { notes.note(line); };
  so.loop.stats_period_s = o.interval_s;  // a snapshot per stats tick: every window ends exactly at a tick
  Session session(so);                    // errors (no such pid, not Python) before the terminal is touched
  warn_if_rate_too_high(o.session.loop);

  const bool live = !o.batch && !o.json && ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  TopView view(o, session, live);
  ScreenSink screen([&](top::TopSnapshot s, bool last) { view.on_snapshot(std::move(s), last); });
  session.add_sink(screen);
  std::vector<std::string> files_written;
  std::optional<RawFileSink> files;
  if (!o.output_dir.empty()) {
    files.emplace(o.output_dir, true, kDefaultOutputMode, [&](const FinishedTarget& done) {
      files_written.push_back(fmt::format("gilspy: pid {}: raw data {}, trace {}", done.target.pid,
                                          done.raw_path, done.trace_path));
    });
    session.add_sink(*files);
  }

  const SessionOutcome out = live ? run_live(session, view, screen, notes) : session.run();
  for (const std::string& line : files_written) fmt::print(stderr, "{}\n", line);
  if (!live && view.ended()) fmt::print(stderr, "gilspy top: the target exited\n");
  if (out.launched) return out.child_status ? exit_status_of(*out.child_status) : 1;
  return 0;
}

}  // namespace gilspy::cli
