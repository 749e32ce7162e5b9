#include "cli/top/top_render.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "base/terminal_text.hpp"
#include "cli/top/cpu_columns.hpp"
#include "cli/top/function_table.hpp"
#include "cli/top/gc_format.hpp"

namespace gilspy::top {

namespace {

Line title_line(const TopSnapshot& s, SortKey sort, bool totals, bool paused) {
  const char* key = sort == SortKey::kHold ? "HOLD%" : sort == SortKey::kWait ? "WAIT%" : "TID";
  const std::string period = totals
                                 ? fmt::format("totals over {:.1f} s", seconds(s.now_ns - s.totals_start_ns))
                                 : fmt::format("last {:.1f} s", seconds(s.now_ns - s.interval_start_ns));
  Line l{{{"gilspy top", Style::kBold}, {fmt::format("  {}  sorted by {}", period, key), Style::kPlain}},
         false};
  if (paused) l.segments.push_back({"  PAUSED", Style::kWarn});
  return l;
}

Line process_line(const ProcessRow& p) {
  std::string text =
      fmt::format("pid {}  rank {}  Python {}", p.pid, p.rank, escape_for_terminal(p.python_version));
  Line l{{{text, Style::kBold}}, false};
  if (p.exact) l.segments.push_back({"  exact (probes on take_gil / drop_gil)", Style::kPlain});
  if (p.ended) l.segments.push_back({"  [ended]", Style::kWarn});
  l.segments.push_back({"  " + escape_for_terminal(p.command), Style::kPlain});
  return l;
}

// Header figures packed into as few lines as the width allows; a figure is never split between two lines.
std::vector<Line> figure_lines(const ProcessRow& p, bool totals, std::size_t width) {
  std::vector<Line> out;
  Line cur;
  std::size_t used = 0;
  for (const HeaderFigure& f : header_figures(p, totals)) {
    const std::size_t w = display_width(f.label) + 1 + display_width(f.value);
    const std::size_t gap = cur.segments.empty() ? 2 : 3;  // indented under the process line
    if (!cur.segments.empty() && used + gap + w > width) {
      out.push_back(std::move(cur));
      cur = Line{};
      used = 0;
    }
    const std::size_t indent = cur.segments.empty() ? 2 : 3;
    cur.segments.push_back({std::string(indent, ' ') + f.label + " ", Style::kPlain});
    cur.segments.push_back({f.value, Style::kBold});
    used += indent + w;
  }
  if (!cur.segments.empty()) out.push_back(std::move(cur));
  return out;
}

// Everything of a process but its thread rows, and the rows in the order they are shown.
struct Group {
  std::vector<Line> head;
  std::vector<Line> rows;
  // head[0] is the process line; the figure lines after it are what a short screen leaves out first.
  std::size_t figure_lines = 0;
  // On a short screen: only the process line, the warning if any, and the table heading.
  void drop_figures() {
    head.erase(head.begin() + 1, head.begin() + 1 + static_cast<std::ptrdiff_t>(figure_lines));
    figure_lines = 0;
  }
};

Group build_group(const ProcessRow& p, const TableLayout& layout, SortKey sort, bool totals,
                  std::size_t width, const CpuLayout* cpu = nullptr) {
  Group g;
  g.head.push_back(process_line(p));
  for (Line& l : figure_lines(p, totals, width)) g.head.push_back(std::move(l));
  if (const auto& gc = (totals ? p.total : p.interval).gc)
    g.head.push_back(Line{{{"  " + gc_row_text(*gc), Style::kPlain}}, false});
  g.figure_lines = g.head.size() - 1;
  if (!p.warning.empty())
    g.head.push_back(Line{{{"  ! " + escape_for_terminal(p.warning), Style::kWarn}}, false});
  g.head.push_back(cpu != nullptr ? cpu_heading(*cpu) : table_heading(layout));
  for (const ThreadRow* t : sorted_threads(p, sort, totals)) {
    g.rows.push_back(cpu != nullptr ? cpu_row(*cpu, *t, totals) : table_row(layout, *t, totals));
  }
  return g;
}

// Rows for each group when there are not enough for all: an equal share each, what a small group leaves over
// goes to the others.
std::vector<std::size_t> share_rows(const std::vector<Group>& groups, std::size_t available) {
  std::vector<std::size_t> alloc(groups.size(), 0);
  for (;;) {
    std::vector<std::size_t> hungry;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      if (alloc[i] < groups[i].rows.size()) hungry.push_back(i);
    }
    if (hungry.empty() || available == 0) return alloc;
    const std::size_t each = std::max<std::size_t>(1, available / hungry.size());
    for (const std::size_t i : hungry) {
      const std::size_t give = std::min({each, groups[i].rows.size() - alloc[i], available});
      alloc[i] += give;
      available -= give;
    }
  }
}

}  // namespace

std::string help_text(std::size_t width) {
  // The longest form that fits: a cut help line would hide `q quit`, the key a lost user looks for.
  for (const char* text :
       {"h sort HOLD%  w sort WAIT%  i sort TID  c CPU/GIL columns  f functions/threads  t "
        "totals/interval  p pause  r reset  q quit",
        "h/w/i sort  c CPU  f functions  t totals  p pause  r reset  q quit", "h w i c f t p r q"}) {
    if (display_width(text) <= width) return text;
  }
  return "q";
}

