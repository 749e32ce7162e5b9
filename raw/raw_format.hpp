#pragma once
// The raw recording format (docs/raw-format.md explains it for users; the record kinds are raw/records.hpp).
// One file per target process, `GIL_<pid>_rank_<rank>.json`: a JSON object whose first line names the format,
// whose second line is the metadata, then one event per line, then the summary:
//
//   {"format":"gilspy-raw","format_version":3,
//   "meta":{...},
//   "events":[
//   ["T",tid,ts,"name",tstate],      thread seen (tstate: address of its PyThreadState)
//   ["H",tid,ts,dur],                the thread held the GIL from ts for dur
//   ["W",tid,ts,dur],                the thread waited for the GIL (inside take_gil) from ts for dur
//   ["N",ts,n],                      n threads wait on the GIL's condition variable from ts on
//   ["E",tid,ts],                    the thread is gone (or the recording ended)
//   ["S",ts,polls,late,missed,seen,total]   counters so far (at each stats tick, 1 s by default)
//   ["P",ts,dur],                    the whole process was stopped (SIGSTOP, a debugger) (format_version 2)
//   ["G",...], ["GI",...], ["GC",...], ["GS",...]   garbage collections, counts, settings (format_version 3;
//                                    raw/gc_records.hpp)
//   ["F",id,ts,"qualname","file",line,first_line]   a frame: a function at a line (format_version 3)
//   ["FS",id,ts,truncated,[frame ids]]              a stack, innermost frame first (format_version 3)
//   ["K",tid,ts,since,"h"|"w",stack]                a stack sample of the hold / wait begun at since (3)
//   ["KN",tid,ts,"name","os_name"]   the thread's Python name (threading.Thread.name) from ts on (3)
//   ["KC",ts,walks,samples,torn,invalid,skipped,truncated,frames,bytes,read_ns,name_reads,reused]   stack
//   costs (3)
//   ["CD",ts,[names],{name:why},max] the counters of the "C" lines, and those that could not be counted (3)
//   ["C",tid,ts,dur,role,time,cpu,delay,slices,holds,preempted,preempted_ns,[values]]  a thread's figures in
//                                    one GIL role over a ~100 ms window (3)
//   ["CS",tid,ts,voluntary,involuntary]  a thread's context switches so far (3)
//   ["F"]],                          end of events
//   "summary":{...}}
//
// ts and dur are integers, nanoseconds; ts counts from meta.clock.monotonic_ns (CLOCK_MONOTONIC at the start,
// taken together with meta.clock.realtime_ns, CLOCK_REALTIME, so a reader can place events on the Unix
// epoch). Events of one thread come in time order; events of different threads may interleave out of order
// (an interval is written when it ends). ThreadState records are not stored. The file is written under
// `<name>.partial`, flushed by the recorder at each drain of the sampler's queue (every 50 ms), and renamed
// when complete: a killed recording leaves a `.partial` that readers recover up to its last full line.
//
// Versions: 2 added "P" (1 files read the same); 3 added the "G" kinds (garbage collections), the stack
// kinds "F" (with fields: ["F"] alone still ends the events), "FS", "K", "KN", "KC", and the counter kinds
// "CD", "C", "CS" (raw/counter_lines.hpp) (2 files read the same); the reader accepts every version up to
// kFormatVersion, says which one it read (ReadResult::format_version), and refuses newer files by name. A
// line longer than its kind needs is read (fields are only appended), so new counters at the end of "S" need
// no new version; a new stored kind does (older readers reject unknown kinds).
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <istream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/output_file.hpp"
#include "raw/records.hpp"

