// gilspy top, rendering: hand-built snapshots through the screen, batch and JSON renderers. The promises
// under test: no line wider than the terminal, no more lines than rows, narrow terminals lose columns (least
// important first) instead of wrapping, target text never reaches the terminal raw, batch output has no
// escape code.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/terminal_text.hpp"
#include "cli/top/top_render.hpp"

namespace top = gilspy::top;

// Named per file, so that the unity build can put test files together.
namespace unit_top_render {
namespace {

top::ThreadRow thread(int64_t tid, std::string name, double hold, double wait, bool ended = false) {
  top::ThreadRow t;
  t.tid = tid;
  t.name = std::move(name);
  t.ended = ended;
  for (top::ThreadFigures* f : {&t.interval, &t.total}) {
    f->lifetime_ns = 1'000'000'000;
    f->hold_share = hold;
    f->wait_share = wait;
    f->released_share = 1 - hold - wait;
    f->holds = 42;
    f->holds_per_s = 42;
    f->mean_hold_ns = 1'500'000;
    f->longest_hold_ns = 12'400'000;
    f->longest_wait_ns = 93'100'000;
  }
  t.total.hold_share = hold / 2;  // so that interval and totals can be told apart
  return t;
}

top::TopSnapshot sample(int threads_per_process = 3, int processes = 1) {
  top::TopSnapshot s;
  s.now_ns = 11'000'000'000;
  s.interval_start_ns = 10'000'000'000;
  s.totals_start_ns = 1'000'000'000;
  for (int p = 0; p < processes; ++p) {
    top::ProcessRow row;
    row.id = static_cast<uint32_t>(p);
    row.pid = 8050 + p;
    row.rank = p;
    row.command = "python3 train.py --epochs 10";
    row.python_version = "3.11.7";
    row.interval.gil_busy_share = 0.989;
    row.interval.mean_waiters = 1.25;
    row.interval.max_waiters = 4;
    row.interval.handoffs_per_s = 583;
    row.interval.coverage = 0.988;
    row.interval.poll_rate_hz = 9971;
    row.interval.late_polls = 12;
    row.extra.push_back({"gc pause", 3.5, "ms"});
    for (int i = 0; i < threads_per_process; ++i) {
      row.threads.push_back(thread(8054 + i, "worker-" + std::to_string(i), 0.1 * (i % 7), 0.05 * (i % 5)));
    }
    s.processes.push_back(std::move(row));
  }
  return s;
}

// The text a terminal would show: SGR sequences removed. Anything else starting with ESC is left in place,
// where the caller's check finds it.
std::string visible(const std::string& line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < line.size() && (std::isdigit(static_cast<unsigned char>(line[j])) || line[j] == ';')) ++j;
      if (j < line.size() && line[j] == 'm') {
        i = j;
        continue;
      }
    }
    out += line[i];
  }
  return out;
}

bool has_control(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b < 0x20 || b == 0x7F;
  });
}

std::string heading(const std::vector<std::string>& lines) {
  for (const auto& l : lines) {
    if (l.find("TID") != std::string::npos && l.find("HOLD%") != std::string::npos) return l;
  }
  return {};
}

}  // namespace

TEST_CASE("render: no line wider than the terminal, no more lines than rows, at any size") {
  const top::TopSnapshot s = sample(12, 2);
  for (const bool colour : {false, true}) {
    for (int width = 1; width <= 200; width += 7) {
      for (int height = 1; height <= 40; height += 3) {
        const auto lines = top::render_screen(s, {width, height, top::SortKey::kHold, false, colour, true});
        REQUIRE(lines.size() <= static_cast<std::size_t>(height));
        for (const auto& l : lines) {
          const std::string shown = visible(l);
          INFO("width " << width << " height " << height << ": " << shown);
          REQUIRE(gilspy::display_width(shown) <= static_cast<std::size_t>(width));
          REQUIRE_FALSE(has_control(shown));
          if (!colour) REQUIRE(l == shown);
        }
      }
    }
  }
}

TEST_CASE("render: a short screen keeps thread rows (or says how many are hidden) before the figure lines") {
  // 40x10 showed the process's figure lines wrapped over the whole screen, no thread row and no hint.
  const top::TopSnapshot one = sample(5, 1);
  const auto lines = top::render_screen(one, {40, 10});
  REQUIRE(lines.size() <= 10);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  INFO(all);
  CHECK(all.find("8050") != std::string::npos);  // the process line stays
  CHECK(all.find("TID") != std::string::npos);   // and its table
  const bool row_or_hint =
      all.find("worker") != std::string::npos || all.find("more threads") != std::string::npos;
  CHECK(row_or_hint);
  // A screen that cannot even hold every process's head says what it cut.
  const auto tiny = top::render_screen(sample(5, 4), {40, 8});
  REQUIRE(tiny.size() <= 8);
  std::string cut;
  for (const auto& l : tiny) cut += l + "\n";
  INFO(cut);
  CHECK(cut.find("more lines") != std::string::npos);
}

