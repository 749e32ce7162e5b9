// _Py_DebugOffsets: the 3.14 decoder against synthetic blocks laid out as CPython 3.14's header says, the
// 3.13 cross-check, dispatch on cookie and version, and a real 3.13 libpython read from disk.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cpython_layouts/debug_offsets.hpp"
#include "cpython_layouts/layout.hpp"
#include "elfutils/elf_image.hpp"
#include "elfutils/python_binary.hpp"
#include "support/catch_error.hpp"

namespace gl = gilspy::layouts;
using gilspy::Error;
using gilspy::ErrorKind;

// Named per file, so that the unity build can put test files together.
namespace unit_debug_offsets {
namespace {

constexpr uint64_t kV3_14_0 = 0x030E00F0;
constexpr uint64_t kV3_13_0 = 0x030D00F0;
constexpr size_t kBlock3_14 = 760;  // sizeof(_Py_DebugOffsets) in 3.14

// A _PyRuntime head: the cookie, the version, and every other word set to a value no real offset has, so
// that a decoder reading the wrong word gets something recognisably wrong.
struct Blob {
  std::vector<uint8_t> bytes;

  explicit Blob(uint64_t version, size_t size = gl::kDebugOffsetsReadSize) : bytes(size, 0) {
    for (size_t at = 0; at + 8 <= size; at += 8) put(at, 0xBAD00000u + at);
    std::memcpy(bytes.data(), gl::kDebugCookie, sizeof gl::kDebugCookie);
    put(8, version);
    put(16, 0);
  }
  void put(size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, sizeof v); }
  std::span<const uint8_t> span() const { return bytes; }
};

// Positions of the words gilspy reads in 3.14's block (header of the 3.14 line; see debug_offsets_3_14.cpp).
namespace p14 {
constexpr size_t free_threaded = 16, runtime_size = 24, interpreters_head = 40;
constexpr size_t interp_size = 48, interp_id = 56, interp_next = 64, interp_threads_head = 72,
                 interp_threads_main = 80, interp_gc = 88, interp_ceval_gil = 120, interp_gil = 128,
                 interp_gil_enabled = 136, interp_gil_locked = 144, interp_gil_holder = 152;
constexpr size_t tstate_size = 176, tstate_prev = 184, tstate_next = 192, tstate_interp = 200,
                 tstate_thread_id = 216, tstate_native_thread_id = 224;
constexpr size_t gc_size = 648, gc_collecting = 656;
}  // namespace p14

// Plausible 3.14 values (sizes large enough), each distinct from every other.
struct Values14 {
  uint64_t runtime_size = 150000, interpreters_head = 808;
  uint64_t interp_size = 100000, id = 7311, next = 7303, threads_head = 7383, threads_main = 7391, gc = 7440,
           ceval_gil = 24, gil = 9000, gil_enabled = 0, gil_locked = 9016, gil_holder = 9008;
  uint64_t tstate_size = 4000, tstate_prev = 0, tstate_next = 8, tstate_interp = 16, thread_id = 168,
           native_thread_id = 176;
  uint64_t gc_size = 240, collecting = 192;  // 3.14.0's incremental collector (3.14.5+: 264)
  bool free_threaded = false;
};

Blob blob_3_14(const Values14& v, uint64_t version = kV3_14_0) {
  Blob b(version);
  b.put(p14::free_threaded, v.free_threaded ? 1 : 0);
  b.put(p14::runtime_size, v.runtime_size);
  b.put(p14::interpreters_head, v.interpreters_head);
  b.put(p14::interp_size, v.interp_size);
  b.put(p14::interp_id, v.id);
  b.put(p14::interp_next, v.next);
  b.put(p14::interp_threads_head, v.threads_head);
  b.put(p14::interp_threads_main, v.threads_main);
  b.put(p14::interp_gc, v.gc);
  b.put(p14::interp_ceval_gil, v.ceval_gil);
  b.put(p14::interp_gil, v.gil);
  b.put(p14::interp_gil_enabled, v.gil_enabled);
  b.put(p14::interp_gil_locked, v.gil_locked);
  b.put(p14::interp_gil_holder, v.gil_holder);
  b.put(p14::tstate_size, v.tstate_size);
  b.put(p14::tstate_prev, v.tstate_prev);
  b.put(p14::tstate_next, v.tstate_next);
  b.put(p14::tstate_interp, v.tstate_interp);
  b.put(p14::tstate_thread_id, v.thread_id);
  b.put(p14::tstate_native_thread_id, v.native_thread_id);
  b.put(p14::gc_size, v.gc_size);
  b.put(p14::gc_collecting, v.collecting);
  return b;
}

// 3.13's block (Include/internal/pycore_runtime.h of 3.13.0), filled with the values of the 3.13 table.
namespace p13 {
constexpr size_t interpreters_head = 40, interp_id = 56, interp_next = 64, interp_threads_head = 72,
                 interp_gc = 80, interp_ceval_gil = 112, interp_gil = 120, interp_gil_locked = 136,
                 interp_gil_holder = 144, tstate_prev = 160, tstate_next = 168, tstate_interp = 176,
                 tstate_thread_id = 192, tstate_native_thread_id = 200, gc_size = 568, gc_collecting = 576;
}  // namespace p13

constexpr uint64_t kGil3_13 = 7752;  // offsetof(PyInterpreterState, _gil) in pyenv's 3.13.0

Blob blob_3_13_from_table() {
  const auto& t = gl::layout_for(gilspy::elf::version_from_hex(kV3_13_0));
  Blob b(kV3_13_0);
  b.put(p13::interpreters_head, t.runtime.interpreters_head.off);
  b.put(p13::interp_id, t.interp.id.off);
  b.put(p13::interp_next, t.interp.next.off);
  b.put(p13::interp_threads_head, t.interp.threads_head.off);
  b.put(p13::interp_gc, t.gc.offset);
  b.put(p13::interp_ceval_gil, t.gil_offset);
  b.put(p13::interp_gil, kGil3_13);
  b.put(p13::interp_gil_locked, kGil3_13 + t.gil.locked.off);
  b.put(p13::interp_gil_holder, kGil3_13 + t.gil.last_holder.off);
  b.put(p13::tstate_prev, t.tstate.prev.off);
  b.put(p13::tstate_next, t.tstate.next.off);
  b.put(p13::tstate_interp, t.tstate.interp.off);
  b.put(p13::tstate_thread_id, t.tstate.thread_id.off);
  b.put(p13::tstate_native_thread_id, (*t.tstate.native_thread_id).off);
  b.put(p13::gc_size, 240);
  b.put(p13::gc_collecting, t.gc.collecting.off);
  return b;
}

using gilspy::test::catch_error;

gilspy::elf::PyVersion v3_14() {
  return gilspy::elf::version_from_hex(static_cast<uint32_t>(kV3_14_0));
}

}  // namespace

