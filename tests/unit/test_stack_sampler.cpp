// Reading Python objects, stacks and thread names out of fake memory laid out as each version's StackLayout
// says (tests/support/fake_python.hpp): strings of every kind, ints, dicts and instance attributes per
// version, a stack walk with a shim frame and a line table, a torn read dropped and read again, a deep stack
// cut and marked, threading._active's names, and the records the stack sampler emits.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <variant>
#include <vector>

#include "base/clock.hpp"
#include "cpython_layouts/layout.hpp"
#include "cpython_layouts/stack_layout.hpp"
#include "sampler/stacks/remote_objects.hpp"
#include "sampler/stacks/stack_sampler.hpp"
#include "sampler/stacks/stack_walker.hpp"
#include "support/fake_python.hpp"
#include "support/fake_session.hpp"

using namespace gilspy;
using gilspy::testing::FakePython;
using gilspy::testing::FakeSession;
using gilspy::testing::location_table;

// Named per file, so that the unity build can put test files together.
namespace unit_stack_sampler {
namespace {

layouts::StackLayout table(int minor) {
  return *layouts::stack_layout_table(minor);
}

std::string text(sampler::RemoteObjects& o, uint64_t obj, size_t cap = 256, bool* cut = nullptr) {
  std::vector<char> buf(cap);
  const auto n = o.read_str(obj, {buf.data(), buf.size()}, cut);
  return n ? std::string(buf.data(), *n) : std::string("<none>");
}

}  // namespace

TEST_CASE("remote objects: str of every kind, cut at a character, invalid text refused") {
  for (const int minor : {8, 11, 12, 13}) {
    CAPTURE(minor);
    FakePython py(table(minor));
    sampler::RemoteObjects o(py.mem, py.l);
    CHECK(text(o, py.str("hog")) == "hog");
    CHECK(text(o, py.str(U"caf\u00e9")) == "caf\xc3\xa9");  // Latin-1, one byte a character
    CHECK(text(o, py.str(U"\u20ac100")) ==
          "\xe2\x82\xac"
          "100");                                                             // UCS-2
    CHECK(text(o, py.str(U"a\U0001F600")) == "a\xf0\x9f\x98\x80");            // UCS-4
    CHECK(text(o, py.str(std::u32string(1, char32_t(0xD800)))) == "<none>");  // a lone surrogate: not UTF-8
    bool cut = false;
    CHECK(text(o, py.str(U"\u20ac\u20ac\u20ac"), 7, &cut) == "\xe2\x82\xac\xe2\x82\xac");
    CHECK(cut);
    CHECK(text(o, py.bytes({1, 2, 3})) == "<none>");  // not a str
    CHECK(text(o, 0) == "<none>");
    CHECK(o.kind_of(py.str("x")) == sampler::PyKind::kStr);
    CHECK(o.kind_of(py.dict({})) == sampler::PyKind::kDict);
    // A heap type called "str" is not str.
    const uint64_t fake = py.alloc(64);
    py.put(fake, py.l.object.ob_type, py.type("str", (uint64_t{1} << 28) | FakePython::kHeapType));
    CHECK(o.kind_of(fake) == sampler::PyKind::kOther);
    CHECK(o.bytes_read() > 0);
  }
}

TEST_CASE("remote objects: ints, dicts and instance attributes as each version stores them") {
  for (const int minor : {8, 9, 10, 11, 12, 13}) {
    CAPTURE(minor);
    FakePython py(table(minor));
    sampler::RemoteObjects o(py.mem, py.l);
    CHECK(o.read_uint(py.integer(0)) == 0u);
    CHECK(o.read_uint(py.integer(7)) == 7u);
    CHECK(o.read_uint(py.integer(0x7f12345678d0ULL)) == 0x7f12345678d0ULL);  // a pthread_t: two digits
    CHECK_FALSE(o.read_uint(py.str("7")).has_value());
    // sys.modules-like: str keys; the one looked for is among others.
    const uint64_t threading = py.module(py.dict({}));
    const uint64_t modules = py.dict({{py.str("sys"), 1},
                                      {py.str("threadinG"), 2},
                                      {py.str("threading"), threading},
                                      {py.str("thread"), 3}});
    REQUIRE(o.read_dict(modules));
    CHECK(o.item_count() == 4);
    CHECK(o.find_str_key("threading") == threading);
    CHECK(o.find_str_key("nothere") == 0);
    // A dict with int keys (threading._active), general keys (with hashes) on every version.
    const uint64_t active = py.dict({{py.integer(111), 0x5000}, {py.integer(222), 0x6000}}, false);
    REQUIRE(o.read_dict(active));
    REQUIRE(o.item_count() == 2);
    CHECK(o.read_uint(o.item_key(1)) == 222u);
    CHECK(o.item_value(1) == 0x6000u);
    // A Thread's _name, wherever this version keeps instance attributes.
    const uint64_t name = py.str("pt_data_worker_0");
    const uint64_t thread = py.instance({{"_target", 1}, {"_name", name}, {"_ident", 2}});
    CHECK(o.attribute(thread, "_name") == name);
    CHECK(o.attribute(thread, "_missing") == 0);
  }
}

TEST_CASE("stack walker: frames innermost first, shims skipped, lines from the table, depth cut") {
  for (const int minor : {8, 10, 11, 12, 13}) {
    CAPTURE(minor);
    FakePython py(table(minor));
    sampler::RemoteObjects o(py.mem, py.l);
    sampler::StackTables tables;
    sampler::CodeCache codes(o, tables);
    // Code with first line 10 and instructions on lines 11, 13, 13, 20.
    std::vector<uint8_t> t;
    if (py.l.code.line_table == layouts::LineTableKind::kLocationTable) {
      t = location_table(10, {11, 13, 13, 20});
    } else if (py.l.code.line_table == layouts::LineTableKind::kLinetable310) {
      t = {2, 1, 4, 2, 2, 7};  // bytes [0,2): +1, [2,6): +2, [6,8): +7
    } else {
      t = {0, 1, 2, 2, 4, 7};  // lnotab: from byte 0 line +1, from 2 +2, from 6 +7
    }
    const uint64_t inner = py.code(minor >= 11 ? "Box.method" : "method", "/src/box.py", 10, t, 4);
    const std::vector<uint8_t> outer_table = minor >= 11 ? location_table(1, {2, 3})
                                             : minor == 10
                                                 ? std::vector<uint8_t>{4, 1}   // 4 bytes: line 2
                                                 : std::vector<uint8_t>{0, 1};  // from byte 0: line 2
    const uint64_t outer = py.code("main", "/src/main.py", 1, outer_table, 2);
    const uint64_t f_outer = py.frame(outer, py.instr(outer, 0), 0);
    const uint64_t shim = py.frame(0, 0, f_outer, 3);  // a C-stack shim on 3.12+ (owner 3): skipped
    const uint64_t f_inner = py.frame(inner, py.instr(inner, 3), minor >= 12 ? shim : f_outer);
    const uint64_t ts = py.tstate(f_inner);
    sampler::StackWalker walker(o, codes, 64);
    sampler::WalkOutput w;
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    REQUIRE(w.depth == 2);
    CHECK_FALSE(w.truncated);
    CHECK(w.first_frame == f_inner);
    const auto f = walker.frames();
    CHECK(tables.string(f[0].qualname) == (minor >= 11 ? "Box.method" : "method"));
    CHECK(tables.string(f[0].file) == "/src/box.py");
    CHECK(f[0].first_line == 10);
    CHECK(f[0].line == 20);
    CHECK(tables.string(f[1].qualname) == "main");
    CHECK(f[1].line == 2);
    // The same code again: from the cache, checked in one read.
    const uint64_t resolved = codes.resolved();
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    CHECK(codes.resolved() == resolved);
    // The code object freed and another put at its address: its pointers differ, it is resolved again.
    py.put(inner, py.l.code.filename, py.str("/src/other.py"));
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    CHECK(codes.resolved() == resolved + 1);
    CHECK(tables.string(walker.frames()[0].file) == "/src/other.py");
    // An instruction outside its code: not a stack (a torn read).
    py.put<uint64_t>(f_inner + py.l.frame.instr, static_cast<uint64_t>(py.instr(inner, 50)));
    CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kInvalid);
    // 3.11+: an instruction pointer read torn at the top half of the address space (its distance from the
    // code's start overflows a signed difference: UBSan stops the ASan/UBSan build there).
    if (minor >= 11) {
      py.put<uint64_t>(f_inner + py.l.frame.instr, uint64_t{1} << 63);
      CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kInvalid);
    }
    // A frame whose code is not a code object.
    py.put(f_inner, py.l.frame.code, py.str("not code"));
    CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kInvalid);
    // A frame that cannot be read.
    py.put(f_inner, py.l.frame.code, inner);
    py.put(f_inner, py.l.frame.previous, 0x10);
    CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kTorn);
    // A link at the top of the address space: `frame + size` wraps past zero. Not inside the window read
    // for the frame before it (reading from there would index exabytes past it): torn.
    py.put(f_inner, py.l.frame.previous, ~uint64_t{7});
    CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kTorn);
    // 100 frames deep with a limit of 8: the innermost 8, marked.
    uint64_t prev = 0;
    for (int i = 0; i < 100; ++i) prev = py.frame(inner, py.instr(inner, 1), prev);
    py.set_frame(ts, prev);
    sampler::StackWalker shallow(o, codes, 8);
    REQUIRE(shallow.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    CHECK(w.depth == 8);
    CHECK(w.truncated);
    CHECK(shallow.frames()[7].line == 13);
    // A deadline that has passed: the walk gives up.
    CHECK(shallow.walk(ts, 0, &w) == sampler::WalkResult::kBudget);
  }
}

