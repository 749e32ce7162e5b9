// _Py_DebugOffsets of 3.15 (synthetic blocks laid out as debug_offsets_3_15.cpp's table, and the block of a
// real python3.15 when scripts/fetch_debian_pythons.sh has fetched one), versions newer than the newest known
// (read with the newest decoder when the block validates, refused with the reason otherwise), and the
// target's glibc (its version from its banner, the pthread_cond_t layout that follows).
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
#include "elfutils/glibc_version.hpp"
#include "elfutils/python_binary.hpp"
#include "sampler/target/gil_sample.hpp"
#include "support/catch_error.hpp"

namespace gl = gilspy::layouts;
using gilspy::Error;
using gilspy::ErrorKind;

// Named per file, so that the unity build can put test files together.
namespace unit_debug_offsets_3_15 {
namespace {

constexpr uint64_t kV3_15_2 = 0x030F02F0;

struct Blob {
  std::vector<uint8_t> bytes;
  explicit Blob(uint64_t version) : bytes(gl::kDebugOffsetsReadSize, 0) {
    for (size_t at = 0; at + 8 <= bytes.size(); at += 8) put(at, 0xBAD00000u + at);
    std::memcpy(bytes.data(), gl::kDebugCookie, sizeof gl::kDebugCookie);
    put(8, version);
    put(16, 0);
  }
  void put(size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, sizeof v); }
  std::span<const uint8_t> span() const { return bytes; }
};

// Positions in 3.15's block (debug_offsets_3_15.cpp).
namespace p15 {
constexpr size_t free_threaded = 0x10, runtime_size = 0x18, interpreters_head = 0x28;
constexpr size_t interp_size = 0x30, interp_id = 0x38, interp_next = 0x40, interp_threads_head = 0x48,
                 interp_gc = 0x58, interp_ceval_gil = 0x78, interp_gil = 0x80, interp_gil_enabled = 0x88,
                 interp_gil_locked = 0x90, interp_gil_holder = 0x98;
constexpr size_t tstate_size = 0xb0, tstate_prev = 0xb8, tstate_next = 0xc0, tstate_interp = 0xc8,
                 tstate_thread_id = 0xf0, tstate_native_thread_id = 0xf8, tstate_holds_gil = 0x110;
constexpr size_t gc_size = 0x2f0, gc_collecting = 0x2f8, gc_generation_stats_size = 0x308,
                 gc_generation_stats = 0x310;
constexpr size_t block_end = 0x378;  // sizeof(_Py_DebugOffsets) in 3.15
}  // namespace p15

// Plausible values, each distinct from every other.
struct Values15 {
  uint64_t runtime_size = 200000, interpreters_head = 936;
  uint64_t interp_size = 120000, id = 7272, next = 7264, threads_head = 7336, gc = 7400, ceval_gil = 16,
           gil = 7736, gil_enabled = 0, gil_locked = 7752, gil_holder = 7744;
  uint64_t tstate_size = 888, tstate_prev = 0, tstate_next = 8, tstate_interp = 16, thread_id = 176,
           native_thread_id = 184, holds_gil = 36;
  uint64_t gc_size = 176, collecting = 112, generation_stats_size = 0x460, generation_stats = 0x68;
  bool free_threaded = false;
};

Blob blob_3_15(const Values15& v, uint64_t version = kV3_15_2) {
  Blob b(version);
  b.put(p15::free_threaded, v.free_threaded ? 1 : 0);
  b.put(p15::runtime_size, v.runtime_size);
  b.put(p15::interpreters_head, v.interpreters_head);
  b.put(p15::interp_size, v.interp_size);
  b.put(p15::interp_id, v.id);
  b.put(p15::interp_next, v.next);
  b.put(p15::interp_threads_head, v.threads_head);
  b.put(p15::interp_gc, v.gc);
  b.put(p15::interp_ceval_gil, v.ceval_gil);
  b.put(p15::interp_gil, v.gil);
  b.put(p15::interp_gil_enabled, v.gil_enabled);
  b.put(p15::interp_gil_locked, v.gil_locked);
  b.put(p15::interp_gil_holder, v.gil_holder);
  b.put(p15::tstate_size, v.tstate_size);
  b.put(p15::tstate_prev, v.tstate_prev);
  b.put(p15::tstate_next, v.tstate_next);
  b.put(p15::tstate_interp, v.tstate_interp);
  b.put(p15::tstate_thread_id, v.thread_id);
  b.put(p15::tstate_native_thread_id, v.native_thread_id);
  b.put(p15::tstate_holds_gil, v.holds_gil);
  b.put(p15::gc_size, v.gc_size);
  b.put(p15::gc_collecting, v.collecting);
  b.put(p15::gc_generation_stats_size, v.generation_stats_size);
  b.put(p15::gc_generation_stats, v.generation_stats);
  return b;
}

using gilspy::test::catch_error;

gilspy::elf::PyVersion version(uint64_t hex) {
  return gilspy::elf::version_from_hex(static_cast<uint32_t>(hex));
}

bool ci() {
  const char* env = std::getenv("CI");
  return env != nullptr && std::string(env) == "true";
}

// Where scripts/fetch_debian_pythons.sh puts Debian unstable's interpreters (the same default).
std::string debian_unstable_root() {
  if (const char* env = std::getenv("GILSPY_DEBIAN_PYTHONS"); env != nullptr && *env) return env;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string base =
      cache != nullptr && *cache ? cache : std::string(home ? home : "/root") + "/.cache";
  return base + "/gilspy/debian-unstable";
}

}  // namespace