TEST_CASE("3.14 _Py_DebugOffsets: every field gilspy uses is read from its own position") {
  const Values14 v;
  const Blob b = blob_3_14(v);
  const auto d = gl::decode_debug_offsets(b.span());
  REQUIRE(d.has_value());
  CHECK(d->version == kV3_14_0);
  CHECK_FALSE(d->free_threaded);
  CHECK(d->runtime_interpreters_head == v.interpreters_head);
  CHECK(d->interp_id == v.id);
  CHECK(d->interp_next == v.next);
  CHECK(d->interp_threads_head == v.threads_head);
  CHECK(d->interp_gc == v.gc);
  CHECK(d->interp_ceval_gil == v.ceval_gil);
  CHECK(d->interp_gil_runtime_state == v.gil);
  CHECK(d->gil_enabled == v.gil_enabled);
  CHECK(d->gil_locked == v.gil_locked);
  CHECK(d->gil_holder == v.gil_holder);
  CHECK(d->tstate_next == v.tstate_next);
  CHECK(d->tstate_interp == v.tstate_interp);
  CHECK(d->tstate_thread_id == v.thread_id);
  CHECK(d->tstate_native_thread_id == v.native_thread_id);
  CHECK_FALSE(d->tstate_holds_gil.has_value());  // 3.14's block does not publish it
  REQUIRE(d->gc_collecting.has_value());
  CHECK(*d->gc_collecting == v.collecting);

  // The decoder needs the block only up to the end of its gc section (+664), not all 760 bytes.
  const std::vector<uint8_t> through_gc(b.bytes.begin(), b.bytes.begin() + 664);
  CHECK(gl::decode_debug_offsets(through_gc)->gc_collecting == v.collecting);
}

TEST_CASE("3.14 _Py_DebugOffsets: a later 3.14.x decodes with the same table") {
  const Values14 v;
  const auto d = gl::decode_debug_offsets(blob_3_14(v, 0x030E05F0).span());
  REQUIRE(d.has_value());
  CHECK(d->version == 0x030E05F0);
  CHECK(d->interp_gc == v.gc);
}