namespace {

// A reader that runs `change` just before its read number `at` (counted from 1), as a thread running on
// under a walk would.
class ChangingReader final : public sampler::MemoryReader {
 public:
  explicit ChangingReader(sampler::MemoryReader& inner) : inner_(inner) {}
  size_t at = 0;
  std::function<void()> change;
  size_t reads = 0;
  size_t read(std::span<const sampler::ReadRegion> regions) override {
    if (++reads == at && change) change();
    return inner_.read(regions);
  }

 private:
  sampler::MemoryReader& inner_;
};

// A thread of `n` frames of one code object, side by side, each caller below its callee (as 3.11+ lays them
// out in a data stack), read through a ChangingReader with a code cache.
struct FrameChain {
  FrameChain(int minor, size_t n) : py(table(minor)), reader(py.mem), o(reader, py.l), codes(o, tables) {
    const std::vector<uint8_t> t = minor >= 11   ? location_table(1, {2, 3})
                                   : minor == 10 ? std::vector<uint8_t>{4, 1}
                                                 : std::vector<uint8_t>{0, 1};
    code = py.code("f", "/src/f.py", 1, t, 2);
    uint64_t prev = 0;
    for (size_t i = 0; i < n; ++i) frames.push_back(prev = py.frame(code, py.instr(code, 0), prev));
    ts = py.tstate(frames.back());
    one_page = (frames.front() / 4096) == ((frames.back() + py.l.frame.read_size - 1) / 4096);
  }
  FakePython py;
  ChangingReader reader;
  sampler::RemoteObjects o;
  sampler::StackTables tables;
  sampler::CodeCache codes;
  uint64_t code = 0, ts = 0;
  std::vector<uint64_t> frames;
  bool one_page = false;
};

}  // namespace