TEST_CASE("render: a narrow terminal drops the least important columns, a wide one shows them all") {
  const top::TopSnapshot s = sample();
  const std::string wide = heading(top::render_screen(s, {200, 24}));
  for (const char* title : {"TID", "NAME", "HOLD%", "WAIT%", "REL%", "HOLDS/S", "MEAN HOLD", "MAX HOLD",
                            "MAX WAIT", "HOLD/WAIT", "FUNCTION"}) {
    CHECK(wide.find(title) != std::string::npos);
  }
  const std::string narrow = heading(top::render_screen(s, {60, 24}));
  REQUIRE_FALSE(narrow.empty());
  CHECK(narrow.find("REL%") == std::string::npos);
  CHECK(narrow.find("MEAN HOLD") == std::string::npos);
  CHECK(narrow.find("MAX HOLD") != std::string::npos);
  const std::string tiny = heading(top::render_screen(s, {24, 24}));
  CHECK(tiny.find("TID") != std::string::npos);
  CHECK(tiny.find("HOLD%") != std::string::npos);
  CHECK(tiny.find("WAIT%") != std::string::npos);
  CHECK(tiny.find("NAME") == std::string::npos);

  // Columns only ever go away as the terminal narrows.
  std::size_t previous = 99;
  for (std::size_t width = 200; width >= 20; width -= 5) {
    const std::size_t n = top::layout_table(width).columns.size();
    CHECK(n <= previous);
    previous = n;
  }
}

TEST_CASE("render: thread names and commands reach the screen escaped") {
  top::TopSnapshot s = sample(1);
  s.processes[0].threads[0].name = "\x1b[2J\x1b]0;owned\x07";
  s.processes[0].command =
      "python3 \xE2\x80\xAE"
      "evil\r\n";
  for (const bool colour : {false, true}) {
    const auto lines = top::render_screen(s, {200, 24, top::SortKey::kHold, false, colour, false});
    std::string all;
    for (const auto& l : lines) all += visible(l) + "|";
    CHECK(all.find("\\x1B[2J") != std::string::npos);
    CHECK(all.find("\\u202Eevil\\x0D\\x0A") != std::string::npos);
    CHECK_FALSE(has_control(all));
  }
  const std::string batch = top::render_batch(s);
  CHECK(batch.find('\x1b') == std::string::npos);
  CHECK(batch.find("\\x1B[2J") != std::string::npos);
}

TEST_CASE("render: rows sorted by the chosen key, ended threads dimmed last") {
  top::TopSnapshot s;
  top::ProcessRow p;
  p.pid = 1;
  p.threads = {thread(30, "low", 0.1, 0.7), thread(10, "gone", 0.9, 0.0, true), thread(20, "high", 0.6, 0.1)};
  s.processes.push_back(p);
  auto order = [&](top::SortKey key) {
    std::string names;
    for (const auto* t : top::sorted_threads(s.processes[0], key, false)) names += t->name + " ";
    return names;
  };
  CHECK(order(top::SortKey::kHold) == "high low gone ");
  CHECK(order(top::SortKey::kWait) == "low high gone ");
  CHECK(order(top::SortKey::kTid) == "high low gone ");

  const auto coloured = top::render_screen(s, {120, 24, top::SortKey::kHold, false, true, false});
  const auto plain = top::render_screen(s, {120, 24, top::SortKey::kHold, false, false, false});
  auto row_of = [](const std::vector<std::string>& lines, const char* name) {
    for (const auto& l : lines) {
      if (l.find(name) != std::string::npos) return l;
    }
    return std::string();
  };
  CHECK(row_of(coloured, "gone").find("\x1b[2") != std::string::npos);
  CHECK(row_of(coloured, "high").find("\x1b[2") == std::string::npos);
  CHECK(row_of(plain, "gone").find('\x1b') == std::string::npos);
  CHECK(row_of(plain, "gone").find("(ended)") != std::string::npos);
}

TEST_CASE("render: interval and totals show their own figures") {
  const top::TopSnapshot s = sample(2);  // worker-1 holds 10 % in the interval, 5 % in the totals
  auto row = [&](bool totals) {
    for (const auto& l : top::render_screen(s, {200, 24, top::SortKey::kTid, totals, false, false})) {
      if (l.find("worker-1") != std::string::npos) return l;
    }
    return std::string();
  };
  CHECK(row(false).find(" 10.0 ") != std::string::npos);
  CHECK(row(true).find("  5.0 ") != std::string::npos);
  const auto title = top::render_screen(s, {200, 24, top::SortKey::kTid, true, false, true})[0];
  CHECK(title.find("totals over 10.0 s") != std::string::npos);
  CHECK(title.find("PAUSED") != std::string::npos);
}

