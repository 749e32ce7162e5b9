// gilspy_trace_check TRACE.json...: support/trace_check.hpp's rules on each file, for the end-to-end and
// viewer tests (tests/e2e/harness.py check_trace). Exit status 0 when every file passes, 1 when one breaks a
// rule (the first problems are printed), 2 when one cannot be read.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "support/trace_check.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: gilspy_trace_check TRACE.json...\n");
    return 2;
  }
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      fmt::print(stderr, "gilspy_trace_check: cannot open {}: {}\n", argv[i], std::strerror(errno));
      return 2;
    }
    std::ostringstream text;
    text << in.rdbuf();
    const auto r = gilspy::test::check_chrome_trace(text.str());
    fmt::print("{}: {} events on {} lanes, {} adjacent pairs, {} problems\n", argv[i], r.events, r.lanes,
               r.adjacent_pairs, r.problem_count);
    for (const auto& p : r.problems) fmt::print("  {}\n", p);
    if (!r.ok()) status = 1;
  }
  return status;
}
