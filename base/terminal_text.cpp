#include "base/terminal_text.hpp"

#include <algorithm>
#include <cstdint>

namespace gilspy {

namespace {

// "\x1B", "\u202E" (base/ links no formatting library).
std::string hex_escape(const char* prefix, uint32_t value, int digits) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out(prefix);
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(value >> shift) & 0xF];
  return out;
}

// Decodes one UTF-8 sequence at text[i]. Returns its length and sets cp, or 0 when the bytes there are not a
// valid, shortest-form encoding of a scalar value.
std::size_t decode(std::string_view text, std::size_t i, uint32_t& cp) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  std::size_t len = 0;
  uint32_t min = 0;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Code points a terminal does not print as themselves: C1 controls, and the format characters that reorder or
// hide text (bidi embeddings, overrides and isolates, zero-width marks, line/paragraph separators, BOM).
bool is_hidden(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

}  // namespace

std::string escape_for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const std::size_t len = decode(text, i, cp);
    if (len == 0) {
      out += hex_escape("\\x", static_cast<unsigned char>(text[i]), 2);
      ++i;
      continue;
    }
    if (cp < 0x20 || cp == 0x7F) {
      out += hex_escape("\\x", cp, 2);
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (is_hidden(cp)) {
      out += hex_escape("\\u", cp, 4);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

namespace {
// Width and length of the code point at text[i]; an invalid byte counts as one column (it cannot occur in
// escaped text, but the function must not loop or under-count on it).
std::size_t step(std::string_view text, std::size_t i, std::size_t& columns) {
  uint32_t cp = 0;
  const std::size_t len = decode(text, i, cp);
  if (len == 0) {
    columns = 1;
    return 1;
  }
  columns = cp >= 0x1100 ? 2 : 1;
  return len;
}
}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t w = 0;
    i += step(text, i, w);
    width += w;
  }
  return width;
}

std::string_view cut_to_width(std::string_view text, std::size_t columns) {
  std::size_t width = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t w = 0;
    const std::size_t len = step(text, i, w);
    if (width + w > columns) break;
    width += w;
    i += len;
  }
  return text.substr(0, i);
}

std::string fit_with_marker(std::string_view text, std::size_t columns) {
  if (display_width(text) <= columns) return std::string(text);
  if (columns == 0) return {};
  std::string out(cut_to_width(text, columns - 1));
  out += '~';
  return out;
}

std::string pad_to_width(std::string_view text, std::size_t columns, bool left) {
  const std::string cut = fit_with_marker(text, columns);
  const std::string fill(columns - std::min(columns, display_width(cut)), ' ');
  return left ? cut + fill : fill + cut;
}

}  // namespace gilspy