TEST_CASE(
    "stack walker: frames read by the page, checked in one read; changed links, dead frames, changed code") {
  for (const int minor : {10, 11, 12, 13}) {
    CAPTURE(minor);
    FrameChain c(minor, 6);
    auto [py, reader, codes, frames, ts] = std::tie(c.py, c.reader, c.codes, c.frames, c.ts);
    const uint64_t code = c.code;
    const bool one_page = c.one_page;
    sampler::StackWalker walker(c.o, codes, 64);
    sampler::WalkOutput w;
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    // Again with the code cached: the frame pointer (one read, two through a cframe), the window(s), then
    // the windows, the frame pointer and the cached code together. One read per frame would take 6.
    reader.reads = 0;
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    CHECK(w.depth == 6);
    CHECK(w.frames_read == 6);
    const size_t frame_pointer_reads = py.l.frame.cframe_current ? 2 : 1;
    CHECK(reader.reads == frame_pointer_reads + (one_page ? 1 : 2) + 1);
    const size_t reads = reader.reads;
    // A caller's link changed between the window read and its check at the end (the thread unwound to it
    // and called again): the walk is torn, not a mix of two stacks.
    for (const size_t which : {size_t{1}, size_t{4}}) {
      CAPTURE(which);
      const uint64_t other = py.frame(code, py.instr(code, 1), 0);
      reader.reads = 0;
      reader.at = reads;  // the last read: the check
      reader.change = [&] { py.put(frames[which], py.l.frame.previous, other); };
      CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kTorn);
      reader.change = nullptr;
      py.put(frames[which], py.l.frame.previous, frames[which - 1]);
      REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    }
    // 3.8-3.10: a frame object kept for reuse (reference count 0) links like a frame, but is none: read so
    // at first, or by the last read (the thread returned from it meanwhile), the walk is torn.
    if (py.l.frame.refcount) {
      py.put(frames[2], *py.l.frame.refcount, 0);
      CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kTorn);
      py.put(frames[2], *py.l.frame.refcount, 1);
      reader.reads = 0;
      reader.at = reads;
      reader.change = [&] { py.put(frames[2], *py.l.frame.refcount, 0); };
      CHECK(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kTorn);
      reader.change = nullptr;
      py.put(frames[2], *py.l.frame.refcount, 1);
    }
    // The code object replaced by another at its address between the lookup and the last read: the walk
    // resolves it again and checks once more, and the stack names the new one.
    const uint64_t resolved = codes.resolved();
    reader.reads = 0;
    reader.at = reads;
    reader.change = [&] { py.put(code, py.l.code.filename, py.str("/src/g.py")); };
    REQUIRE(walker.walk(ts, gilspy::monotonic_ns() + 1'000'000'000, &w) == sampler::WalkResult::kOk);
    reader.change = nullptr;
    CHECK(codes.resolved() == resolved + 1);
    CHECK(c.tables.string(walker.frames()[0].file) == "/src/g.py");
    CHECK(c.tables.string(walker.frames()[5].file) == "/src/g.py");
  }
}

