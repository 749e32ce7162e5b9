// The end summary of `gilspy record`: the thread table (busiest first, short-lived threads grouped by name
// pattern, the rest summed), the late-poll figures with their definition and p99, and target text escaped.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/record_summary.hpp"
#include "cli/summary_table.hpp"
#include "raw/summary.hpp"
#include "sampler/schedule/lateness_histogram.hpp"
#include "sampler/target/threads.hpp"

// Named per file, so that the unity build can put test files together.
namespace unit_record_summary {
namespace {

using gilspy::cli::build_summary_table;
using gilspy::cli::name_pattern;
using gilspy::raw::ThreadSummary;

constexpr int64_t kSecond = 1'000'000'000;

ThreadSummary thread(int64_t tid, std::string name, int64_t first, int64_t last, int64_t hold, int64_t wait) {
  ThreadSummary t;
  t.tid = tid;
  t.name = std::move(name);
  t.first_ns = first;
  t.last_ns = last;
  t.hold_ns = hold;
  t.wait_ns = wait;
  t.holds = hold > 0 ? 1 : 0;
  t.longest_hold_ns = hold;
  t.longest_wait_ns = wait;
  return t;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    out.push_back(text.substr(start, nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("summary table: busiest (hold + wait) first, the rest summed on one line") {
  std::vector<ThreadSummary> threads;
  // 30 long-lived threads in discovery order, thread i busy for i ms in all.
  for (int i = 0; i < 30; ++i)
    threads.push_back(
        thread(100 + i, "worker " + std::to_string(i), 0, 10 * kSecond, i * 600'000, i * 400'000));
  const auto table = build_summary_table(threads, 10 * kSecond, 5);
  REQUIRE(table.rows.size() == 5);
  CHECK(table.total_threads == 30);
  for (int k = 0; k < 5; ++k) CHECK(table.rows[static_cast<size_t>(k)].tid == 129 - k);
  CHECK(table.rest_threads == 25);
  int64_t rest_hold = 0, rest_wait = 0;
  for (int i = 0; i < 25; ++i) rest_hold += i * 600'000, rest_wait += i * 400'000;
  CHECK(table.rest_hold_ns == rest_hold);
  CHECK(table.rest_wait_ns == rest_wait);
  CHECK(table.rest_life_ns == 25 * 10 * kSecond);
  CHECK_FALSE(table.grouped);

  // --threads all: every thread, sorted, nothing summed.
  const auto all = build_summary_table(threads, 10 * kSecond, 0);
  CHECK(all.rows.size() == 30);
  CHECK(all.rest_threads == 0);
  CHECK(std::is_sorted(all.rows.begin(), all.rows.end(), [](const auto& a, const auto& b) {
    return a.hold_ns + a.wait_ns > b.hold_ns + b.wait_ns;
  }));
}

TEST_CASE("summary table: threads that neither held nor waited join the rest line, not rows of 0.0 / 0.0") {
  std::vector<ThreadSummary> threads;
  threads.push_back(thread(1, "MainThread", 0, 10 * kSecond, 0, 0));  // joined the workers at once
  threads.push_back(thread(2, "worker", 0, 10 * kSecond, 5 * kSecond, 4 * kSecond));
  threads.push_back(thread(3, "logger", 0, 10 * kSecond, 1'000'000, 0));  // 0.01 %: shows as 0.0 / 0.0
  threads.push_back(thread(4, "short", 0, 8'000'000, 4'000'000, 0));      // 8 ms, half of it held
  const auto table = build_summary_table(threads, 10 * kSecond, 20);
  REQUIRE(table.rows.size() == 2);
  CHECK(table.rows[0].tid == 2);
  CHECK(table.rows[1].tid == 4);
  CHECK(table.rest_threads == 2);
  CHECK(table.rest_hold_ns == 1'000'000);
  // All idle: no row at all, every thread in the rest line; --threads all still lists each.
  const auto none = build_summary_table({threads[0], threads[2]}, 10 * kSecond, 20);
  CHECK(none.rows.empty());
  CHECK(none.rest_threads == 2);
  CHECK(build_summary_table(threads, 10 * kSecond, 0).rows.size() == 4);
}

TEST_CASE("summary table: short-lived threads of one name pattern become one row") {
  std::vector<ThreadSummary> threads;
  threads.push_back(thread(1, "MainThread", 0, 5 * kSecond, 1 * kSecond, 0));
  // A thread per request: 200 threads of 10 ms each, each holding 1 ms and waiting 2 ms.
  for (int i = 0; i < 200; ++i) {
    const int64_t start = int64_t{i} * 20'000'000;
    threads.push_back(thread(1000 + i, "thread " + std::to_string(1000 + i), start, start + 10'000'000,
                             1'000'000 + i, 2'000'000));
  }
  // Two short-lived threads of another pattern: too few to group, they stay rows of their own.
  threads.push_back(thread(50, "thread 50 (loader)", 0, 100'000'000, 5'000'000, 0));
  threads.push_back(thread(51, "thread 51 (loader)", 0, 100'000'000, 4'000'000, 0));
  const auto table = build_summary_table(threads, 5 * kSecond, 20);
  REQUIRE(table.rows.size() == 4);
  CHECK(table.grouped);
  CHECK(table.rows[0].tid == 1);  // MainThread's 1 s before the requests' 200 * 3 ms
  const auto& requests = table.rows[1];
  CHECK(requests.threads == 200);
  CHECK(requests.name == "thread *");
  CHECK(requests.tid == 1199);  // its busiest member
  CHECK(requests.life_ns == 200 * 10'000'000);
  CHECK(requests.hold_share() == doctest::Approx((200 * 1'000'000.0 + 199 * 100) / (200 * 10'000'000.0)));
  CHECK(requests.wait_share() == doctest::Approx(0.2));
  CHECK(requests.holds == 200);
  CHECK(table.rows[2].tid == 50);
  CHECK(table.rows[3].tid == 51);
  CHECK(table.rest_threads == 0);

  // Every row asked for: nothing grouped.
  CHECK(build_summary_table(threads, 5 * kSecond, 0).rows.size() == threads.size());
}

TEST_CASE("summary table: name patterns") {
  CHECK(name_pattern("thread 4711") == "thread *");
  CHECK(name_pattern("thread 4711 (worker-3)") == "thread * (worker-*)");
  CHECK(name_pattern("MainThread") == "MainThread");
  CHECK(name_pattern("") == "");
}

TEST_CASE("lateness histogram: quantiles within a bucket of the truth, no allocation after construction") {
  gilspy::sampler::LatenessHistogram h;
  CHECK(h.quantile_ns(0.99) == 0);
  for (int i = 0; i < 990; ++i) h.add(0);
  for (int i = 0; i < 9; ++i) h.add(50'000);  // 50 us
  h.add(20'000'000);                          // one 20 ms outlier
  CHECK(h.count() == 1000);
  CHECK(h.quantile_ns(0.5) == 0);
  const int64_t p99 = h.quantile_ns(0.99);
  CHECK(p99 == 0);  // 990 of 1000 on time: the 99th percentile is on time
  const int64_t p995 = h.quantile_ns(0.995);
  CHECK(p995 >= 50'000);
  CHECK(p995 <= 50'000 * 1.125);
  const int64_t max = h.quantile_ns(1.0);
  CHECK(max >= 20'000'000);
  CHECK(max <= 20'000'000 * 1.125);
  // Every value lands in a bucket whose bound is at or above it and at most 12.5 % over.
  for (int64_t v : {1LL, 7LL, 8LL, 9LL, 15LL, 16LL, 1000LL, 123'456LL, 99'999'999LL, (1LL << 40) - 1}) {
    const int b = gilspy::sampler::LatenessHistogram::bucket_of(v);
    const int64_t bound = gilspy::sampler::LatenessHistogram::upper_bound_of(b);
    CHECK(bound >= v);
    CHECK(static_cast<double>(bound) <= static_cast<double>(v) * 1.125 + 1);
  }
  CHECK(gilspy::sampler::LatenessHistogram::bucket_of(INT64_MAX) ==
        gilspy::sampler::LatenessHistogram::kBuckets - 1);
}

namespace {

struct Recorded {
  gilspy::raw::SummaryBuilder summary;
  gilspy::raw::LoopFigures loop;
};

// n long-lived threads, thread i holding (i + 1) ms; MainThread idle. 10 s recorded, 1000 polls.
Recorded recording(int n, const std::string& name_of_first = "") {
  Recorded r;
  r.summary.add(gilspy::raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 1, .name = "MainThread"});
  for (int i = 0; i < n; ++i) {
    const int64_t tid = 100 + i;
    const std::string name =
        i == 0 && !name_of_first.empty() ? name_of_first : "thread " + std::to_string(tid);
    r.summary.add(gilspy::raw::ThreadStart{.tid = tid, .ts = 0, .tstate = 2, .name = name});
    r.summary.add(gilspy::raw::Hold{.tid = tid, .ts = 1000, .dur = (i + 1) * int64_t{10'000'000}});
    r.summary.add(gilspy::raw::ThreadEnd{.tid = tid, .ts = 10 * kSecond});
  }
  r.summary.add(gilspy::raw::Stats{
      .ts = 10 * kSecond, .polls = 1000, .late = 0, .missed = 0, .handoffs_seen = 90, .handoffs_total = 100});
  r.summary.set_end(10 * kSecond);
  r.loop.ticks = 1000;
  r.loop.poll_mode = "adaptive";
  r.loop.poller_scheduling = "SCHED_FIFO";
  r.loop.stop_reason = "duration";
  return r;
}

std::string summary_text(const Recorded& r, size_t max_threads = 20) {
  const gilspy::cli::SummaryInput in{.pid = 42,
                                     .rank = 0,
                                     .python_version = "3.11.7",
                                     .raw_path = "./GIL_42_rank_0.json",
                                     .trace_path = "./GIL_42_rank_0.trace.json",
                                     .summary = r.summary,
                                     .loop = r.loop};
  return gilspy::cli::format_target_summary(
      in, {.rate_asked = 10000, .quiet = false, .max_threads = max_threads});
}

}  // namespace

TEST_CASE("record summary: 300 threads fit a screen and name the busiest; --threads all lists every one") {
  const Recorded r = recording(300);
  const std::string text = summary_text(r);
  const auto lines = lines_of(text);
  CHECK(lines.size() <= 40);
  CHECK(contains(text, "thread 399"));  // the busiest
  CHECK(contains(text, "thread 380"));  // the 20th
  CHECK_FALSE(contains(text, "thread 379 "));
  // 279 workers and MainThread. Worker i lives 10 s and holds (i + 1) * 10 ms; MainThread's life is 0.
  double rest_hold = 0;
  for (int i = 0; i < 280; ++i) rest_hold += (i + 1) * 1e7;
  CHECK(contains(
      text, fmt::format("+ 281 more threads: {:.1f} % hold, 0.0 % wait (of their lifetimes taken together)",
                        100 * rest_hold / (280 * 10e9))));
  CHECK(contains(text, "20 rows for 301 threads"));
  // The busiest row comes before the 20th.
  CHECK(text.find("thread 399") < text.find("thread 380"));
  // Each row says the time held, beside the share: thread 399 held 3.00 s (30.0 % of its 10 s), 380 2.81 s.
  CHECK(contains(text, "HELD"));
  const auto row_of = [&](const std::string& name) {
    for (const auto& l : lines) {
      if (contains(l, name + " ")) return l;
    }
    return std::string();
  };
  CHECK(contains(row_of("thread 399"), " 30.0    3.00 s "));
  CHECK(contains(row_of("thread 380"), " 28.1    2.81 s "));

  const std::string all = summary_text(r, 0);
  for (int tid = 100; tid < 400; ++tid) CHECK(contains(all, "thread " + std::to_string(tid)));
  CHECK_FALSE(contains(all, "more threads"));
}

TEST_CASE(
    "record summary: late polls defined, with p99 and max, and advice when the machine cannot keep up") {
  Recorded r = recording(3);
  r.loop.late = 10;
  r.loop.p99_lateness_ns = 84'000;
  r.loop.max_lateness_ns = 2'100'000;
  std::string text = summary_text(r);
  CHECK(contains(text,
                 "late polls: 10 of 1000 wake-ups (1.0 %), late = more than a fifth of a step after the "
                 "deadline\n    lateness p99 84 us, max 2.1 ms; 0 deadlines missed"));
  CHECK_FALSE(contains(text, "did not keep"));
  // Denominators labelled: the GIL's share of the recording, the threads' shares of their lifetimes.
  CHECK(contains(text, "% of the recording (all threads together)"));
  CHECK(contains(text, "shares of each thread's own lifetime"));
  CHECK(contains(text, "makes no hand-off: not counted, not seen"));

  // A loaded machine: most wake-ups late. The late count never exceeds the wake-ups it is a share of, even
  // when the target's own polls are fewer (it exited before the last tick).
  r.loop.late = 700;
  r.loop.ticks = 1001;
  text = summary_text(r);
  CHECK(contains(text, "700 of 1001 wake-ups (69.9 %)"));
  CHECK(contains(text, "did not keep the poll rate"));
  r.loop.poller_scheduling = "normal";
  CHECK(contains(summary_text(r), "CAP_SYS_NICE"));
  r.loop.poll_mode = "fixed";
  r.loop.poller_scheduling = "SCHED_FIFO";
  CHECK(contains(summary_text(r), "lower rate (-r 2500)"));
}

TEST_CASE("record summary: target text reaches the terminal escaped") {
  const Recorded r = recording(2, "thread 100 (\x1b]0;pwned\x07\n\x1b[2J)");
  const std::string text = summary_text(r);
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool printable = (u >= 0x20 || c == '\n') && u != 0x7F;
    CHECK_MESSAGE(printable, "raw control byte " << int(u) << " in " << text);
  }
  CHECK(contains(text, "thread 100 (\\x1B]0;pwned\\x07"));  // then cut to the column's width
}

TEST_CASE(
    "record summary: a stopped process, missing events and a thread cap are said, only when they happen") {
  Recorded r = recording(2);
  std::string text = summary_text(r);
  CHECK_FALSE(contains(text, "stopped (SIGSTOP"));
  CHECK_FALSE(contains(text, "WARNING"));

  r.summary.add(gilspy::raw::ProcessStopped{.ts = kSecond, .dur = kSecond / 2});
  r.summary.add(gilspy::raw::ProcessStopped{.ts = 3 * kSecond, .dur = kSecond});
  r.loop.dropped_events = 7;
  r.loop.threads_truncated = true;
  text = summary_text(r);
  CHECK(contains(text, "stopped (SIGSTOP, a debugger) 2 times for 1.50 s in all"));
  CHECK(contains(text, "WARNING: 7 events are missing from the file"));
  CHECK(contains(text, fmt::format("more threads than gilspy follows ({})",
                                   gilspy::sampler::ThreadWalker::kMaxThreads)));
}

TEST_CASE("record summary: gilspy's own CPU, against --cpu-budget; over it is said, with what to do") {
  Recorded r = recording(2);
  CHECK_FALSE(contains(summary_text(r), "gilspy's CPU"));  // a recovered file: no loop figures
  r.loop.gilspy_cpu_share = 0.012;
  CHECK(contains(summary_text(r), "gilspy's CPU: 1.2 % of a core while recording\n"));  // a fixed rate
  r.loop.cpu_budget = 0.05;
  r.loop.gilspy_cpu_share = 0.0531;  // within a tenth of the budget: its steering, not a miss
  CHECK(contains(summary_text(r), "gilspy's CPU: 5.3 % of a core while recording (--cpu-budget 5 %)\n"));
  r.loop.gilspy_cpu_share = 0.061;
  const std::string over = summary_text(r);
  CHECK(contains(over, "gilspy's CPU: 6.1 % of a core while recording (--cpu-budget 5 %: over it;"));
  CHECK(contains(over, "--no-stacks"));
}

TEST_CASE("record summary: each thread's ±95 from its ends' standard errors; wider than 1 point is said") {
  Recorded r;
  r.summary.add(gilspy::raw::ThreadStart{.tid = 100, .ts = 0, .tstate = 2, .name = "sure"});
  r.summary.add(gilspy::raw::ThreadStart{.tid = 101, .ts = 0, .tstate = 3, .name = "unsure"});
  r.summary.add(gilspy::raw::ThreadStart{.tid = 102, .ts = 0, .tstate = 4, .name = "older file"});
  for (const int64_t tid : {100, 101, 102})
    r.summary.add(gilspy::raw::Hold{.tid = tid, .ts = 0, .dur = kSecond});
  // Over 10 s: se 10 ms -> 1.96 * 0.1 % = ±0.2 points; se 60 ms -> ±1.2 points; none -> not known.
  r.summary.add(gilspy::raw::ThreadEnd{.tid = 100, .ts = 10 * kSecond, .state_se_ns = 10'000'000});
  r.summary.add(gilspy::raw::ThreadEnd{.tid = 101, .ts = 10 * kSecond, .state_se_ns = 60'000'000});
  r.summary.add(gilspy::raw::ThreadEnd{.tid = 102, .ts = 10 * kSecond});
  r.summary.set_end(10 * kSecond);
  const std::string text = summary_text(r);
  const auto row = [&](const std::string& name) {
    for (const auto& l : lines_of(text)) {
      if (contains(l, name)) return l;
    }
    return std::string();
  };
  CHECK(contains(row("sure"), " 0.2 "));
  CHECK(contains(row("unsure"), " 1.2 "));
  CHECK(contains(row("older file"), " ? "));
  CHECK(contains(text,
                 "note: the shares of thread 101 are only known to ±1.2 points (over 1): record longer or "
                 "raise the rate (-r)"));
  // The raw file's summary says the same: 1.96 * 60 ms / 10 s, and null where not known.
  const auto json = r.summary.to_json(10000, r.loop);
  for (const auto& t : json.at("threads")) {
    const int64_t tid = t.at("tid").get<int64_t>();
    if (tid == 101) CHECK(t.at("hold_share_ci95").get<double>() == doctest::Approx(1.96 * 0.006));
    if (tid == 101) CHECK(t.at("wait_share_ci95").get<double>() == doctest::Approx(1.96 * 0.006));
    if (tid == 102) CHECK(t.at("hold_share_ci95").is_null());
  }
}

TEST_CASE("record summary: threads that end past the first 5 000 are folded by name pattern, nothing lost") {
  // A server starting a thread per request (20 000 here, 10 us of hold each), beside one busy thread; then a
  // target forging thread states under ever new names (every one its own pattern).
  using gilspy::raw::SummaryBuilder;
  Recorded r;
  r.summary.add(gilspy::raw::ThreadStart{.tid = 1, .ts = 0, .tstate = 1, .name = "MainThread"});
  r.summary.add(gilspy::raw::Hold{.tid = 1, .ts = 0, .dur = 5 * kSecond});
  constexpr int kRequests = 20'000;
  for (int i = 0; i < kRequests; ++i) {
    const int64_t tid = 100 + i, ts = 5 * kSecond + i * 100'000;
    r.summary.add(
        gilspy::raw::ThreadStart{.tid = tid, .ts = ts, .tstate = 2, .name = fmt::format("req-{}", i)});
    r.summary.add(gilspy::raw::Hold{.tid = tid, .ts = ts + 10'000, .dur = 10'000});
    r.summary.add(gilspy::raw::Wait{.tid = tid, .ts = ts + 20'000, .dur = 30'000});
    r.summary.add(gilspy::raw::ThreadEnd{.tid = tid, .ts = ts + 60'000});
  }
  r.summary.set_end(10 * kSecond);
  CHECK(r.summary.threads().size() == SummaryBuilder::kKeptThreads);  // main and 4 999 requests
  CHECK(r.summary.folded_threads() == kRequests + 1 - SummaryBuilder::kKeptThreads);
  REQUIRE(r.summary.folded().size() == 1);
  const auto& f = r.summary.folded().begin()->second;
  CHECK(f.pattern == "req-*");
  CHECK(f.threads == r.summary.folded_threads());
  CHECK(f.life_ns == static_cast<int64_t>(f.threads) * 60'000);
  CHECK(r.summary.wait_ns() == int64_t{kRequests} * 30'000);  // kept and folded together
  const auto j = r.summary.to_json(10000, r.loop);
  CHECK(j["folded_threads"].size() == 1);
  CHECK(j["folded_threads"][0]["hold_ns"] == static_cast<int64_t>(f.threads) * 10'000);
  // The table: one row for all 20 000 (the kept ones grouped, the folded ones joined), and the fold said.
  const auto table =
      gilspy::cli::build_summary_table(r.summary.threads(), r.summary.duration_ns(), 20, r.summary.folded());
  CHECK(table.total_threads == kRequests + 1);
  REQUIRE(table.rows.size() == 2);
  CHECK(table.rows[1].name == "req-*");
  CHECK(table.rows[1].threads == kRequests);
  CHECK(table.rows[1].hold_ns == int64_t{kRequests} * 10'000);
  CHECK(contains(summary_text(r),
                 fmt::format("({} threads that ended after the first 5000 seen are kept only in "
                             "groups by name pattern",
                             r.summary.folded_threads())));

  // Every name its own pattern: past kMaxPatterns they share "*".
  Recorded forged;
  for (int i = 0; i < 8'000; ++i) {
    std::string name = "t";
    for (int k = i; k > 0; k /= 26) name += static_cast<char>('a' + k % 26);
    forged.summary.add(gilspy::raw::ThreadStart{.tid = i + 1, .ts = i, .tstate = 2, .name = name});
    forged.summary.add(gilspy::raw::ThreadEnd{.tid = i + 1, .ts = i + 1});
  }
  CHECK(forged.summary.threads().size() == SummaryBuilder::kKeptThreads);
  CHECK(forged.summary.folded().size() <= SummaryBuilder::kMaxPatterns + 1);
  CHECK(forged.summary.folded().contains("*"));
  uint64_t folded = 0;
  for (const auto& [pattern, g] : forged.summary.folded()) folded += g.threads;
  CHECK(folded == 8'000 - SummaryBuilder::kKeptThreads);
}

TEST_CASE("record summary: a child recorded for part of the session has its figures over its own span") {
  // Found 2 s into a 10 s session, gone at 6 s, its one thread holding the GIL throughout; the loop polled
  // 1 000 times in the session (300 of them budget-limited), 400 of them this process.
  Recorded r;
  r.summary.add(gilspy::raw::ThreadStart{.tid = 7, .ts = 2 * kSecond, .tstate = 1, .name = "MainThread"});
  r.summary.add(gilspy::raw::Hold{.tid = 7, .ts = 2 * kSecond, .dur = 4 * kSecond});
  r.summary.add(gilspy::raw::ThreadEnd{.tid = 7, .ts = 6 * kSecond});
  r.summary.add(gilspy::raw::Stats{
      .ts = 6 * kSecond, .polls = 400, .late = 0, .missed = 0, .handoffs_seen = 0, .handoffs_total = 0});
  r.summary.set_span(2 * kSecond, 6 * kSecond);
  r.loop.ticks = 1000;
  r.loop.budget_limited = 300;
  r.loop.poll_mode = "adaptive";
  r.loop.poller_scheduling = "SCHED_FIFO";
  r.loop.stop_reason = "target exited";
  CHECK(r.summary.duration_ns() == 4 * kSecond);
  CHECK(r.summary.gil_busy_share() == doctest::Approx(1.0));
  const std::string text = summary_text(r);
  CHECK(contains(text, "for 4.00 s"));
  CHECK(contains(text, "GIL held 100.0 %"));
  CHECK(contains(text, "100 Hz on average"));
  CHECK(contains(text, "the CPU budget slowed 30 %"));  // of the loop's 1 000 polls, not this process's 400
  const auto json = r.summary.to_json(10000, r.loop);
  CHECK(json["duration_ns"] == 4 * kSecond);
  CHECK(json["start_ns"] == 2 * kSecond);
}

}  // namespace unit_record_summary
