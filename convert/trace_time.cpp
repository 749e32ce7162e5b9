#include "convert/trace_time.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "convert/json_writer.hpp"

namespace gilspy::convert {

std::string format_us(int64_t ns) {
  char text[kUsTextMax];
  return std::string(text, us_text(ns, text));
}

// std::from_chars rounds as JSON.parse does. Below 2^53 ns, ns and 1000 are exact doubles and IEEE division
// rounds their quotient, the same real number as the text, the same way: no text needed
// (tests/unit/test_convert_jobs.cpp checks the two agree).
double reader_us(int64_t ns) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (ns > -kExact && ns < kExact) return static_cast<double>(ns) / 1000.0;
  char text[kUsTextMax];
  double value = 0;
  std::from_chars(text, text + us_text(ns, text), value);
  return value;
}

int64_t reader_safe_dur_ns(int64_t start_ns, int64_t end_ns) {
  int64_t dur = end_ns - start_ns;
  if (dur <= 0) return dur;
  const double start = reader_us(start_ns);
  const double end = reader_us(end_ns);
  // One step (1 ns = 0.001 us) is far above the rounding error of a sum of doubles below ~1e12 us, so this
  // runs once or twice; it ends at dur 0 at the latest, where start <= end holds. Times on the epoch itself
  // (absolute µs, ~1.7e15: a trace without baseTimeNanoseconds) have doubles 0.25 µs apart: steps of half
  // that.
  if (start + reader_us(dur) <= end) return dur;  // nearly always
  const int64_t step =
      std::max<int64_t>(1, static_cast<int64_t>((std::nextafter(end, HUGE_VAL) - end) * 500));
  while (dur > 0 && start + reader_us(dur) > end) dur = std::max<int64_t>(0, dur - step);
  return dur;
}

int64_t nested_end_ns(int64_t parent_start_ns, int64_t start_ns, int64_t end_ns) {
  // The parent ends at end_ns or later; where it is written to end, in doubles, is at least where it would be
  // written to end if it ended at end_ns (reader_safe_dur_ns grows with the end).
  const double limit = reader_us(parent_start_ns) + reader_us(reader_safe_dur_ns(parent_start_ns, end_ns));
  const double start = reader_us(start_ns);
  int64_t dur = end_ns - start_ns;
  while (dur > 0 && start + reader_us(dur) > limit) --dur;
  return start_ns + dur;
}

}  // namespace gilspy::convert