TEST_CASE("3.15 _Py_DebugOffsets: every field gilspy uses is read from its own position") {
  const Values15 v;
  const auto d = gl::decode_debug_offsets(blob_3_15(v).span());
  REQUIRE(d.has_value());
  CHECK(d->version == kV3_15_2);
  CHECK_FALSE(d->free_threaded);
  CHECK(d->read_as_minor == 0);
  CHECK(d->runtime_interpreters_head == v.interpreters_head);
  CHECK(d->interp_id == v.id);
  CHECK(d->interp_next == v.next);
  CHECK(d->interp_threads_head == v.threads_head);
  CHECK(d->interp_gc == v.gc);
  CHECK(d->interp_ceval_gil == v.ceval_gil);
  CHECK(d->interp_gil_runtime_state == v.gil);
  CHECK(d->gil_locked == v.gil_locked);
  CHECK(d->gil_holder == v.gil_holder);
  CHECK(d->tstate_prev == v.tstate_prev);
  CHECK(d->tstate_next == v.tstate_next);
  CHECK(d->tstate_interp == v.tstate_interp);
  CHECK(d->tstate_thread_id == v.thread_id);
  CHECK(d->tstate_native_thread_id == v.native_thread_id);
  REQUIRE(d->tstate_holds_gil.has_value());
  CHECK(*d->tstate_holds_gil == v.holds_gil);
  REQUIRE(d->gc_collecting.has_value());
  CHECK(*d->gc_collecting == v.collecting);
  CHECK_FALSE(d->gc_stats_inline);
}

TEST_CASE("3.15 layout: threads from the block, holds_gil an int, GC statistics behind a pointer") {
  const Values15 v;
  const gl::Layout l = gl::resolve_layout(version(kV3_15_2), blob_3_15(v).span());
  CHECK(l.minor == 15);
  CHECK(l.read_as_minor == 0);
  CHECK(gl::newer_than_known_note(version(kV3_15_2), l).empty());
  CHECK(l.gil_home == gl::GilHome::kInterpPointer);
  CHECK(l.gil_offset == v.ceval_gil);
  CHECK(l.runtime.interpreters_head == v.interpreters_head);
  CHECK(l.interp.threads_head == v.threads_head);
  CHECK(l.tstate.thread_id == v.thread_id);
  CHECK(l.tstate.native_thread_id == v.native_thread_id);
  CHECK(l.tstate.holds_gil == v.holds_gil);
  CHECK(l.tstate.holds_gil_bit == -1);
  CHECK(l.gil.locked.off == 16);
  CHECK(l.gil.last_holder.off == 8);
  // The GC state: generation stats behind a pointer, ring buffers (gc_layouts.cpp).
  CHECK(l.gc.known);
  CHECK(l.gc.offset == v.gc);
  CHECK(l.gc.enabled.off == 0);
  CHECK(l.gc.generations == 8);
  CHECK(l.gc.collecting.off == v.collecting);
  CHECK(l.gc.stats_home == gl::GcStatsHome::kRing);
  CHECK(l.gc.stats == v.generation_stats);
  CHECK(l.gc.ring_index[0].off == 704);
  CHECK(l.gc.ring_index[2].off == 1104);
  CHECK(l.gc.ring_size <= v.generation_stats_size);
  CHECK_FALSE(l.gc.incremental);
}