TEST_CASE(
    "stack walker: a guess of where the frame was saves reads; a wrong or unreadable guess walks right") {
  for (const int minor : {10, 11, 12, 13}) {
    CAPTURE(minor);
    FrameChain c(minor, 3);
    auto [py, reader, frames, ts] = std::tie(c.py, c.reader, c.frames, c.ts);
    const bool one_page = c.one_page;
    sampler::StackWalker walker(c.o, c.codes, 64);
    const auto read_stack = [&](sampler::FrameGuess guess, uint64_t* first) {
      sampler::WalkOutput w;
      REQUIRE(walker.current_frame(ts, first, {}, guess));
      REQUIRE(walker.walk_from(ts, *first, gilspy::monotonic_ns() + 1'000'000'000, &w) ==
              sampler::WalkResult::kOk);
      return w.depth;
    };
    uint64_t first = 0;
    REQUIRE(read_stack({}, &first) == 3);  // the code cached from here on
    reader.reads = 0;
    REQUIRE(read_stack({}, &first) == 3);
    const size_t unguessed = reader.reads;
    CHECK(unguessed == (py.l.frame.cframe_current ? 2u : 1u) + (one_page ? 1 : 2) + 1);
    // Where the frame was last time: the frame pointer and the window in one read, then the check.
    const sampler::FrameGuess guess = walker.found(first);
    const uint64_t taken = walker.guesses_taken();
    reader.reads = 0;
    REQUIRE(read_stack(guess, &first) == 3);
    CHECK(first == frames[2]);
    CHECK(walker.guesses_taken() == taken + 1);
    CHECK(reader.reads == (one_page ? 2u : 3u));
    // The thread returned from its innermost frame: the guessed window is not used; the stack is its caller's
    // (3.11-3.12: the same _PyCFrame, whose frame pointer came with the first read all the same).
    py.set_frame(ts, frames[1]);
    reader.reads = 0;
    CHECK(read_stack(guess, &first) == 2);
    CHECK(first == frames[1]);
    CHECK(walker.guesses_taken() == taken + 1);
    CHECK(reader.reads == unguessed - (py.l.frame.cframe_current ? 1 : 0));
    // A guess whose page cannot be read (the thread's stack memory went away): the read goes on without it.
    py.set_frame(ts, frames[2]);
    CHECK(read_stack({.frame = 0x10, .cframe = guess.cframe != 0 ? uint64_t{0x18} : 0}, &first) == 3);
    CHECK(first == frames[2]);
    CHECK(walker.guesses_taken() == taken + 1);
  }
}

namespace {

// A reader that moves a thread's innermost frame after a number of reads, as a running holder would.
class MovingReader final : public sampler::MemoryReader {
 public:
  MovingReader(FakePython& py, uint64_t ts, uint64_t other_frame) : py_(py), ts_(ts), other_(other_frame) {}
  int move_after = -1;  // reads until the frame moves (once); -1: never
  size_t read(std::span<const sampler::ReadRegion> regions) override {
    if (move_after == 0) {
      py_.set_frame(ts_, other_);
      move_after = -1;
    } else if (move_after > 0) {
      --move_after;
    }
    return py_.mem.read(regions);
  }

 private:
  FakePython& py_;
  uint64_t ts_, other_;
};

std::vector<raw::Record> drain(sampler::RecordQueue& q) {
  std::vector<raw::Record> out;
  raw::TargetRecord r;
  while (q.pop(&r)) out.push_back(std::move(r.record));
  return out;
}

template <class Kind>
std::vector<Kind> only(const std::vector<raw::Record>& records) {
  std::vector<Kind> out;
  for (const auto& r : records) {
    if (const auto* k = std::get_if<Kind>(&r)) out.push_back(*k);
  }
  return out;
}

}  // namespace

TEST_CASE("stack sampler: the holder's stack as interned records; a torn read dropped and read again") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("hog", "/w.py", 3, location_table(3, {4, 5, 6}), 3);
  const uint64_t frame = py.frame(code, py.instr(code, 1), 0);
  const uint64_t other = py.frame(code, py.instr(code, 2), 0);
  const uint64_t ts = py.tstate(frame);
  MovingReader reader(py, ts, other);
  sampler::RecordQueue q(1024);
  sampler::StackSampler sampler(s.interp, reader, q, 7, {}, 16);
  s.hold(ts, 5);
  sampler.thread_added(0, ts, 0x7f00, 4242, 1000);
  sampler.role_changed(0, raw::GilRole::kHolding, 2000);
  CHECK(sampler.has_work(gilspy::monotonic_ns()));
  // The frame moves in the middle of the first read: dropped as torn, and read again at once.
  reader.move_after = 3;
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  const auto records = drain(q);
  CHECK(sampler.counters().torn == 1);
  CHECK(sampler.counters().samples == 1);
  const auto frames = only<raw::FrameDef>(records);
  const auto stacks = only<raw::StackDef>(records);
  const auto samples = only<raw::StackSample>(records);
  REQUIRE(frames.size() == 1);
  REQUIRE(stacks.size() == 1);
  REQUIRE(samples.size() == 1);
  CHECK(frames[0].line == 6);         // read at the moved frame: instruction 2
  CHECK(frames[0].qualname.empty());  // filled by the session from the tables
  CHECK(samples[0].tid == 4242);
  CHECK(samples[0].since == 2000);
  CHECK(samples[0].role == raw::GilRole::kHolding);
  CHECK(samples[0].stack == stacks[0].id);
  raw::Record fr = frames[0], st = stacks[0];
  sampler.tables().fill(fr);
  sampler.tables().fill(st);
  CHECK(std::get<raw::FrameDef>(fr).qualname == "hog");
  CHECK(std::get<raw::FrameDef>(fr).file == "/w.py");
  CHECK(std::get<raw::StackDef>(st).frames == std::vector<uint32_t>{frames[0].id});
  // The same stack again (a later sample of the hold): no new definitions, only the sample.
  sampler.after_poll(gilspy::monotonic_ns() + 20'000'000, 0, 0);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  const auto again = drain(q);
  CHECK(only<raw::FrameDef>(again).empty());
  CHECK(only<raw::StackDef>(again).empty());
  CHECK(only<raw::StackSample>(again).size() == 1);
  // The hold ended before there was time to read it: skipped, nothing emitted.
  sampler.role_changed(0, raw::GilRole::kHolding, 3000);
  sampler.role_changed(0, raw::GilRole::kReleased, 3500);
  const uint64_t skipped = sampler.counters().skipped;
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(only<raw::StackSample>(drain(q)).empty());
  CHECK(sampler.counters().skipped == skipped + 1);
  // Costs at the stats tick.
  sampler.emit_stats(9000);
  const auto costs = only<raw::StackStats>(drain(q));
  REQUIRE(costs.size() == 1);
  CHECK(costs[0].samples == 2);
  CHECK(costs[0].bytes > 0);
}

