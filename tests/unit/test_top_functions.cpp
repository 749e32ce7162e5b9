// gilspy top's function view (key f, --functions): time by Python function, own and total, per GIL role, per
// window and in total; the open holds and stretches credited at each tick and not again; the table sorted,
// cut to the screen and escaped; the key; the JSON.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/terminal_text.hpp"
#include "cli/top/function_account.hpp"
#include "cli/top/function_table.hpp"
#include "cli/top/keys.hpp"
#include "cli/top/top_model.hpp"
#include "cli/top/top_render.hpp"
#include "raw/stack_summary.hpp"

namespace top = gilspy::top;
namespace raw = gilspy::raw;

// Named per file, so that the unity build can put test files together.
namespace unit_top_functions {
namespace {

constexpr int64_t kMs = 1'000'000;

const top::FunctionRow* row(const top::TopSnapshot& s, const std::string& function) {
  for (const auto& r : s.functions) {
    if (r.function == function) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("top functions: own time to the innermost, total once per function, per window and in total") {
  top::TopModel m(0);
  m.function_time(top::Role::kHolding, {"hog (w.py:3)", "run (w.py:1)"}, 30 * kMs);
  // A recursion counts once in total.
  m.function_time(top::Role::kHolding, {"fib (w.py:9)", "fib (w.py:9)", "fib (w.py:9)", "run (w.py:1)"},
                  10 * kMs);
  m.function_time(top::Role::kWaiting, {"sleeper (w.py:20)", "run (w.py:1)"}, 5 * kMs);
  m.function_time(top::Role::kReleased, {"recv (w.py:30)"}, 50 * kMs);
  const top::TopSnapshot a = m.snapshot(100 * kMs);
  const auto* run = row(a, "run (w.py:1)");
  REQUIRE(run != nullptr);
  CHECK(run->interval.own(top::Role::kHolding) == 0);
  CHECK(run->interval.total(top::Role::kHolding) == 40 * kMs);
  CHECK(run->interval.total(top::Role::kWaiting) == 5 * kMs);
  const auto* fib = row(a, "fib (w.py:9)");
  REQUIRE(fib != nullptr);
  CHECK(fib->interval.own(top::Role::kHolding) == 10 * kMs);
  CHECK(fib->interval.total(top::Role::kHolding) == 10 * kMs);
  // The next window starts empty; the totals go on.
  m.function_time(top::Role::kHolding, {"hog (w.py:3)", "run (w.py:1)"}, 20 * kMs);
  const top::TopSnapshot b = m.snapshot(200 * kMs);
  const auto* hog = row(b, "hog (w.py:3)");
  REQUIRE(hog != nullptr);
  CHECK(hog->interval.own(top::Role::kHolding) == 20 * kMs);
  CHECK(hog->total.own(top::Role::kHolding) == 50 * kMs);
  CHECK(row(b, "fib (w.py:9)")->interval.own(top::Role::kHolding) == 0);
  // Sorted by own hold; by own wait; functions with nothing in a column shown are left out.
  const auto by_hold = top::sorted_functions(b, top::SortKey::kHold, true);
  REQUIRE(by_hold.size() == 5);
  CHECK(by_hold[0]->function == "hog (w.py:3)");
  CHECK(by_hold[1]->function == "fib (w.py:9)");
  CHECK(top::sorted_functions(b, top::SortKey::kWait, true)[0]->function == "sleeper (w.py:20)");
  CHECK(top::sorted_functions(b, top::SortKey::kHold, false).size() == 2);  // the window: hog, run
  m.reset(300 * kMs);
  CHECK(m.snapshot(400 * kMs).functions.empty());
}

TEST_CASE("top functions: past kMaxFunctions, the rest adds up under [other functions]") {
  top::FunctionAccount a;
  for (size_t i = 0; i < top::kMaxFunctions + 10; ++i)
    a.add(top::Role::kHolding, {"f" + std::to_string(i)}, 1);
  const auto rows = a.close_window();
  CHECK(rows.size() == top::kMaxFunctions + 1);
  int64_t other = 0;
  for (const auto& r : rows) {
    if (r.function == top::kOtherFunctions) other = r.interval.own(top::Role::kHolding);
  }
  CHECK(other == 10);
}

TEST_CASE("top functions: open holds and stretches are pieces so far, and stay open") {
  std::vector<std::vector<raw::StackPiece>> got;
  raw::StackPieces pieces([&](const std::vector<raw::StackPiece>& p) { got.push_back(p); });
  pieces.add(raw::StackSample{
      .tid = 1, .ts = 2 * kMs, .since = 1 * kMs, .role = raw::GilRole::kHolding, .stack = 1});
  pieces.add(raw::StackSample{
      .tid = 1, .ts = 6 * kMs, .since = 1 * kMs, .role = raw::GilRole::kHolding, .stack = 2});
  pieces.add(
      raw::StackSample{.tid = 2, .ts = 3 * kMs, .since = 0, .role = raw::GilRole::kReleased, .stack = 3});
  std::vector<raw::StackPiece> open;
  pieces.open_intervals(
      10 * kMs, [&](const std::vector<raw::StackPiece>& p) { open.insert(open.end(), p.begin(), p.end()); });
  REQUIRE(open.size() == 3);
  std::sort(open.begin(), open.end(), [](const auto& a, const auto& b) { return a.stack < b.stack; });
  CHECK((open[0].from == 1 * kMs && open[0].to == 6 * kMs && open[0].role == raw::GilRole::kHolding));
  CHECK((open[1].from == 6 * kMs && open[1].to == 10 * kMs));
  CHECK((open[2].from == 0 && open[2].to == 10 * kMs && open[2].role == raw::GilRole::kReleased));
  CHECK(got.empty());  // nothing closed
  pieces.add(raw::Hold{.tid = 1, .ts = 1 * kMs, .dur = 11 * kMs});
  REQUIRE(got.size() == 1);
  CHECK(got[0].back().to == 12 * kMs);
  open.clear();
  pieces.open_intervals(
      20 * kMs, [&](const std::vector<raw::StackPiece>& p) { open.insert(open.end(), p.begin(), p.end()); });
  REQUIRE(open.size() == 1);  // the closed hold is gone; the stretch goes on
  CHECK(open[0].tid == 2);
}

TEST_CASE("top functions: the screen fits, names escaped, key f toggles, the JSON lists them") {
  top::TopSnapshot s;
  s.now_ns = 1000 * kMs;
  s.interval_start_ns = 0;
  for (int i = 0; i < 40; ++i) {
    top::FunctionRow r;
    r.function = "f" + std::to_string(i) + " (w.py:" + std::to_string(i) + ")";
    r.interval.own_ns[0] = (40 - i) * kMs;
    r.interval.total_ns[0] = (40 - i) * kMs;
    r.total = r.interval;
    s.functions.push_back(r);
  }
  top::FunctionRow evil;
  evil.function = "bad\x1b[2Jname (w.py:1)";
  evil.interval.own_ns[0] = 100 * kMs;
  s.functions.push_back(evil);
  top::RenderOptions o;
  CHECK(top::apply_view_key(top::decode_keys("f").at(0), o));
  CHECK(o.functions);
  for (const auto& [w, h] : {std::pair{80, 24}, std::pair{40, 10}, std::pair{200, 60}, std::pair{20, 5}}) {
    o.width = w;
    o.height = h;
    const auto lines = top::render_screen(s, o);
    CAPTURE(w);
    CAPTURE(h);
    CHECK(lines.size() <= static_cast<size_t>(h));
    for (const auto& l : lines) {
      CHECK(gilspy::display_width(l) <= static_cast<size_t>(w));
      CHECK(l.find('\x1b') == std::string::npos);
    }
  }
  o.width = 100;
  o.height = 12;
  const auto lines = top::render_screen(s, o);
  CHECK(lines[2].find("OWN HOLD") != std::string::npos);
  CHECK(lines[3].find("bad") != std::string::npos);     // the longest own hold first, escaped
  CHECK(lines[3].find(" 10.0 ") != std::string::npos);  // HOLD%: 100 ms of 1 s
  CHECK(lines[lines.size() - 2].find("more functions") != std::string::npos);
  const auto j = nlohmann::json::parse(top::render_json(s));
  REQUIRE(j["functions"].size() == 41);
  CHECK(j["functions"][0]["own_hold_s"] == doctest::Approx(0.1));
  const std::string batch = top::render_batch(s, top::SortKey::kHold, false, false, true);
  CHECK(batch.find("f39 (w.py:39)") != std::string::npos);  // every function, none cut
  CHECK(top::render_batch(s).find("OWN HOLD") == std::string::npos);
}

}  // namespace unit_top_functions
