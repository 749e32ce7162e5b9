// gilspy top, window aggregation on long random streams, checked against the truth computed here from the
// timeline itself: a thread cycles released -> waiting -> holding with random lengths (some far longer than a
// window); completed intervals arrive when they end, open states with every stats tick.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "cli/top/top_model.hpp"

namespace top = gilspy::top;

// Named per file, so that the unity build can put test files together.
namespace unit_top_model_stream {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr uint32_t kId = 1;
constexpr int64_t kTid = 10;

struct Interval {
  top::Role role;
  int64_t start, end;
};

std::vector<Interval> timeline(std::mt19937& rng, int64_t until) {
  std::vector<Interval> out;
  const top::Role cycle[] = {top::Role::kReleased, top::Role::kWaiting, top::Role::kHolding};
  int64_t t = 0;
  for (int k = 0; t < until; ++k) {
    // Mostly short, sometimes several windows long.
    const int64_t len = (rng() % 10 == 0 ? 1 + rng() % 4000 : 1 + rng() % 300) * kMs;
    out.push_back({cycle[k % 3], t, t + len});
    t += len;
  }
  return out;
}

int64_t overlap(const Interval& i, int64_t a, int64_t b) {
  return std::max<int64_t>(0, std::min(i.end, b) - std::max(i.start, a));
}

// Feeds the model everything that happens in (from, to], in time order: completions first, then the tick.
void feed(top::TopModel& m, const std::vector<Interval>& tl, int64_t from, int64_t to, bool tick_at_to) {
  for (const Interval& i : tl) {
    if (i.end > from && i.end <= to && i.role != top::Role::kReleased) {
      if (i.role == top::Role::kHolding)
        m.hold(kId, kTid, i.start, i.end - i.start);
      else
        m.wait(kId, kTid, i.start, i.end - i.start);
    }
  }
  if (!tick_at_to) return;
  for (const Interval& i : tl) {
    if (i.start <= to && to < i.end) m.open_state(kId, kTid, i.role, i.start, to);
  }
}

}  // namespace

TEST_CASE("top model stream: stats tick at each snapshot -> every window exact, totals exact") {
  for (unsigned seed = 1; seed <= 30; ++seed) {
    std::mt19937 rng(seed);
    const int64_t horizon = 20'000 * kMs;
    const auto tl = timeline(rng, horizon);
    top::TopModel m(0);
    m.add_process({kId, 1, "x", "3.12", 0, 0});
    m.thread_started(kId, kTid, "t", 0);
    int64_t prev = 0;
    int64_t window_hold_sum = 0;
    for (int64_t now = 1000 * kMs; now <= horizon; now += 1000 * kMs) {
      feed(m, tl, prev, now, true);
      const auto s = m.snapshot(now);
      const auto& f = s.processes[0].threads[0].interval;
      int64_t hold = 0, wait = 0;
      uint64_t holds = 0;
      for (const Interval& i : tl) {
        if (i.role == top::Role::kHolding) hold += overlap(i, prev, now);
        if (i.role == top::Role::kWaiting) wait += overlap(i, prev, now);
        holds += i.role == top::Role::kHolding && i.end > prev && i.end <= now;
      }
      INFO("seed " << seed << " window ending " << now / kMs << " ms");
      REQUIRE(f.lifetime_ns == now - prev);
      CHECK(f.hold_share * 1e9 == doctest::Approx(static_cast<double>(hold)).epsilon(1e-9));
      CHECK(f.wait_share * 1e9 == doctest::Approx(static_cast<double>(wait)).epsilon(1e-9));
      CHECK(f.holds == holds);
      window_hold_sum += static_cast<int64_t>(std::llround(f.hold_share * 1e9));
      prev = now;
    }
    // The totals equal the sum of all holds up to the horizon; so does the sum of the windows.
    const auto s = m.snapshot(horizon);
    int64_t truth = 0;
    for (const Interval& i : tl) {
      if (i.role == top::Role::kHolding) truth += overlap(i, 0, horizon);
    }
    const double total_hold = s.processes[0].threads[0].total.hold_share * static_cast<double>(horizon);
    CHECK(total_hold == doctest::Approx(static_cast<double>(truth)).epsilon(1e-9));
    CHECK(window_hold_sum == doctest::Approx(static_cast<double>(truth)).epsilon(1e-6));
  }
}

TEST_CASE("top model stream: ticks and snapshots out of step -> no window over-counts, totals exact") {
  for (unsigned seed = 100; seed <= 130; ++seed) {
    std::mt19937 rng(seed);
    const int64_t horizon = 20'000 * kMs;
    const auto tl = timeline(rng, horizon + 5000 * kMs);
    const int64_t end = tl.back().end;  // run until every interval has completed
    top::TopModel m(0);
    m.add_process({kId, 1, "x", "3.12", 0, 0});
    m.thread_started(kId, kTid, "t", 0);
    // Ticks every 1000 ms from 370 ms; snapshots at random moments 200..1500 ms apart.
    std::vector<int64_t> times;
    for (int64_t t = 370 * kMs; t < end; t += 1000 * kMs) times.push_back(t);
    std::vector<int64_t> snaps;
    for (int64_t t = (200 + rng() % 1300) * kMs; t < end; t += (200 + rng() % 1300) * kMs) snaps.push_back(t);
    snaps.push_back(end);
    int64_t fed = 0, prev = 0;
    double hold_sum = 0;
    std::size_t tick = 0;
    for (const int64_t now : snaps) {
      for (; tick < times.size() && times[tick] <= now; ++tick) {
        feed(m, tl, fed, times[tick], true);
        fed = times[tick];
      }
      feed(m, tl, fed, now, false);
      fed = now;
      const auto s = m.snapshot(now);
      const auto& f = s.processes[0].threads[0].interval;
      int64_t hold = 0;
      for (const Interval& i : tl) {
        if (i.role == top::Role::kHolding) hold += overlap(i, prev, now);
      }
      INFO("seed " << seed << " window " << prev / kMs << ".." << now / kMs << " ms");
      CHECK(f.hold_share * static_cast<double>(now - prev) <= static_cast<double>(hold) + 1000);
      CHECK(f.hold_share + f.wait_share <= 1.0 + 1e-12);
      hold_sum += f.hold_share * static_cast<double>(now - prev);
      prev = now;
    }
    int64_t truth = 0;
    for (const Interval& i : tl) {
      if (i.role == top::Role::kHolding) truth += i.end - i.start;
    }
    const auto s = m.snapshot(end);
    CHECK(s.processes[0].threads[0].total.hold_share * static_cast<double>(end) ==
          doctest::Approx(static_cast<double>(truth)).epsilon(1e-9));
    CHECK(hold_sum <= static_cast<double>(truth) + 1e4);
  }
}

}  // namespace unit_top_model_stream