TEST_CASE("stack sampler: a long hold is read again at gaps spread over [1/2, 3/2) of hold_resample_ns") {
  // Evenly spaced reads would see a loop whose period is a multiple of the gap at the same few points of its
  // cycle, for ever (seen: a 1.5 s phase of six shapes in turn showed four of them).
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("hog", "/w.py", 3, location_table(3, {4}), 1);
  const uint64_t ts = py.tstate(py.frame(code, py.instr(code, 0), 0));
  sampler::RecordQueue q(1 << 14);
  sampler::StackOptions o;
  o.hold_resample_ns = 10'000'000;
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, o, 4);
  s.hold(ts, 1);
  sampler.thread_added(0, ts, 1, 10, 0);
  sampler.role_changed(0, raw::GilRole::kHolding, 100);
  constexpr int64_t kBig = 1'000'000'000;
  sampler.work(gilspy::monotonic_ns() + kBig);
  REQUIRE(sampler.counters().samples == 1);
  // has_work(far past): true only for a read asked for, not for the names' schedule.
  constexpr int64_t kPast = INT64_MIN / 2;
  std::vector<int64_t> gaps;
  for (int k = 0; k < 300; ++k) {
    // The read's own time (its sample's ts), not the clock now: under a sanitizer on a loaded machine the
    // test reaches this line a millisecond after the read.
    const auto read = only<raw::StackSample>(drain(q));
    REQUIRE(read.size() == 1);
    const int64_t after = read[0].ts;
    int64_t x = 0;
    while (!sampler.has_work(kPast) && x < 30'000'000) {
      x += 50'000;
      sampler.after_poll(after + x, 0, 0);
    }
    gaps.push_back(x);
    sampler.work(gilspy::monotonic_ns() + kBig);
  }
  CHECK(sampler.counters().samples == 301);
  const auto [lo, hi] = std::minmax_element(gaps.begin(), gaps.end());
  CHECK(*lo >= 5'000'000 - 100'000);
  CHECK(*hi <= 15'000'000 + 100'000);
  const double mean =
      static_cast<double>(std::accumulate(gaps.begin(), gaps.end(), int64_t{0})) / gaps.size();
  CHECK(mean == doctest::Approx(10e6).epsilon(0.08));  // 300 draws: the mean's sd is 0.17 ms
  // Spread: each third of the range is drawn (each has probability 1/3 a draw: none in 300 is impossible).
  CHECK(std::count_if(gaps.begin(), gaps.end(), [](int64_t g) { return g < 8'300'000; }) > 50);
  CHECK(std::count_if(gaps.begin(), gaps.end(), [](int64_t g) { return g > 11'700'000; }) > 50);
}

TEST_CASE("stack sampler: a waiter's stack; the GIL changing hands under a holder's read drops it") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("sleeper", "/w.py", 8, location_table(8, {9, 10}), 2);
  const uint64_t ts = py.tstate(py.frame(code, py.instr(code, 1), 0));
  const uint64_t holder_ts = py.tstate(py.frame(code, py.instr(code, 0), 0));
  sampler::RecordQueue q(1024);
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, {}, 16);
  s.hold(holder_ts, 1);
  sampler.thread_added(0, ts, 1, 10, 0);
  sampler.thread_added(1, holder_ts, 2, 11, 0);
  sampler.role_changed(0, raw::GilRole::kWaiting, 100);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  auto samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].role == raw::GilRole::kWaiting);
  CHECK(samples[0].tid == 10);
  // The holder's read begins, but the GIL is not held by it any more: nothing read.
  sampler.role_changed(1, raw::GilRole::kHolding, 200);
  s.hold(ts, 2);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(only<raw::StackSample>(drain(q)).empty());
  // A wait whose thread took the GIL between the poll that saw it wait and the read (no switch under the
  // read): it runs Python now, away from where it waited: nothing read.
  sampler.role_changed(0, raw::GilRole::kWaiting, 300);
  s.hold(ts, 3);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(only<raw::StackSample>(drain(q)).empty());
  // The same wait with another thread holding: read.
  sampler.role_changed(0, raw::GilRole::kReleased, 400);
  sampler.role_changed(0, raw::GilRole::kWaiting, 500);
  s.hold(holder_ts, 4);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(only<raw::StackSample>(drain(q)).size() == 1);
}

