#pragma once
// Times in a trace as its viewers read them. ts and dur are written as microseconds with exactly three
// decimals from integer nanoseconds (convert/json_writer.hpp); JavaScript viewers read them as doubles and
// add them as doubles, which can put the end of a slice one ulp past the start of the next one on its lane.
// These say what a reader gets, and pick a dur that stays clear of that.
#include <cstdint>
#include <string>

namespace gilspy::convert {

// ns as microseconds with exactly three decimals: 1234567 -> "1234.567", -5 -> "-0.005".
std::string format_us(int64_t ns);
// The double a JSON reader gets for that text: the nearest double to the decimal, as JavaScript's JSON.parse
// and strtod round it.
double reader_us(int64_t ns);

// The dur (ns) written for a slice [start_ns, end_ns): end - start, less 1 ns (0.001 us) where needed so that
// ts + dur, read as JSON doubles and added as JavaScript viewers add them, stays <= the double of end_ns, the
// ts of whatever follows on the lane. Otherwise it can land one ulp past that ts (4059637.649 + 10597.362 =
// 4070235.0110000004) and DevTools' trace engine, seeing the next slice start inside this one and end after
// it, drops the next slice.
int64_t reader_safe_dur_ns(int64_t start_ns, int64_t end_ns);

// The end (ns) to write for a child slice [start_ns, end_ns) nested in a parent slice that begins at
// parent_start_ns and ends at or after end_ns: end_ns, or a few ns less, so that start + dur as doubles stays
// within the parent's start + dur as doubles (both written with reader_safe_dur_ns()).
int64_t nested_end_ns(int64_t parent_start_ns, int64_t start_ns, int64_t end_ns);

}  // namespace gilspy::convert