TEST_CASE("3.14 layout built from the debug offsets") {
  const Values14 v;
  const Blob b = blob_3_14(v);
  const gl::Layout l = gl::resolve_layout(v3_14(), b.span());
  CHECK(l.major == 3);
  CHECK(l.minor == 14);
  CHECK_FALSE(l.free_threaded);
  CHECK(l.gil_home == gl::GilHome::kInterpPointer);
  CHECK(l.gil_offset == v.ceval_gil);
  CHECK(l.runtime.interpreters_head == v.interpreters_head);
  CHECK(l.interp.id == v.id);
  CHECK(l.interp.next == v.next);
  CHECK(l.interp.threads_head == v.threads_head);
  CHECK(l.tstate.next == v.tstate_next);
  CHECK(l.tstate.interp == v.tstate_interp);
  CHECK(l.tstate.thread_id == v.thread_id);
  REQUIRE(l.tstate.native_thread_id.has_value());
  CHECK(*l.tstate.native_thread_id == v.native_thread_id);
  // The GIL struct keeps its 3.7-3.13 shape; the published locked/holder agree with it.
  CHECK(l.gil.last_holder.off == v.gil_holder - v.gil);
  CHECK(l.gil.locked.off == v.gil_locked - v.gil);
  CHECK(l.gil.switch_number.off == 24);
  CHECK_FALSE(l.gil.enabled.has_value());
  CHECK(l.gc.home == gl::GcHome::kInterp);
  CHECK(l.gc.offset == v.gc);
  CHECK(l.gc.known);
  CHECK(l.gc.collecting.off == v.collecting);
  // 3.14.0: the incremental collector (young, old[2]; counts by visited_space).
  CHECK(l.gc.incremental);
  CHECK(l.gc.visited_space.off == 232);
  CHECK(l.gc.stats == 120);
  CHECK(l.gc.stats_home == gl::GcStatsHome::kInline);
}

TEST_CASE(
    "3.14 GC state: Py_Version tells the incremental collector (3.14.0-3.14.4) from the generational one") {
  Values14 v;
  v.gc_size = 264;
  const gl::Layout g =
      gl::resolve_layout(gilspy::elf::version_from_hex(0x030E0AF0), blob_3_14(v, 0x030E0AF0).span());
  REQUIRE(g.gc.known);
  CHECK_FALSE(g.gc.incremental);
  CHECK(g.gc.generations == 24);
  CHECK(g.gc.stats == 120);
  CHECK(g.gc.collecting == 192);
  // 3.14.5's block claiming 3.14.4's size (or the reverse): the collector is not guessed.
  v.gc_size = 240;
  const gl::Layout bad =
      gl::resolve_layout(gilspy::elf::version_from_hex(0x030E05F0), blob_3_14(v, 0x030E05F0).span());
  CHECK_FALSE(bad.gc.known);
  CHECK(std::string(bad.gc.why_unknown).find("generational") != std::string::npos);
  v.gc_size = 264;
  const gl::Layout bad4 =
      gl::resolve_layout(gilspy::elf::version_from_hex(0x030E04F0), blob_3_14(v, 0x030E04F0).span());
  CHECK_FALSE(bad4.gc.known);
  CHECK(bad4.gil.locked.off == 16);  // the GIL is still read
}

TEST_CASE("3.13: a GC state the block places elsewhere is left unread; the GIL still is") {
  Blob b = blob_3_13_from_table();
  b.put(p13::gc_collecting, 208);
  const gl::Layout l = gl::resolve_layout(gilspy::elf::version_from_hex(kV3_13_0), b.span());
  CHECK_FALSE(l.gc.known);
  CHECK(l.gil.locked.off == 16);
}

