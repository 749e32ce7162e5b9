#include "cpython_layouts/line_table.hpp"

#include <climits>

namespace gilspy::layouts {
namespace {

// The running line is summed in 64 bits from a first line and deltas that the target wrote (a forged
// co_firstlineno of 2^31-1 and large deltas overflowed an int): a line that leaves int's range is no line.
bool fits_int(int64_t line) {
  return line >= INT_MIN && line <= INT_MAX;
}
LineLookup found(int64_t line) {
  return fits_int(line) ? LineLookup{.ok = true, .line = static_cast<int>(line)} : LineLookup{};
}

// 3.8-3.9, co_lnotab: (address increment, signed line increment) byte pairs, summed until the address passes
// `addr` (PyCode_Addr2Line in 3.8's codeobject.c).
LineLookup lnotab(std::span<const uint8_t> t, int64_t line, int64_t addr) {
  int64_t at = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    at += t[i];
    if (at > addr) break;
    line += static_cast<int8_t>(t[i + 1]);  // at most 2^63 / 128 steps from int's range: cannot overflow
  }
  return found(line);
}

// 3.10, co_linetable: (range length in bytes, signed line delta) pairs; a delta of -128 means the range has
// no line and leaves the running line as it is (codeobject.c advance() and _PyCode_CheckLineNumber()).
LineLookup linetable_310(std::span<const uint8_t> t, int64_t line, int64_t addr) {
  int64_t end = 0;
  int64_t range_line = -1;
  size_t i = 0;
  while (end <= addr) {
    if (i + 1 >= t.size()) return {};  // the table ends before the address
    end += t[i];
    const int delta = static_cast<int8_t>(t[i + 1]);
    i += 2;
    if (delta == -128) {
      range_line = -1;
    } else {
      line += delta;
      range_line = line;
    }
  }
  return found(range_line);
}

// 3.11+: the location table. Each entry starts with a byte 1CCCCLLL (code, length - 1 in code units), then
// code-dependent bytes with the top bit clear: 15 no location; 14 long form (line delta svarint, end line,
// column, end column varints); 13 no columns (line delta svarint); 10-12 one line, delta code - 10 (two
// column bytes); 0-9 short forms, same line (one byte). Varints are 6-bit groups, least significant first,
// bit 6 set while more follow; a signed varint's bit 0 is the sign.
bool varint(std::span<const uint8_t> t, size_t* i, uint32_t* out) {
  uint32_t v = 0;
  int shift = 0;
  while (true) {
    if (*i >= t.size() || (t[*i] & 0x80) != 0 || shift > 30) return false;
    const uint8_t b = t[(*i)++];
    v |= static_cast<uint32_t>(b & 63) << shift;
    shift += 6;
    if ((b & 64) == 0) break;
  }
  *out = v;
  return true;
}

LineLookup location_table(std::span<const uint8_t> t, int64_t line, int64_t addr) {
  int64_t end = 0;
  int64_t range_line = -1;
  size_t i = 0;
  while (end <= addr) {
    if (i >= t.size()) return {};
    const uint8_t first = t[i];
    if ((first & 0x80) == 0) return {};  // not the start of an entry: not a location table (or torn)
    const int code = (first >> 3) & 15;
    const int length = (first & 7) + 1;
    ++i;
    int64_t delta = 0;
    if (code == 14 || code == 13) {
      uint32_t u = 0;
      if (!varint(t, &i, &u)) return {};
      delta = (u & 1) != 0 ? -static_cast<int64_t>(u >> 1) : static_cast<int64_t>(u >> 1);
    } else if (code >= 10 && code <= 12) {
      delta = code - 10;
    }
    line += delta;  // each step below 2^31 and one per table byte: far from int64's limits
    if (!fits_int(line)) return {};
    range_line = code == 15 ? -1 : line;
    // The entry's other bytes (columns, end line) have the top bit clear: skip to the next entry.
    while (i < t.size() && (t[i] & 0x80) == 0) ++i;
    end += 2 * length;  // code units of 2 bytes
  }
  return found(range_line);
}

}  // namespace

LineLookup line_for_address(LineTableKind kind, std::span<const uint8_t> table, int first_line,
                            int64_t addr) {
  if (addr < 0) return {.ok = true, .line = first_line};
  switch (kind) {
    case LineTableKind::kLnotab:
      return lnotab(table, first_line, addr);
    case LineTableKind::kLinetable310:
      return linetable_310(table, first_line, addr);
    case LineTableKind::kLocationTable:
      return location_table(table, first_line, addr);
  }
  return {};
}

}  // namespace gilspy::layouts