TEST_CASE(
    "stack sampler: a hold that follows its thread's read wait by one switch starts at that stack, unread") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("worker", "/w.py", 8, location_table(8, {9, 10}), 2);
  const uint64_t ts = py.tstate(py.frame(code, py.instr(code, 1), 0));
  const uint64_t other_ts = py.tstate(py.frame(code, py.instr(code, 0), 0));
  sampler::RecordQueue q(1024);
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, {}, 16);
  sampler.thread_added(0, ts, 1, 10, 0);
  sampler.thread_added(1, other_ts, 2, 11, 0);
  auto wait_read_at = [&](uint64_t switches, int64_t since) {
    s.hold(other_ts, switches);
    sampler.role_changed(0, raw::GilRole::kWaiting, since);
    sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
    auto samples = only<raw::StackSample>(drain(q));
    REQUIRE(samples.size() == 1);
    CHECK(samples[0].role == raw::GilRole::kWaiting);
    return samples[0].stack;
  };
  // The wait is read at switch 5; the thread takes the GIL, the first switch since (6): its hold's first
  // sample is the wait's stack, at the hold's start, with no read.
  const uint32_t wait_stack = wait_read_at(5, 100);
  sampler.role_changed(0, raw::GilRole::kHolding, 300);
  s.hold(ts, 6);
  const size_t reads = py.mem.reads();
  sampler.after_poll(400, 0, 6);
  CHECK(py.mem.reads() == reads);
  CHECK_FALSE(sampler.has_work(400));
  auto samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].role == raw::GilRole::kHolding);
  CHECK(samples[0].ts == 300);
  CHECK(samples[0].since == 300);
  CHECK(samples[0].stack == wait_stack);
  CHECK(sampler.counters().reused == 1);
  // The thread lets go and takes the GIL back with nobody in between (no switch): it ran Python since its
  // wait was read, so this hold is read.
  sampler.role_changed(0, raw::GilRole::kReleased, 500);
  sampler.role_changed(0, raw::GilRole::kHolding, 600);
  sampler.after_poll(700, 0, 6);
  CHECK(sampler.has_work(700));
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].since == 600);
  CHECK(samples[0].ts != 600);  // read, not reused
  // A wait read at switch 6, then a hold two switches on (it held and let go unseen): read too.
  wait_read_at(6, 800);
  sampler.role_changed(0, raw::GilRole::kHolding, 900);
  s.hold(ts, 8);
  sampler.after_poll(1000, 0, 8);
  CHECK(sampler.has_work(1000));
  CHECK(sampler.counters().reused == 1);
}