TEST_CASE("free-threaded 3.14: layout says so and the GIL fields move by 8") {
  Values14 v;
  v.free_threaded = true;
  v.gil_locked = v.gil + 24;  // `int enabled` first: locked 16 -> 24, last_holder 8 -> 16
  v.gil_holder = v.gil + 16;
  const Blob b = blob_3_14(v);
  const auto d = gl::decode_debug_offsets(b.span());
  REQUIRE(d.has_value());
  CHECK(d->free_threaded);

  const gl::Layout l = gl::resolve_layout(v3_14(), b.span());
  CHECK(l.free_threaded);
  REQUIRE(l.gil.enabled.has_value());
  CHECK(l.gil.enabled->off == 0);
  CHECK(l.gil.interval.off == 8);
  CHECK(l.gil.last_holder.off == 16);
  CHECK(l.gil.locked.off == 24);
  CHECK(l.gil.switch_number.off == 32);
  CHECK(l.gil.cond == 40);
  CHECK(l.gil.mutex == 88);
  CHECK(l.gil.size == 216);
  CHECK(l.gil_offset == v.ceval_gil);

  // The same block claiming a default build: the GIL offsets no longer fit the known struct.
  Blob wrong = b;
  wrong.put(p14::free_threaded, 0);
  const auto caught = catch_error([&] { gl::resolve_layout(v3_14(), wrong.span()); });
  REQUIRE(caught.has_value());
  CHECK(caught->kind == ErrorKind::kLayoutMismatch);
}