namespace gilspy::raw {

inline constexpr const char* kFormatName = "gilspy-raw";
inline constexpr int kFormatVersion = 3;

struct Meta {
  std::string gilspy_version;
  int64_t pid = 0;
  int64_t rank = 0;
  std::string python_version;
  std::string python_binary;
  std::string build;  // "shared" (libpython) or "static"
  bool free_threaded = false;
  std::string command;  // the target's command line
  std::string hostname;
  int64_t monotonic_ns = 0;
  int64_t realtime_ns = 0;
  double rate_hz = 0;
  uint64_t switch_interval_us = 0;
  uint64_t gil_addr = 0;
  int64_t ns_pid = 0;  // the target's pid in its own PID namespace (a container) when that differs from pid
  std::string mode = "sampled";  // "exact": holds and waits from uprobes (--exact)
};
nlohmann::json to_json(const Meta& m);
Meta meta_from_json(const nlohmann::json& j);  // throws Error(kBadInput) naming the missing field

// The raw line of a record, without separator; nullopt for a kind raw files do not store (ThreadState).
std::optional<std::string> record_line(const Record& r);

struct WriterOptions {
  mode_t mode = kDefaultOutputMode;  // of the file: it holds the target's command line
  // What may wait in memory while the disk refuses writes (full, gone read-only); records past it are lost
  // (and counted) rather than let memory grow without bound.
  size_t max_pending_bytes = size_t{64} << 20;
};

// Writes one raw file. Not thread-safe; used by the recorder's writer side only.
class Writer {
 public:
  // Creates `final_path + ".partial"` (base/output_file.hpp: never through a link, mode from options) and
  // writes the header. Throws Error(kBusy) when another gilspy is writing that file now, Error(kIo) when it
  // cannot be created or `final_path` exists and must not be replaced.
  Writer(std::string final_path, const Meta& meta, WriterOptions options = {});
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  void write(const Record& r);  // skips the kinds raw files do not store; never does I/O while writes fail
  // Writes what is buffered. nullopt when it all went out; else why not (Error(kIo) naming the file and the
  // cause, e.g. no space left on device): what the disk did not take stays in memory for the next flush.
  std::optional<Error> flush();
  // Ends the events, writes the summary, closes and renames to the final path. Throws Error(kIo); then the
  // .partial stays with what could be written.
  void finish(const nlohmann::json& summary);
  // Removes the .partial: for a recording that never started (another target could not be set up).
  void discard();
  const std::string& final_path() const { return final_path_; }
  const std::string& partial_path() const { return partial_path_; }
  uint64_t lost_records() const { return lost_records_; }  // not written: memory bound reached
  size_t pending_bytes() const { return pending_.size(); }
  // Events handed to write() that the file stores (a line each), and those of them wholly in the file so far
  // (a line the disk took only part of is not: a reader drops it). After a finish() that threw, the
  // difference is what the .partial lacks.
  uint64_t events() const { return events_ + lost_records_; }
  uint64_t events_in_file() const { return events_in_file_; }

 private:
  void write_line(const std::string& line);
  void count_written(size_t bytes);  // `bytes` of pending_ went out: which event lines are now in the file
  std::string final_path_;
  std::string partial_path_;
  WriterOptions options_;
  OutputFile file_;
  std::string pending_;   // written out at flush(), or once it reaches 64 KiB
  bool failing_ = false;  // the last write-out failed: wait for the next flush() to retry
  uint64_t lost_records_ = 0;
  bool first_event_ = true;
  uint64_t events_ = 0, events_in_file_ = 0;  // lines appended to pending_; lines wholly written
  // The sizes of the event lines in pending_, oldest first, after its first `head_bytes_` (the header, or
  // the rest of a line the disk took part of: `head_is_event_`).
  std::deque<size_t> line_sizes_;
  size_t head_bytes_ = 0;
  bool head_is_event_ = false;
};

// What reading a file found.
struct ReadResult {
  int format_version = 0;  // as the file says (1 to 3 so far); 0 when it does not say
  bool complete = false;   // the whole document parsed, summary included
  bool corrupt = false;    // (salvage only) damaged, not merely cut short: see problem
  size_t records = 0;
  std::optional<nlohmann::json> summary;
  std::string problem;         // when !complete: why the rest could not be read, and where
  uint64_t bytes = 0;          // when !complete: the file's length
  uint64_t damage_offset = 0;  // when corrupt: the byte (from 0) where reading stopped
  uint64_t unread_lines = 0;   // when corrupt: lines after it that were not read (about one event each)
};

struct ReadOptions {
  // Return what precedes damage in a file (corrupt = true) instead of throwing Error(kCorrupt).
  bool salvage = false;
};

// Streams a raw file: `on_meta` once, then `on_record` per event, memory independent of the file's length.
// A file cut short (a killed recording: it stops parsing at its very end and has no end marker) yields
// everything up to its last complete event and complete == false. A file damaged after its meta (a byte that
// does not parse before its end, an event that is wrong, values nested too deep, or a cut in a file that was
// finished) is corrupt: Error(kCorrupt) naming the byte offset (from 0), or with `salvage` what came before
// it. Throws Error(kBadInput) when the file is not a gilspy raw file at all (empty, garbage, wrong shape, no
// meta).
ReadResult read(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                const std::function<void(const Record&)>& on_record, const ReadOptions& options = {});

}  // namespace gilspy::raw