// The function view: the title, the function table in the rows there are, the help line.
std::vector<std::string> render_function_screen(const TopSnapshot& s, const RenderOptions& o) {
  const auto width = static_cast<std::size_t>(o.width);
  const auto height = static_cast<std::size_t>(o.height);
  std::vector<Line> body{title_line(s, o.sort, o.totals, o.paused)};
  body.push_back(Line{});
  // Title, blank line, heading and help line: the rest is rows.
  const std::size_t rows = height > 4 ? height - 4 : 0;
  for (Line& l : function_lines(s, o.sort, o.totals, width, rows)) body.push_back(std::move(l));
  if (body.size() > height - 1) body.resize(height - 1);
  std::vector<std::string> out;
  for (const Line& l : body) out.push_back(emit(l, width, o.colour));
  out.push_back(emit(Line{{{help_text(width), Style::kBold}}, false}, width, o.colour));
  return out;
}

std::vector<std::string> render_screen(const TopSnapshot& s, const RenderOptions& o) {
  std::vector<std::string> out;
  if (o.width <= 0 || o.height <= 0) return out;
  if (o.functions) return render_function_screen(s, o);
  const auto width = static_cast<std::size_t>(o.width);
  const auto height = static_cast<std::size_t>(o.height);
  const TableLayout layout = layout_table(width);
  const CpuLayout cpu_layout = layout_cpu_table(width);

  std::vector<Group> groups;
  for (const ProcessRow& p : s.processes) {
    groups.push_back(build_group(p, layout, o.sort, o.totals, width, o.cpu ? &cpu_layout : nullptr));
  }

  // Title and help take two rows, each group its head and a blank line before it.
  const auto fixed_rows = [&groups] {
    std::size_t n = 2;
    for (const Group& g : groups) n += g.head.size() + 1;
    return n;
  };
  // The thread rows are what top is for: a screen too short for a row per process shows no figure lines.
  if (fixed_rows() + groups.size() > height) {
    for (Group& g : groups) g.drop_figures();
  }
  const std::size_t fixed = fixed_rows();
  const std::vector<std::size_t> alloc = share_rows(groups, height > fixed ? height - fixed : 0);

  std::vector<Line> body{title_line(s, o.sort, o.totals, o.paused)};
  if (groups.empty()) body.push_back(Line{{{"no target", Style::kPlain}}, false});
  for (std::size_t i = 0; i < groups.size(); ++i) {
    body.push_back(Line{});
    for (const Line& l : groups[i].head) body.push_back(l);
    const std::size_t total = groups[i].rows.size();
    // A cut group gives its last row to saying so.
    const std::size_t shown = alloc[i] < total && alloc[i] > 0 ? alloc[i] - 1 : alloc[i];
    for (std::size_t r = 0; r < shown; ++r) body.push_back(groups[i].rows[r]);
    if (shown < total && alloc[i] > 0) {
      body.push_back(
          Line{{{fmt::format("  ... {} more threads (a taller terminal shows them)", total - shown),
                 Style::kPlain}},
               false});
    }
  }
  if (body.size() > height - 1) {
    // Still too short (many processes): what does not fit is counted on the last row.
    const std::size_t kept = height >= 3 ? height - 2 : 0;
    const std::size_t cut = body.size() - kept;
    body.resize(kept);
    if (height >= 2) {
      body.push_back(Line{
          {{fmt::format("... {} more lines (a taller terminal shows them)", cut), Style::kPlain}}, false});
    }
  }
  for (const Line& l : body) out.push_back(emit(l, width, o.colour));
  out.push_back(emit(Line{{{help_text(width), Style::kBold}}, false}, width, o.colour));
  return out;
}

std::string render_batch(const TopSnapshot& s, SortKey sort, bool totals, bool cpu, bool functions) {
  // Wide enough for every column and the longest name; nothing is dropped in a batch.
  constexpr std::size_t kWidth = 160;
  const TableLayout layout = layout_table(kWidth);
  std::string out;
  auto add = [&](const Line& l) {
    std::string text = emit(l, std::string::npos, false);
    text.erase(text.find_last_not_of(' ') + 1);  // the bar's blank tail: noise in a log
    out += text + "\n";
  };
  add(title_line(s, sort, totals, false));
  const CpuLayout cpu_layout = layout_cpu_table(kWidth);
  for (const ProcessRow& p : s.processes) {
    const Group g = build_group(p, layout, sort, totals, kWidth);
    for (const Line& l : g.head) add(l);
    for (const Line& l : g.rows) add(l);
    if (cpu) {
      add(cpu_heading(cpu_layout));
      for (const ThreadRow* t : sorted_threads(p, sort, totals)) add(cpu_row(cpu_layout, *t, totals));
    }
  }
  if (functions) {
    for (const Line& l : function_lines(s, sort, totals, kWidth, s.functions.size() + 1)) add(l);
  }
  return out;
}

}  // namespace gilspy::top
