#pragma once
// What `gilspy record` prints about each target at the end.
#include "cli/raw_sink.hpp"

namespace gilspy::cli {

void print_target_summary(const FinishedTarget& done, double rate_asked, bool quiet);

}  // namespace gilspy::cli