TEST_CASE("render: the header is built from figures, extras included") {
  const top::TopSnapshot s = sample(1);
  const auto figures = top::header_figures(s.processes[0], false);
  auto value = [&](const std::string& label) {
    for (const auto& f : figures) {
      if (f.label == label) return f.value;
    }
    return std::string("(none)");
  };
  CHECK(value("GIL busy") == "98.9 %");
  CHECK(value("waiters") == "1.2 avg, 4 max");
  CHECK(value("hand-offs") == "583/s");
  CHECK(value("coverage") == "98.8 %");
  CHECK(value("polls") == "9971/s");
  CHECK(value("gc pause") == "3.5 ms");
  const auto totals = top::header_figures(s.processes[0], true);  // no stats in the totals of this sample
  CHECK(totals[2].value == "-");
}

TEST_CASE("render: too many threads for the rows: each process keeps a share and says what it hides") {
  const top::TopSnapshot s = sample(30, 2);
  const auto lines = top::render_screen(s, {120, 30});
  CHECK(lines.size() == 30);
  int more = 0, pids = 0;
  for (const auto& l : lines) {
    more += l.find("more threads") != std::string::npos;
    pids += l.find("pid 805") != std::string::npos;
  }
  CHECK(more == 2);
  CHECK(pids == 2);
  CHECK(lines.back() == top::help_text(120));
  CHECK(top::help_text(120).find("q quit") != std::string::npos);
  for (std::size_t width = 1; width < 120; ++width) {  // quitting stays discoverable on any terminal
    INFO(width);
    CHECK(top::help_text(width).find('q') != std::string::npos);
    CHECK(gilspy::display_width(top::help_text(width)) <= std::max<std::size_t>(width, 1));
  }
}

TEST_CASE("render: batch text has every process and thread and no escape code") {
  const top::TopSnapshot s = sample(25, 2);
  const std::string text = top::render_batch(s);
  CHECK(text.find('\x1b') == std::string::npos);
  for (const auto& p : s.processes) {
    CHECK(text.find("pid " + std::to_string(p.pid)) != std::string::npos);
    for (const auto& t : p.threads)
      CHECK(text.find(std::to_string(t.tid) + " " + t.name) != std::string::npos);
  }
  CHECK(text.find("MEAN HOLD") != std::string::npos);
  CHECK(text.back() == '\n');
}

TEST_CASE("render: JSON is one object per snapshot on one line, in fractions and seconds") {
  top::TopSnapshot s = sample(2);
  s.processes[0].threads[1].name = "bad \xFF utf8 \x1b";
  s.processes[0].warning = "sampler falling behind";
  const std::string line = top::render_json(s);
  CHECK(line.find('\n') == std::string::npos);
  const auto j = nlohmann::json::parse(line);
  CHECK(j["interval_s"].get<double>() == doctest::Approx(1.0));
  CHECK(j["totals_s"].get<double>() == doctest::Approx(10.0));
  const auto& p = j["processes"][0];
  CHECK(p["pid"] == 8050);
  CHECK(p["rank"] == 0);
  CHECK(p["python_version"] == "3.11.7");
  CHECK(p["warning"] == "sampler falling behind");
  CHECK(p["interval"]["gil_busy"].get<double>() == doctest::Approx(0.989));
  CHECK(p["interval"]["max_waiters"] == 4);
  CHECK(p["interval"]["coverage"].get<double>() == doctest::Approx(0.988));
  CHECK(p["total"]["poll_rate_hz"].is_null());  // not known is not zero
  CHECK(p["extra"][0]["label"] == "gc pause");
  const auto& t = p["threads"][1];
  CHECK(t["tid"] == 8055);
  CHECK(t["name"].get<std::string>().find("bad ") == 0);
  CHECK(t["interval"]["hold"].get<double>() == doctest::Approx(0.1));
  CHECK(t["interval"]["wait"].get<double>() == doctest::Approx(0.05));
  CHECK(t["interval"]["released"].get<double>() == doctest::Approx(0.85));
  CHECK(t["interval"]["holds"] == 42);
  CHECK(t["interval"]["longest_hold_s"].get<double>() == doctest::Approx(0.0124));
  CHECK(t["interval"]["longest_wait_s"].get<double>() == doctest::Approx(0.0931));
  CHECK(t["total"]["hold"].get<double>() == doctest::Approx(0.05));
}

TEST_CASE("format: durations and rates") {
  CHECK(top::format_duration(0) == "-");
  CHECK(top::format_duration(850'000) == "850us");
  CHECK(top::format_duration(12'400'000) == "12.4ms");
  CHECK(top::format_duration(3'210'000'000) == "3.21s");
  CHECK(top::format_duration(250'000'000'000) == "250s");
  CHECK(top::format_rate(2.5) == "2.5");
  CHECK(top::format_rate(523.4) == "523");
}

}  // namespace unit_top_render
