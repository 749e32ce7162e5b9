#pragma once
// Building raw records in unit tests.
#include <string>
#include <utility>

#include "sampler/raw_format.hpp"

namespace gilspy::testing {

inline raw::Record rec(raw::RecordKind k, int64_t tid, int64_t ts, int64_t dur = 0, uint64_t n = 0,
                       std::string name = {}) {
  raw::Record r;
  r.kind = k;
  r.tid = tid;
  r.ts = ts;
  r.dur = dur;
  r.n = n;
  r.name = std::move(name);
  return r;
}

}  // namespace gilspy::testing
