// gilspy check's report: the sampler's shares against the probes' totals over the same thread lives.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli/check_report.hpp"
#include "raw/records.hpp"
#include "raw/summary.hpp"

namespace unit_check_report {

constexpr int64_t kSecond = 1'000'000'000;

// Two threads over 10 s: 100 held 40 % and waited 50 % by the polls (±1 pp); 101 held 20 %, waited 70 %
// (±0.2 pp).
gilspy::raw::SummaryBuilder sampled() {
  gilspy::raw::SummaryBuilder s;
  s.add(gilspy::raw::ThreadStart{.tid = 100, .ts = 0, .tstate = 1, .name = "cpu", .ns_tid = 0});
  s.add(gilspy::raw::ThreadStart{.tid = 101, .ts = 0, .tstate = 2, .name = "io", .ns_tid = 0});
  s.add(gilspy::raw::Hold{.tid = 100, .ts = 0, .dur = 4 * kSecond});
  s.add(gilspy::raw::Wait{.tid = 100, .ts = 4 * kSecond, .dur = 5 * kSecond});
  s.add(gilspy::raw::Hold{.tid = 101, .ts = 4 * kSecond, .dur = 2 * kSecond});
  s.add(gilspy::raw::Wait{.tid = 101, .ts = 0, .dur = 4 * kSecond});
  s.add(gilspy::raw::Wait{.tid = 101, .ts = 6 * kSecond, .dur = 3 * kSecond});
  // ±95 = 1.96 x se / life: se 51 ms -> ±1.0 pp; se 10.2 ms -> ±0.2 pp
  s.add(gilspy::raw::ThreadEnd{.tid = 100, .ts = 10 * kSecond, .state_se_ns = 51'020'408});
  s.add(gilspy::raw::ThreadEnd{.tid = 101, .ts = 10 * kSecond, .state_se_ns = 10'204'082});
  s.set_span(0, 10 * kSecond);
  return s;
}

TEST_CASE("check: per thread both ways, the difference, and whether the sampler's interval held") {
  const auto s = sampled();
  // The probes: 100 held 40.5 % (inside ±1), waited 49.6 %; 101 held 21 % (outside ±0.2); 102 never polled.
  const std::vector<gilspy::cli::ExactThreadTotal> exact = {
      {100, 4'050'000'000, 4'960'000'000}, {101, 2'100'000'000, 6'900'000'000}, {102, 500'000'000, 0}};
  const auto rows = gilspy::cli::check_rows(s, exact);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].tid == 100);  // busiest by the probes' hold + wait first
  CHECK(rows[0].hold_diff_pp() == doctest::Approx(-0.5));
  CHECK(rows[0].wait_diff_pp() == doctest::Approx(0.4));
  CHECK(rows[0].ci95 == doctest::Approx(0.01).epsilon(0.01));
  CHECK(rows[0].held());
  CHECK(rows[1].tid == 101);
  CHECK(rows[1].hold_diff_pp() == doctest::Approx(-1.0));
  CHECK_FALSE(rows[1].held());
  CHECK(rows[2].tid == 102);
  CHECK_FALSE(rows[2].seen_by_sampler);
  CHECK_FALSE(rows[2].judged());
  CHECK(rows[2].exact_hold == doctest::Approx(0.05));  // of the recording: its life is not known

  const std::string text =
      gilspy::cli::format_check({.pid = 42, .python_version = "3.11.7", .seconds = 10}, rows, 0);
  CHECK(text.find("held for 1 of 2 threads") != std::string::npos);
  CHECK(text.find("worst difference: hold -1.00 pp (thread 101)") != std::string::npos);
  CHECK(text.find("1 thread held or waited for the GIL without the sampler seeing it") != std::string::npos);
  const auto json = gilspy::cli::check_json({.pid = 42, .python_version = "3.11.7", .seconds = 10}, rows);
  CHECK(json["intervals_held"] == 1);
  CHECK(json["threads_judged"] == 2);
  CHECK(json["threads"][1]["interval_held"] == false);
  CHECK(json["threads"][2]["interval_held"].is_null());
}

}  // namespace unit_check_report

namespace unit_check_report_cpu {

TEST_CASE("check: the cost measured in the target, or why it was not") {
  const std::vector<gilspy::cli::CheckRow> rows;
  gilspy::raw::LoopFigures figures;
  gilspy::cli::CheckHeader h{.pid = 42, .python_version = "3.11.7", .seconds = 10, .figures = &figures};
  CHECK(gilspy::cli::format_check(h, rows, 0).find("not measured (a launched program") != std::string::npos);
  h.cpu = gilspy::cli::CheckCpu{.untraced_s = 1,
                                .window_s = 10,
                                .threads = 6,
                                .tick_s = 0.01,
                                .untraced_user_cpus = 1.0,
                                .untraced_system_cpus = 0.02,
                                .window_user_cpus = 0.8,
                                .window_system_cpus = 0.25};
  const std::string text = gilspy::cli::format_check(h, rows, 0);
  CHECK(text.find("user-mode work (its progress) -20.0 % ±1.6, kernel time +23.0 % of a core") !=
        std::string::npos);
  const auto json = gilspy::cli::check_json(h, rows);
  CHECK(json["cost"]["measured"]["progress_change"].get<double>() == doctest::Approx(-0.2));
}

}  // namespace unit_check_report_cpu
