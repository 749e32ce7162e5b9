#pragma once
// The pieces of a `gilspy top` screen, shared by the interactive and the batch renderers: how a value is
// written, the header figures of a process, the thread table's columns (and which go first when the terminal
// is narrow), and styled text whose width is known before any escape code is added.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/top/top_types.hpp"

namespace gilspy::top {

enum class SortKey { kHold, kWait, kTid };

// ---- values
// ------------------------------------------------------------------------------------------------

std::string format_percent(double share);  // "42.1"
std::string format_duration(int64_t ns);   // "850us", "12.4ms", "3.21s", "-" for 0
std::string format_rate(double per_s);     // "2.5", "523"

inline double seconds(int64_t ns) {
  return static_cast<double>(ns) / 1e9;
}

// One label/value pair of a process header. Built from data, so GC or CPU rows are one more entry.
struct HeaderFigure {
  std::string label, value;
};
std::vector<HeaderFigure> header_figures(const ProcessRow& p, bool totals);

// Live threads first, each group by the key (shares descending, ids ascending); ties by tid.
std::vector<const ThreadRow*> sorted_threads(const ProcessRow& p, SortKey key, bool totals);

// ---- styled text
// -------------------------------------------------------------------------------------------

enum class Style { kPlain, kBold, kHeading, kHold, kWait, kWarn };

struct Segment {
  std::string text;  // terminal-safe: escaped, no control characters
  Style style = Style::kPlain;
};

struct Line {
  std::vector<Segment> segments;
  bool dim = false;  // an ended thread
};

// The line cut to `width` columns; with colour, each styled segment is wrapped in SGR codes (which take no
// columns). Without colour the result holds no escape code at all.
std::string emit(const Line& line, std::size_t width, bool colour);

// ---- the thread table
// --------------------------------------------------------------------------------------

enum class Col {
  kTid,
  kName,
  kHold,
  kWait,
  kCi95,
  kReleased,
  kHoldsPerS,
  kMeanHold,
  kMaxHold,
  kMaxWait,
  kBar,
  kFunction
};

struct TableLayout {
  std::vector<Col> columns;  // in display order
  std::size_t name_width = 0;
};

// The columns that fit in `width`: the least important are dropped first (REL%, MEAN HOLD, the bar, HOLDS/S,
// FUNCTION, MAX WAIT, MAX HOLD, NAME); TID, HOLD% and WAIT% always stay. NAME takes the room that is left, up
// to a cap.
TableLayout layout_table(std::size_t width);

Line table_heading(const TableLayout& layout);
Line table_row(const TableLayout& layout, const ThreadRow& t, bool totals);

}  // namespace gilspy::top
