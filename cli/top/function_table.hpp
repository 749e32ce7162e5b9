#pragma once
// The function view's table (key f): one row per Python function, the time threads spent in it over the
// period, per GIL role, as cli/top/function_account.hpp sums it. Sorted by own hold time (h), own wait time
// (w) or name (i).
#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/top/top_format.hpp"
#include "cli/top/top_types.hpp"

namespace gilspy::top {

// The rows with time in the period, in the order of `key`.
std::vector<const FunctionRow*> sorted_functions(const TopSnapshot& s, SortKey key, bool totals);

// The heading and at most `max_rows` rows (the last saying how many more there are, when cut), each at most
// `width` columns; a line saying why the table is empty when no stack was read in the period.
std::vector<Line> function_lines(const TopSnapshot& s, SortKey key, bool totals, std::size_t width,
                                 std::size_t max_rows);

// The top `n` functions by own hold time over the interval, for --json.
nlohmann::json functions_json(const TopSnapshot& s, std::size_t n);

}  // namespace gilspy::top
