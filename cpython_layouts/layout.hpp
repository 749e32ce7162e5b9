#pragma once
// The only place in gilspy that knows where CPython keeps things. One `Layout` value describes one CPython
// minor version (x86-64, glibc, default GIL build); `layout_for()` picks it and refuses what it does not
// know. All offsets are in bytes. Where a field does not exist in a version, it is std::nullopt.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "base/byte_fields.hpp"
#include "elfutils/python_binary.hpp"

namespace gilspy::layouts {

using Off = uint32_t;
using OptOff = std::optional<uint32_t>;

// struct _gil_runtime_state (same in 3.7-3.14 default builds; free-threaded builds shift it by 8). The fields
// a poll reads are typed (Field<T>); the rest are the positions and sizes of structs inside it.
struct GilLayout {
  Field<uint64_t> interval = 0;        // unsigned long, µs
  Field<uint64_t> last_holder = 8;     // PyThreadState*; not cleared on release
  Field<int32_t> locked = 16;          // int: -1 not created, 0 free, 1 held
  Field<uint64_t> switch_number = 24;  // unsigned long: +1 when a *different* thread takes it
  Off cond = 32;                       // pthread_cond_t, threads waiting for the GIL
  Off cond_size = 48;
  // Inside cond (from its start): glibc's unsigned __wrefs, set from the target's glibc (see
  // glibc_layout_for).
  Field<uint32_t> cond_wrefs = 36;
  int cond_wrefs_shift = 3;
  Off mutex = 80;  // pthread_mutex_t
  Off mutex_size = 40;
  Off switch_cond = 120;  // the dropping thread waits here for the hand-off
  Off switch_cond_size = 48;
  Off switch_mutex = 168;
  Off switch_mutex_size = 40;
  Off size = 208;
  OptField<int32_t> enabled;  // free-threaded only: int, 0 = GIL disabled
};

enum class GilHome {
  kRuntime,        // _PyRuntime + gil_offset (3.8-3.11: _PyRuntime.ceval.gil)
  kInterpPointer,  // *(interp + gil_offset) (3.12+: interp->ceval.gil, may point to the main GIL)
};

enum class GcHome { kRuntime, kInterp };
enum class GcStatsHome : uint8_t { kInline, kRing };

// struct _gc_runtime_state. The fields a poll decodes are typed (Field<T>); `Off` members are positions and
// sizes of the arrays and structs those fields sit in.
struct GcLayout {
  bool known = true;             // false where the version's GC state is not described (free-threaded 3.13)
  const char* why_unknown = "";  // when !known: why, for one line to the user
  GcHome home = GcHome::kInterp;
  Off offset = 0;               // from _PyRuntime or from the interpreter
  Field<int32_t> enabled = 12;  // int
  Off generations = 24;         // struct gc_generation[3]
  Off generation_stride = 24;
  Field<int32_t> generation_threshold = 16;  // inside one struct gc_generation
  Field<int32_t> generation_count = 20;
  Off stats = 128;  // struct gc_generation_stats[3] (kInline) or the pointer to struct gc_stats (kRing)
  Off stats_stride = 24;
  Field<int64_t> stats_collections = 0;  // Py_ssize_t, inside one stats entry
  Field<int32_t> collecting = 200;       // int
  int generations_count = 3;
  // Appended for the GC timeline (sampler/gc_tracker.hpp): the other two counters of each stats entry.
  Field<int64_t> stats_collected = 8;       // Py_ssize_t
  Field<int64_t> stats_uncollectable = 16;  // Py_ssize_t
  // 3.14.0-3.14.4 ship an incremental collector: generations[] are `young` and `old[2]`, and gc.get_count()
  // shows young, old[visited_space], old[visited_space ^ 1]. Same offsets as 3.14.5+'s generations[3];
  // only Py_Version tells the two apart.
  bool incremental = false;
  Field<int32_t> visited_space = 0;  // int, incremental only
  // Where each generation's stats entry is. kInline: generation_stats[3] at `stats` (3.8-3.14).
  // kRing (3.15+): `stats` is the offset of a pointer (gc->generation_stats) to a struct gc_stats holding
  // one ring buffer per generation whose entry at the buffer's index carries the cumulative counters
  // (stats_stride and the stats_* offsets then describe that entry).
  GcStatsHome stats_home = GcStatsHome::kInline;
  Off ring_size = 0;                        // sizeof(struct gc_stats)
  Off ring_buffer[3] = {0, 0, 0};           // each generation's buffer (its items[]) inside struct gc_stats
  int ring_items[3] = {0, 0, 0};            // entries per buffer
  Field<int8_t> ring_index[3] = {0, 0, 0};  // the buffer's index (the newest entry) inside struct gc_stats
  // Bytes from the start of the GC state that cover every field above (what a poll reads).
  Off read_size() const {
    Off end = collecting.end();
    if (stats_home == GcStatsHome::kInline) end = std::max<Off>(end, stats + 3 * stats_stride);
    if (stats_home == GcStatsHome::kRing) end = std::max<Off>(end, stats + 8);
    if (incremental) end = std::max<Off>(end, visited_space.end());
    return std::max<Off>(end, std::max<Off>(enabled.end(), generations + 3 * generation_stride));
  }
};

struct RuntimeLayout {
  Field<uint64_t> interpreters_head = 0;  // PyInterpreterState*
};

struct InterpLayout {
  Field<uint64_t> next = 0;          // PyInterpreterState*
  Field<int64_t> id = 0;             // int64_t
  Field<uint64_t> threads_head = 0;  // PyThreadState*
};

struct ThreadLayout {
  Field<uint64_t> prev = 0;  // PyThreadState*
  Field<uint64_t> next = 8;
  Field<uint64_t> interp = 16;          // PyInterpreterState*
  Field<uint64_t> thread_id = 0;        // unsigned long: pthread_t
  OptField<uint64_t> native_thread_id;  // unsigned long: the OS TID (3.11+)
  // 3.13: a bit in a byte (see holds_gil_bit), 3.14+: an int. Its width differs by version, so it is a
  // position with the bit beside it, not a typed field.
  OptOff holds_gil;
  int holds_gil_bit = -1;  // bit index when holds_gil is a bit field, -1 when it is an int
};

struct Layout {
  int major = 3;
  int minor = 0;
  const char* source = "";  // where the numbers came from
  GilHome gil_home = GilHome::kRuntime;
  Off gil_offset = 0;
  RuntimeLayout runtime;
  InterpLayout interp;
  ThreadLayout tstate;
  GilLayout gil;
  GcLayout gc;
  bool free_threaded = false;
  // For a version newer than gilspy knows whose _Py_DebugOffsets validated with the newest decoder: the minor
  // version whose decoder read them (newer_than_known_note() words it); 0 for a known version. A number, not
  // the text: the tables are constant expressions.
  int read_as_minor = 0;
};

// glibc (x86-64) structures gilspy reads, as the *target's* glibc lays them out (never this machine's: a
// container or a distribution interpreter may bring its own).
struct GlibcLayout {
  Off pthread_tid = 0x2d0;          // struct pthread.tid (2.36); only a first guess, verified against /proc
  Field<uint32_t> cond_wrefs = 36;  // pthread_cond_t.__wrefs: (value >> 3) = threads inside pthread_cond_wait
  int cond_wrefs_shift = 3;
};
inline constexpr GlibcLayout kGlibc{};  // 2.25-2.40 (checked on 2.36)
// glibc 2.41 dropped __g_refs[2] from pthread_cond_t: __wrefs moved from +36 to +28 (checked in 2.43's
// bits/thread-shared-types.h). `major`/`minor` < 0: the target's glibc is not known; the 2.36 layout is used.
GlibcLayout glibc_layout_for(int major, int minor);

inline constexpr int kOldestMinor = 8;
inline constexpr int kNewestMinor = 15;
std::string supported_range();  // "3.8 to 3.15"

// The table for a version; throws Error(kUnsupportedVersion) for one gilspy does not know.
// 3.13 and 3.14 tables are only a starting point: see debug_offsets.hpp.
const Layout& layout_for(const elf::PyVersion& version);
// Every built-in table (3.8-3.13), for tests.
const Layout* builtin_layouts(size_t* count);

}  // namespace gilspy::layouts