TEST_CASE(
    "stack sampler: --all-threads reads released threads from spare budget, after holders, again later") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("recv_loop", "/w.py", 8, location_table(8, {9, 10}), 2);
  const uint64_t reader_ts = py.tstate(py.frame(code, py.instr(code, 1), 0));
  const uint64_t holder_ts = py.tstate(py.frame(code, py.instr(code, 0), 0));
  sampler::RecordQueue q(1024);
  sampler::StackOptions o;
  o.all_threads = true;
  o.released_resample_ns = 100'000'000;
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, o, 16);
  s.hold(holder_ts, 1);
  constexpr int64_t kBig = 1'000'000'000;
  sampler.thread_added(0, reader_ts, 1, 10, 1000);  // released since it was seen, 1000
  sampler.thread_added(1, holder_ts, 2, 11, 1000);
  sampler.role_changed(1, raw::GilRole::kHolding, 1500);
  // Without spare budget only the holder is read; the released thread waits for budget beyond the roles'.
  constexpr int64_t kPast = INT64_MIN / 2;  // has_work(far past): names are not due, reads asked for are
  CHECK(sampler.has_work(kPast, false));    // the holder is due
  sampler.work(gilspy::monotonic_ns() + kBig, false);
  auto samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].tid == 11);
  CHECK(samples[0].role == raw::GilRole::kHolding);
  CHECK_FALSE(sampler.has_work(kPast, false));
  CHECK(sampler.has_work(kPast, true));
  // With it: the released thread (first seen without the GIL, so since its start), once.
  sampler.work(gilspy::monotonic_ns() + kBig, true);
  samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].tid == 10);
  CHECK(samples[0].role == raw::GilRole::kReleased);
  CHECK(samples[0].since == 1000);
  sampler.work(gilspy::monotonic_ns() + kBig, true);
  CHECK(only<raw::StackSample>(drain(q)).empty());  // not due again yet (50-150 ms)
  // The holder lets go: read when it does, with that stretch's start.
  sampler.role_changed(1, raw::GilRole::kReleased, 2500);
  s.hold(0, 2);
  sampler.work(gilspy::monotonic_ns() + kBig, true);
  samples = only<raw::StackSample>(drain(q));
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].tid == 11);
  CHECK(samples[0].since == 2500);
  // Without --all-threads a released thread is never read.
  sampler::RecordQueue q2(1024);
  sampler::StackSampler plain(s.interp, py.mem, q2, 0, {}, 16);
  plain.thread_added(0, reader_ts, 1, 10, 1000);
  plain.role_changed(0, raw::GilRole::kReleased, 3000);
  plain.work(gilspy::monotonic_ns() + kBig, true);
  CHECK(only<raw::StackSample>(drain(q2)).empty());
}

TEST_CASE(
    "stack sampler: --all-threads reads a thread that stays released again after released_resample_ns") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t code = py.code("recv_loop", "/w.py", 8, location_table(8, {9}), 1);
  const uint64_t ts = py.tstate(py.frame(code, py.instr(code, 0), 0));
  sampler::RecordQueue q(1024);
  sampler::StackOptions o;
  o.all_threads = true;
  o.released_resample_ns = 2'000'000;  // 1-3 ms
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, o, 4);
  s.hold(0, 1);
  sampler.thread_added(0, ts, 1, 10, 0);
  int reads = 0;
  const int64_t until = gilspy::monotonic_ns() + 200'000'000;
  while (gilspy::monotonic_ns() < until && reads < 5) {
    sampler.work(gilspy::monotonic_ns() + 1'000'000, true);
    reads += static_cast<int>(only<raw::StackSample>(drain(q)).size());
  }
  CHECK(reads == 5);  // 5 reads take 5-15 ms of the 200 ms
}

TEST_CASE("stack sampler: thread names from threading._active, renames, no threading") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t ts_a = py.tstate(0), ts_b = py.tstate(0);
  sampler::RecordQueue q(1024);
  sampler::StackSampler sampler(s.interp, py.mem, q, 0, {}, 16);
  sampler.thread_added(0, ts_a, 0x7fa0, 100, 0);
  sampler.thread_added(1, ts_b, 0x7fb0, 101, 0);
  // No threading module yet: nothing named, asked again later.
  const uint64_t modules = py.dict({{py.str("sys"), 1}});
  py.put(s.interp_addr, py.l.interp_modules, modules);
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(only<raw::ThreadName>(drain(q)).empty());
  // threading imported: _active maps idents to Thread objects.
  const uint64_t a = py.instance({{"_name", py.str("A")}}), b = py.instance({{"_name", py.str(U"b\u00e9")}});
  const uint64_t active = py.dict({{py.integer(0x7fa0), a}, {py.integer(0x7fb0), b}}, false);
  const uint64_t threading = py.module(py.dict({{py.str("_active"), active}, {py.str("Thread"), 5}}));
  py.put(s.interp_addr, py.l.interp_modules, py.dict({{py.str("sys"), 1}, {py.str("threading"), threading}}));
  // The retry comes a second later; a second sampler (a fresh attach) asks at once.
  sampler::StackSampler fresh(s.interp, py.mem, q, 0, {}, 16);
  fresh.thread_added(0, ts_a, 0x7fa0, 100, 0);
  fresh.thread_added(1, ts_b, 0x7fb0, 101, 0);
  fresh.work(gilspy::monotonic_ns() + 1'000'000'000);
  auto names = only<raw::ThreadName>(drain(q));
  REQUIRE(names.size() == 2);
  for (auto& n : names) {
    raw::Record r = n;
    fresh.tables().fill(r);
    n = std::get<raw::ThreadName>(r);
  }
  CHECK(names[0].tid == 100);
  CHECK(names[0].name == "A");
  CHECK(names[1].name == "b\xc3\xa9");
  CHECK(fresh.counters().name_reads == 2);
}

