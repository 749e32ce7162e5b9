// gilspy_trace_check [--merged] TRACE.json[.gz]...: support/trace_check.hpp's rules on each file, for the
// end-to-end and viewer tests (tests/e2e/harness.py check_trace). --merged: a profiler's trace that gilspy
// merged its lanes into (only gilspy's events are checked). A gzip file is read through zlib. Exit status 0
// when every file passes, 1 when one breaks a rule (the first problems are printed), 2 when one cannot be
// read.
#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "support/trace_check.hpp"

namespace {

// The file's text, gunzipped when it is gzip (gzread passes other files through as they are).
bool read_text(const char* path, std::string* text) {
  gzFile f = gzopen(path, "rb");
  if (f == nullptr) return false;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text->append(buf, static_cast<size_t>(n));
  const bool ok = n == 0;
  gzclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  gilspy::test::TraceCheckOptions options;
  int first = 1;
  if (argc > 1 && std::string(argv[1]) == "--merged") {
    options.merged = true;
    first = 2;
  }
  if (argc <= first) {
    fmt::print(stderr, "usage: gilspy_trace_check [--merged] TRACE.json...\n");
    return 2;
  }
  int status = 0;
  for (int i = first; i < argc; ++i) {
    std::string text;
    errno = 0;
    if (!read_text(argv[i], &text)) {
      fmt::print(stderr, "gilspy_trace_check: cannot read {}: {}\n", argv[i],
                 errno != 0 ? std::strerror(errno) : "damaged gzip data");
      return 2;
    }
    const auto r = gilspy::test::check_chrome_trace(text, options);
    fmt::print("{}: {} events on {} lanes, {} adjacent pairs, {} problems\n", argv[i], r.events, r.lanes,
               r.adjacent_pairs, r.problem_count);
    for (const auto& p : r.problems) fmt::print("  {}\n", p);
    if (!r.ok()) status = 1;
  }
  return status;
}
