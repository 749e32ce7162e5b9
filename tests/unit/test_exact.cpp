// --exact's parts that need no probes: decoding hits into holds and waits, the kernel's PMU description, the
// CPU list, and finding take_gil / drop_gil in real interpreters.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "elfutils/elf_image.hpp"
#include "sampler/exact/gil_probes.hpp"
#include "sampler/exact/handoff_decoder.hpp"
#include "sampler/exact/probe_rings.hpp"
#include "unit/pyenv_installs.hpp"

namespace unit_exact {

using gilspy::sampler::exact::HandoffDecoder;
using gilspy::sampler::exact::ProbeHit;
using gilspy::sampler::exact::ProbeKind;

struct Interval {
  char kind;  // 'H' or 'W'
  int32_t tid;
  int64_t ts, dur;
  bool operator==(const Interval&) const = default;
  bool operator<(const Interval& o) const { return std::tie(ts, tid, kind) < std::tie(o.ts, o.tid, o.kind); }
};

struct Collect : gilspy::sampler::exact::IntervalSink {
  std::vector<Interval> got;
  void hold(int32_t tid, int64_t ts, int64_t dur) override { got.push_back({'H', tid, ts, dur}); }
  void wait(int32_t tid, int64_t ts, int64_t dur) override { got.push_back({'W', tid, ts, dur}); }
};

constexpr ProbeKind kIn = ProbeKind::kTakeEntry, kTook = ProbeKind::kTakeReturn,
                    kDrop = ProbeKind::kDropEntry;

std::vector<Interval> decode(const std::vector<ProbeHit>& hits, int64_t start, int64_t end) {
  HandoffDecoder d(start, 64);
  Collect c;
  for (const ProbeHit& h : hits) d.add(h, c);
  d.finish(end, c);
  std::sort(c.got.begin(), c.got.end());
  return c.got;
}

TEST_CASE("exact: a take is a wait from take_gil's entry to its return, a hold from there to drop_gil") {
  const auto got = decode(
      {{10, 1, kIn}, {20, 1, kTook}, {30, 2, kIn}, {50, 1, kDrop}, {55, 2, kTook}, {80, 2, kDrop}}, 0, 100);
  const std::vector<Interval> want = {{'W', 1, 10, 10}, {'H', 1, 20, 30}, {'W', 2, 30, 25}, {'H', 2, 55, 25}};
  CHECK(got == want);
}

TEST_CASE("exact: threads inside take_gil when the probes came took the GIL at the previous holder's drop") {
  // Thread 1 held at the start; 2 and 3 waited (their returns from take_gil are never seen: a uretprobe
  // only sees calls that entered after it).
  const auto got = decode({{10, 1, kDrop}, {30, 2, kDrop}, {45, 3, kDrop}}, 0, 100);
  const std::vector<Interval> want = {
      {'H', 1, 0, 10}, {'W', 2, 0, 10}, {'W', 3, 0, 30}, {'H', 2, 10, 20}, {'H', 3, 30, 15}};
  CHECK(got == want);
}

TEST_CASE("exact: repeated hits (two events of one thread, lost records) change nothing; finish closes") {
  HandoffDecoder d(0, 8);
  Collect c;
  for (const ProbeHit& h : std::vector<ProbeHit>{{10, 1, kIn},
                                                 {11, 1, kIn},
                                                 {20, 1, kTook},
                                                 {21, 1, kTook},
                                                 {30, 1, kDrop},
                                                 {31, 1, kDrop},
                                                 {40, 1, kIn},
                                                 {45, 1, kTook}}) {
    d.add(h, c);
  }
  d.finish(100, c);
  const std::vector<Interval> want = {{'W', 1, 10, 10}, {'H', 1, 20, 10}, {'W', 1, 40, 5}, {'H', 1, 45, 55}};
  CHECK(c.got == want);
  CHECK(d.takes() == 2);
  CHECK(d.handoffs() == 1);  // the second take was by the same thread
}

TEST_CASE("exact: a simulated GIL's intervals come back exactly, holds never overlap, whatever the churn") {
  // Threads come and go (a thread per request): far more of them than the decoder's table holds at once.
  std::mt19937_64 rng(7);
  std::vector<ProbeHit> hits;
  std::vector<Interval> want;
  int64_t now = 1000;
  int32_t next_tid = 100;
  std::vector<int32_t> waiting;  // in take_gil, oldest first
  for (int round = 0; round < 20000; ++round) {
    // New threads ask for the GIL; the holder takes and drops it.
    const int joins = static_cast<int>(rng() % 3);
    for (int j = 0; j < joins && waiting.size() < 40; ++j) {
      waiting.push_back(next_tid++);
      hits.push_back({now, waiting.back(), kIn});
      now += 1 + static_cast<int64_t>(rng() % 5);
    }
    if (waiting.empty()) continue;
    const size_t pick = rng() % waiting.size();
    const int32_t tid = waiting[pick];
    waiting.erase(waiting.begin() + static_cast<long>(pick));
    const int64_t entered = std::find_if(hits.rbegin(), hits.rend(), [&](const ProbeHit& h) {
                              return h.tid == tid && h.kind == kIn;
                            })->time;
    hits.push_back({now, tid, kTook});
    want.push_back({'W', tid, entered, now - entered});
    const int64_t held = 1 + static_cast<int64_t>(rng() % 50);
    hits.push_back({now + held, tid, kDrop});
    want.push_back({'H', tid, now, held});
    now += held + 1 + static_cast<int64_t>(rng() % 3);
  }
  HandoffDecoder d(0, 64);
  Collect c;
  for (const ProbeHit& h : hits) d.add(h, c);
  const int64_t end = now + 10;
  for (const int32_t tid : waiting) {
    const int64_t entered = std::find_if(hits.rbegin(), hits.rend(), [&](const ProbeHit& h) {
                              return h.tid == tid && h.kind == kIn;
                            })->time;
    want.push_back({'W', tid, entered, end - entered});
  }
  d.finish(end, c);
  std::sort(c.got.begin(), c.got.end());
  std::sort(want.begin(), want.end());
  CHECK(c.got.size() == want.size());
  CHECK(c.got == want);
  CHECK(d.dropped_threads() == 0);
  int64_t last_end = 0;
  for (const Interval& i : c.got) {
    if (i.kind != 'H') continue;
    CHECK(i.ts >= last_end);
    last_end = i.ts + i.dur;
  }
}

TEST_CASE("exact: the online CPU list") {
  using gilspy::sampler::exact::parse_cpu_list;
  CHECK(parse_cpu_list("0-3,6,8-9\n") == std::vector<int>{0, 1, 2, 3, 6, 8, 9});
  CHECK(parse_cpu_list("0") == std::vector<int>{0});
  CHECK(parse_cpu_list("").empty());
  CHECK(parse_cpu_list("x,2").size() == 1);
}

TEST_CASE(
    "exact: take_gil and drop_gil are found in pyenv's interpreters, with their clones but no .cold part") {
  const std::string root = gilspy::testing::pyenv_root();
  for (int minor = 8; minor <= 13; ++minor) {
    const auto found = gilspy::testing::installs_of(root, minor);
    if (found.empty()) {
      MESSAGE("SKIPPED: python 3." << minor << " not found under " << root);
      if (gilspy::testing::ci_strict()) FAIL_CHECK("python 3." << minor << " not found under " << root);
      continue;
    }
    const auto image = gilspy::elf::ElfImage::open(found.back().libpython);
    const auto probes = gilspy::sampler::exact::find_gil_probes(image);
    INFO("python " << found.back().version);
    REQUIRE(probes.problem.empty());
    int takes = 0, returns = 0, drops = 0;
    for (const auto& p : probes.points) {
      CHECK(p.function.find("cold") == std::string::npos);
      CHECK((p.function.starts_with("take_gil") || p.function.starts_with("drop_gil")));
      // The probe is on the function's first instruction: the file holds its bytes there.
      const auto sym = image.functions_where([&](std::string_view s) { return s == p.function; });
      REQUIRE(sym.size() == 1);
      CHECK(image.file_offset_of(sym[0].symbol.value) == p.file_offset);
      takes += p.kind == ProbeKind::kTakeEntry;
      returns += p.kind == ProbeKind::kTakeReturn;
      drops += p.kind == ProbeKind::kDropEntry;
    }
    CHECK(takes >= 1);
    CHECK(returns == takes);
    CHECK(drops >= 1);
  }
}

TEST_CASE("exact: a stripped interpreter is named as such, with no probe points") {
  const std::string debian = "/usr/bin/python3.11";
  if (!std::filesystem::exists(debian)) {
    MESSAGE("SKIPPED: " << debian << " (Debian's stripped interpreter) is not installed");
    return;
  }
  const auto image = gilspy::elf::ElfImage::open(debian);
  if (image.has_symtab()) {
    MESSAGE("SKIPPED: " << debian << " is not stripped on this machine");
    return;
  }
  const auto probes = gilspy::sampler::exact::find_gil_probes(image);
  CHECK(probes.points.empty());
  CHECK(probes.problem.find("stripped") != std::string::npos);
}

}  // namespace unit_exact
