#pragma once
// `gilspy top`'s screens as pure functions of a snapshot: the interactive screen (lines that fit the
// terminal), batch text (no escape codes) and one JSON object per snapshot. Nothing here writes to a
// terminal.
#include <cstddef>
#include <string>
#include <vector>

#include "cli/top/top_format.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

struct RenderOptions {
  int width = 80, height = 24;  // of the terminal, in columns and rows
  SortKey sort = SortKey::kHold;
  bool totals = false;  // figures since start (or the last reset) instead of the last interval
  bool colour = false;
  bool paused = false;     // the screen is frozen on this snapshot
  bool cpu = false;        // the CPU columns (cpu_columns.hpp, key c) instead of the GIL ones
  bool functions = false;  // the function view (function_table.hpp, key f) instead of the processes
};

// At most `height` lines, none wider than `width` columns (SGR codes, present only with colour, take none);
// lines carry no newline. A title, per process a header and a thread table, the help line last. When rows run
// out, each process keeps a fair share and says how many threads it does not show.
std::vector<std::string> render_screen(const TopSnapshot& s, const RenderOptions& o);

// The keys, as the help line shows them: the longest of a few forms that fits in `width`.
std::string help_text(std::size_t width = 1000);

// Plain text for a pipe or a log: every process and thread, all columns, no escape code; ends with a newline.
// With `cpu`, each process's CPU table (cpu_columns.hpp) follows its GIL table; with `functions`, the
// function table (function_table.hpp, every function) follows them all.
std::string render_batch(const TopSnapshot& s, SortKey sort = SortKey::kHold, bool totals = false,
                         bool cpu = false, bool functions = false);

// One JSON object on one line, no newline: per process the header figures of both periods, per thread its
// shares as fractions, holds, and lengths in seconds; the 50 functions that held the GIL longest in the
// interval (own and total time per role, seconds). Target text is JSON-escaped (invalid UTF-8 replaced).
std::string render_json(const TopSnapshot& s);

}  // namespace gilspy::top