// Every read takes 5 us, as a system call to another process does: a names step then has time for a few
// dozen.
class SlowReader final : public sampler::MemoryReader {
 public:
  explicit SlowReader(sampler::MemoryReader& inner) : inner_(inner) {}
  size_t read(std::span<const sampler::ReadRegion> regions) override {
    const int64_t until = gilspy::monotonic_ns() + 5'000;
    while (gilspy::monotonic_ns() < until) {
    }
    return inner_.read(regions);
  }

 private:
  sampler::MemoryReader& inner_;
};

TEST_CASE(
    "stack sampler: with more threads than one names step can read, later steps go on where it stopped") {
  // 200 threads, and 300 us per work() call: decoding their idents alone takes 200 reads. Each step used to
  // start the refresh over, decode the first few dozen again, and leave the rest unnamed until the next
  // refresh (100 ms on) did the same.
  FakeSession s;
  auto& py = s.py;
  constexpr size_t kThreads = 200;
  std::vector<std::pair<uint64_t, uint64_t>> items;
  for (size_t i = 0; i < kThreads; ++i) {
    items.push_back(
        {py.integer(0x7f0000 + i * 0x100), py.instance({{"_name", py.str("t" + std::to_string(i))}})});
  }
  const uint64_t threading =
      py.module(py.dict({{py.str("_active"), py.dict(items, false)}, {py.str("Thread"), 5}}));
  py.put(s.interp_addr, py.l.interp_modules, py.dict({{py.str("sys"), 1}, {py.str("threading"), threading}}));
  SlowReader reader(py.mem);
  sampler::RecordQueue q(4096);
  sampler::StackSampler sampler(s.interp, reader, q, 0, {}, 256);
  for (size_t i = 0; i < kThreads; ++i) {
    sampler.thread_added(i, py.tstate(0), 0x7f0000 + i * 0x100, static_cast<int32_t>(1000 + i),
                         gilspy::monotonic_ns());
  }
  std::set<int64_t> named;
  for (int call = 0; call < 100 && named.size() < kThreads; ++call) {
    sampler.work(gilspy::monotonic_ns() + 300'000);
    for (const auto& n : only<raw::ThreadName>(drain(q))) named.insert(n.tid);
  }
  CHECK(named.size() == kThreads);
  CHECK(sampler.counters().name_reads == kThreads);
}

TEST_CASE("stack sampler: a names step for threads that have ended since reads nothing") {
  FakeSession s;
  auto& py = s.py;
  const uint64_t ts_a = py.tstate(0), ts_b = py.tstate(0), ts_c = py.tstate(0);
  const uint64_t a = py.instance({{"_name", py.str("A")}});
  const uint64_t active = py.dict({{py.integer(0x7fa0), a}}, false);
  const uint64_t threading = py.module(py.dict({{py.str("_active"), active}, {py.str("Thread"), 5}}));
  py.put(s.interp_addr, py.l.interp_modules, py.dict({{py.str("sys"), 1}, {py.str("threading"), threading}}));
  ChangingReader reader(py.mem);
  sampler::RecordQueue q(1024);
  sampler::StackSampler sampler(s.interp, reader, q, 0, {}, 16);
  sampler.thread_added(0, ts_a, 0x7fa0, 100, gilspy::monotonic_ns());
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  REQUIRE(only<raw::ThreadName>(drain(q)).size() == 1);
  // A request thread that came and went before its names step (due 10 ms after it appeared).
  sampler.thread_added(1, ts_b, 0x7fb0, 101, gilspy::monotonic_ns());
  sampler.thread_removed(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  reader.reads = 0;
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(reader.reads == 0);
  // One still there (not in _active yet): the step reads threading._active for it.
  sampler.thread_added(2, ts_c, 0x7fc0, 102, gilspy::monotonic_ns());
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  sampler.work(gilspy::monotonic_ns() + 1'000'000'000);
  CHECK(reader.reads > 0);
}

}  // namespace unit_stack_sampler
