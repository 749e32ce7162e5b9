#pragma once
// Target-controlled text (thread names, command lines, paths from /proc) on the way to a terminal. A Python
// program can name a thread "\x1b]0;pwned\x07" or "\u202e" and rewrite the user's screen, title or reading
// order; every byte that the terminal would interpret rather than print is made visible instead. Every place
// that prints target text (record's summary, info, top, error messages) passes it through
// escape_for_terminal. Widths are counted in terminal columns so that a renderer can promise that no line is
// longer than the screen.
#include <cstddef>
#include <string>
#include <string_view>

namespace gilspy {

// Printable, valid UTF-8 passes unchanged. Made visible instead:
//   C0 controls and DEL     -> \xHH      (ESC, \r, \n, \t, BEL, ...)
//   C1 controls U+0080-9F    -> \u0085   (8-bit CSI and friends)
//   bidi / invisible format  -> \u202E   (overrides, isolates, zero-width marks, line separators, BOM)
//   invalid UTF-8 bytes      -> \xHH     (stray continuations, overlong forms, surrogates, > U+10FFFF)
//   backslash                -> \\       (so an escaped name cannot impersonate an escape)
std::string escape_for_terminal(std::string_view text);

// Columns that escaped (valid UTF-8, no controls) text takes. Code points from U+1100 up count as two: that
// over-counts some scripts, which only costs space, but never under-counts East Asian wide text or emoji.
std::size_t display_width(std::string_view text);

// The longest prefix of `text` (escaped, valid UTF-8) that fits in `columns`, cut on a code point boundary.
std::string_view cut_to_width(std::string_view text, std::size_t columns);

// `text` cut to `columns`; a cut shows as a trailing '~' so a truncated name is not mistaken for a whole one.
std::string fit_with_marker(std::string_view text, std::size_t columns);

// A table cell: `text` fitted (fit_with_marker) and filled with spaces to exactly `columns`, on the right
// when `left` (text flush left), else on the left.
std::string pad_to_width(std::string_view text, std::size_t columns, bool left);

}  // namespace gilspy