TEST_CASE("3.14 _Py_DebugOffsets: a short read is refused") {
  const Blob full = blob_3_14(Values14{});
  for (size_t n : {size_t{24}, size_t{200}, size_t{600}, size_t{663}}) {
    CAPTURE(n);
    const std::vector<uint8_t> cut(full.bytes.begin(), full.bytes.begin() + static_cast<long>(n));
    const auto caught = catch_error([&] { gl::decode_debug_offsets(cut); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kLayoutMismatch);
    const auto via_resolve = catch_error([&] { gl::resolve_layout(v3_14(), cut); });
    REQUIRE(via_resolve.has_value());
    CHECK(via_resolve->kind == ErrorKind::kLayoutMismatch);
  }
}

TEST_CASE("3.14 _Py_DebugOffsets: offsets outside their structure are refused, naming the field") {
  struct Bad {
    size_t at;
    uint64_t value;
    const char* field;
  };
  const Values14 v;
  for (const Bad& bad : {Bad{p14::interp_threads_head, v.interp_size + 8, "interpreter_state.threads_head"},
                         Bad{p14::interp_ceval_gil, v.interp_size, "interpreter_state.ceval_gil"},
                         Bad{p14::tstate_native_thread_id, v.tstate_size, "thread_state.native_thread_id"},
                         Bad{p14::interpreters_head, v.runtime_size + 1, "runtime_state.interpreters_head"},
                         Bad{p14::gc_collecting, v.gc_size, "gc.collecting"},
                         Bad{p14::interp_gil_locked, v.gil - 8, "locked/holder"},
                         Bad{p14::free_threaded, 7, "free_threaded"}}) {
    CAPTURE(bad.field);
    Blob b = blob_3_14(v);
    b.put(bad.at, bad.value);
    const auto caught = catch_error([&] { gl::decode_debug_offsets(b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kLayoutMismatch);
    CHECK(caught->message.find(bad.field) != std::string::npos);
  }
}

TEST_CASE("3.14: the version in the block must be the binary's") {
  const Blob b = blob_3_14(Values14{});
  const auto caught =
      catch_error([&] { gl::resolve_layout(gilspy::elf::version_from_hex(0x030D00F0), b.span()); });
  REQUIRE(caught.has_value());
  CHECK(caught->kind == ErrorKind::kLayoutMismatch);
}

TEST_CASE("3.13: the table agrees with a block carrying the table's values") {
  const Blob b = blob_3_13_from_table();
  const auto v13 = gilspy::elf::version_from_hex(static_cast<uint32_t>(kV3_13_0));
  const auto d = gl::decode_debug_offsets(b.span());
  REQUIRE(d.has_value());
  CHECK(d->version == kV3_13_0);
  CHECK(d->interp_gil_runtime_state == kGil3_13);
  const gl::Layout l = gl::resolve_layout(v13, b.span());
  CHECK(l.minor == 13);
  CHECK(l.runtime.interpreters_head == 632);
  CHECK(l.interp.threads_head == 7344);
  CHECK(l.tstate.holds_gil == gl::layout_for(v13).tstate.holds_gil);
}

TEST_CASE("3.13: one wrong offset in the block is refused, naming the field") {
  struct Field {
    size_t at;
    const char* name;
  };
  const auto v13 = gilspy::elf::version_from_hex(static_cast<uint32_t>(kV3_13_0));
  for (const Field& f :
       {Field{p13::interpreters_head, "runtime.interpreters_head"},
        Field{p13::interp_threads_head, "interp.threads_head"}, Field{p13::interp_next, "interp.next"},
        Field{p13::interp_id, "interp.id"}, Field{p13::interp_gc, "interp.gc"},
        Field{p13::interp_ceval_gil, "interp.ceval.gil"}, Field{p13::tstate_next, "tstate.next"},
        Field{p13::tstate_interp, "tstate.interp"}, Field{p13::tstate_thread_id, "tstate.thread_id"},
        Field{p13::tstate_native_thread_id, "tstate.native_thread_id"},
        Field{p13::interp_gil_locked, "gil.locked"}, Field{p13::interp_gil_holder, "gil.last_holder"}}) {
    CAPTURE(f.name);
    Blob b = blob_3_13_from_table();
    uint64_t old = 0;
    std::memcpy(&old, b.bytes.data() + f.at, 8);
    b.put(f.at, old + 8);
    const auto caught = catch_error([&] { gl::resolve_layout(v13, b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kLayoutMismatch);
    CHECK(caught->message.find(f.name) != std::string::npos);
  }
}

TEST_CASE("_Py_DebugOffsets dispatch: no cookie, unknown version") {
  SUBCASE("bytes without the cookie are not a debug-offsets block") {
    Blob b = blob_3_14(Values14{});
    b.bytes[0] = 'X';
    CHECK_FALSE(gl::decode_debug_offsets(b.span()).has_value());
    const std::vector<uint8_t> zeros(gl::kDebugOffsetsReadSize, 0);
    CHECK_FALSE(gl::decode_debug_offsets(zeros).has_value());
    CHECK_FALSE(gl::decode_debug_offsets(std::span<const uint8_t>()).has_value());
    // A 3.13/3.14 binary whose runtime does not start with it is refused, not guessed.
    const auto caught = catch_error([&] { gl::resolve_layout(v3_14(), b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kLayoutMismatch);
  }
  SUBCASE("the cookie with a version gilspy does not know and a block of another shape") {
    // 3.16.0a1 with 3.14's block: the newest (3.15) decoder finds offsets outside their structures.
    const Blob b = blob_3_14(Values14{}, 0x031000A1);
    const auto caught = catch_error([&] { gl::decode_debug_offsets(b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kUnsupportedVersion);
    CHECK(caught->message.find("3.16.0a1 is newer than gilspy knows") != std::string::npos);
    CHECK(caught->message.find("do not read as 3.15's") != std::string::npos);
    CHECK(caught->message.find("implausible") != std::string::npos);  // the reason
  }
  SUBCASE("an older shape gilspy never knew (3.12 claiming a block) is refused") {
    const Blob b = blob_3_14(Values14{}, 0x030C00F0);
    const auto caught = catch_error([&] { gl::decode_debug_offsets(b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kUnsupportedVersion);
  }
  SUBCASE("3.12 and older need no block") {
    const auto l = gl::resolve_layout(gilspy::elf::version_from_hex(0x030C01F0), std::span<const uint8_t>());
    CHECK(l.minor == 12);
  }
}

TEST_CASE("3.14 block size: every word decoded lies inside sizeof(_Py_DebugOffsets)") {
  CHECK(p14::gc_collecting + 8 <= kBlock3_14);
  CHECK(kBlock3_14 <= gl::kDebugOffsetsReadSize);
}

TEST_CASE("live: pyenv's libpython3.13 carries a _Py_DebugOffsets that matches the 3.13 table") {
  const std::string path = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";
  const char* ci = std::getenv("CI");
  if (!std::filesystem::exists(path)) {
    if (ci != nullptr && std::string(ci) == "true") FAIL("CI=true but " << path << " is missing");
    MESSAGE("skipped: " << path << " is not installed here");
    return;
  }
  const auto image = gilspy::elf::ElfImage::open(path);
  const auto runtime = image.symbol("_PyRuntime");
  REQUIRE(runtime.has_value());
  const auto head = image.read_vaddr(runtime->value, gl::kDebugOffsetsReadSize);
  REQUIRE(head.has_value());
  const auto d = gl::decode_debug_offsets(*head);
  REQUIRE(d.has_value());
  CHECK(d->version == kV3_13_0);
  CHECK_FALSE(d->free_threaded);
  const auto version = gilspy::elf::version_from_hex(static_cast<uint32_t>(d->version));
  gl::Layout l;
  CHECK_NOTHROW(l = gl::resolve_layout(version, *head));
  CHECK(l.minor == 13);
  CHECK(l.runtime.interpreters_head == 632);
  CHECK(d->interp_gil_runtime_state == kGil3_13);
}

}  // namespace unit_debug_offsets