TEST_CASE("3.15 GC state: a block that places its fields elsewhere leaves the GC unread, not the GIL") {
  for (auto change : {+[](Values15& v) { v.collecting = 120; }, +[](Values15& v) { v.generation_stats = 96; },
                      +[](Values15& v) { v.generation_stats_size = 1000; }}) {
    Values15 v;
    change(v);
    const gl::Layout l = gl::resolve_layout(version(kV3_15_2), blob_3_15(v).span());
    CHECK_FALSE(l.gc.known);
    CHECK(std::string(l.gc.why_unknown).size() > 10);
    CHECK(l.gil.locked.off == 16);
  }
}

TEST_CASE("3.15 _Py_DebugOffsets: offsets outside their structure, and short reads, are refused") {
  struct Bad {
    size_t at;
    uint64_t value;
    const char* field;
  };
  const Values15 v;
  for (const Bad& bad : {Bad{p15::interp_threads_head, v.interp_size, "interpreter_state.threads_head"},
                         Bad{p15::tstate_thread_id, v.tstate_size + 8, "thread_state.thread_id"},
                         Bad{p15::tstate_holds_gil, v.tstate_size, "thread_state.holds_gil"},
                         Bad{p15::gc_collecting, v.gc_size, "gc.collecting"},
                         Bad{p15::interp_gil_holder, v.gil - 8, "locked/holder"},
                         Bad{p15::free_threaded, 2, "free_threaded"}}) {
    CAPTURE(bad.field);
    Blob b = blob_3_15(v);
    b.put(bad.at, bad.value);
    const auto caught = catch_error([&] { gl::decode_debug_offsets(b.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kLayoutMismatch);
    CHECK(caught->message.find(bad.field) != std::string::npos);
    CHECK(caught->message.find("3.15") != std::string::npos);
  }
  const Blob full = blob_3_15(v);
  const std::vector<uint8_t> cut(full.bytes.begin(), full.bytes.begin() + p15::gc_collecting);
  const auto caught = catch_error([&] { gl::decode_debug_offsets(cut); });
  REQUIRE(caught.has_value());
  CHECK(caught->kind == ErrorKind::kLayoutMismatch);
  CHECK(p15::block_end <= gl::kDebugOffsetsReadSize);
}

TEST_CASE("a version newer than the newest known: read with the newest decoder when its block validates") {
  REQUIRE(gl::kNewestMinor == 15);
  const Values15 v;
  const Blob b = blob_3_15(v, 0x031001F0);  // 3.16.1 with 3.15's block shape
  const auto d = gl::decode_debug_offsets(b.span());
  REQUIRE(d.has_value());
  CHECK(d->read_as_minor == 15);
  CHECK(d->interp_threads_head == v.threads_head);
  const gl::Layout l = gl::resolve_layout(version(0x031001F0), b.span());
  CHECK(l.minor == 16);
  CHECK(l.tstate.native_thread_id == v.native_thread_id);
  CHECK(l.read_as_minor == 15);
  const std::string note = gl::newer_than_known_note(version(0x031001F0), l);
  CHECK(note.find("Python 3.16.1 is newer than gilspy knows") != std::string::npos);
  CHECK(note.find("3.15's") != std::string::npos);
  CHECK(note.find('\n') == std::string::npos);  // one line

  SUBCASE("...and refused, with the reason, when it does not") {
    Blob moved = b;
    moved.put(p15::tstate_size, 64);  // thread_id (+176) no longer fits: the block changed shape
    const auto caught = catch_error([&] { gl::resolve_layout(version(0x031001F0), moved.span()); });
    REQUIRE(caught.has_value());
    CHECK(caught->kind == ErrorKind::kUnsupportedVersion);
    CHECK(caught->message.find("3.16.1") != std::string::npos);
    CHECK(caught->message.find("thread_state.") != std::string::npos);
  }
}

TEST_CASE("glibc: version from the banner, pthread_cond_t.__wrefs from the version") {
  using gilspy::elf::glibc_version_from_banner;
  const std::string rodata = std::string("junk\0", 5) +
                             "GNU C Library (Debian GLIBC 2.43-7) stable release version 2.43.\n" +
                             std::string("\0more", 5);
  const auto v = glibc_version_from_banner(rodata);
  REQUIRE(v.has_value());
  CHECK(v->major == 2);
  CHECK(v->minor == 43);
  CHECK(v->text() == "2.43");
  CHECK_FALSE(glibc_version_from_banner("GNU C Library without a version").has_value());
  CHECK_FALSE(glibc_version_from_banner("release version 2.36.").has_value());  // not glibc's banner

  CHECK(gl::glibc_layout_for(2, 36).cond_wrefs == 36);
  CHECK(gl::glibc_layout_for(2, 40).cond_wrefs == 36);
  CHECK(gl::glibc_layout_for(2, 41).cond_wrefs == 28);  // __g_refs[2] removed
  CHECK(gl::glibc_layout_for(2, 43).cond_wrefs == 28);
  CHECK(gl::glibc_layout_for(-1, -1).cond_wrefs == gl::kGlibc.cond_wrefs);
}

TEST_CASE("live: Debian unstable's python3.15 and its glibc, as fetched by scripts/fetch_debian_pythons.sh") {
  const std::string root = debian_unstable_root() + "/root";
  const std::string python = root + "/usr/bin/python3.15";
  const std::string libc = root + "/usr/lib/x86_64-linux-gnu/libc.so.6";
  if (!std::filesystem::exists(python) || !std::filesystem::exists(libc)) {
    if (ci()) FAIL("CI=true but " << python << " is missing (scripts/fetch_debian_pythons.sh)");
    MESSAGE("skipped: " << python << " is not fetched here");
    return;
  }
  const auto image = gilspy::elf::ElfImage::open(python);
  const auto runtime = image.symbol("_PyRuntime");
  REQUIRE(runtime.has_value());
  const auto head = image.read_vaddr(runtime->value, gl::kDebugOffsetsReadSize);
  REQUIRE(head.has_value());
  const auto d = gl::decode_debug_offsets(*head);
  REQUIRE(d.has_value());
  const auto pv = version(d->version);
  CHECK(pv.minor == 15);
  const gl::Layout l = gl::resolve_layout(pv, *head);
  // design.md §7, from the live 3.15.2 (independent of the block): thread_id 0xb0, native_thread_id 0xb8.
  CHECK(l.tstate.thread_id == 0xb0);
  CHECK(l.tstate.native_thread_id == 0xb8);
  CHECK(l.gil.locked.off == 16);

  const auto libc_image = gilspy::elf::ElfImage::open(libc);
  const auto rodata = libc_image.section_bytes(".rodata");
  REQUIRE(rodata.has_value());
  const auto g = gilspy::elf::glibc_version_from_banner(
      std::string_view(reinterpret_cast<const char*>(rodata->data()), rodata->size()));
  REQUIRE(g.has_value());
  CHECK(g->major == 2);
  CHECK(g->minor >= 41);  // newer than this machine's 2.36: the reason gilspy must not use the host's layout
}

TEST_CASE("free-threaded 3.15: the GIL's `enabled` word decides whether there is a GIL to record") {
  Values15 v;
  v.free_threaded = true;
  v.gil_locked = v.gil + 24;  // `int enabled` first: every field moves by 8
  v.gil_holder = v.gil + 16;
  const gl::Layout l = gl::resolve_layout(version(kV3_15_2), blob_3_15(v).span());
  REQUIRE(l.free_threaded);
  REQUIRE(l.gil.enabled.has_value());
  CHECK(l.gil.enabled->off == 0);
  CHECK(l.gil.locked.off == 24);

  // A GIL struct as a free-threaded interpreter holds it: enabled, interval 5000 µs, held (locked 1).
  std::vector<uint8_t> gil(l.gil.size, 0);
  auto put32 = [&](uint32_t at, int32_t x) { std::memcpy(gil.data() + at, &x, 4); };
  auto put64 = [&](uint32_t at, uint64_t x) { std::memcpy(gil.data() + at, &x, 8); };
  put64(l.gil.interval.off, 5000);
  put64(l.gil.last_holder.off, 0x7f0000001000);
  put32(l.gil.locked.off, 1);
  SUBCASE("enabled = 1 (PYTHON_GIL=1): a GIL like any other") {
    put32(l.gil.enabled->off, 1);
    const auto s = *gilspy::sampler::decode_gil(gil, l.gil);
    CHECK(s.enabled);
    CHECK(s.holder() == 0x7f0000001000);
    CHECK(s.interval_us == 5000);
  }
  SUBCASE("enabled = 0: no GIL, nothing to record") {
    put32(l.gil.enabled->off, 0);
    CHECK_FALSE(gilspy::sampler::decode_gil(gil, l.gil)->enabled);
  }
}

}  // namespace unit_debug_offsets_3_15
