#pragma once
// The raw-file sink of `gilspy record`: per target, GIL_<pid>_rank_<rank>.json (raw/raw_format.hpp) written
// as the records come, its summary, and at the end the Chrome trace beside it.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cli/sink.hpp"
#include "raw/raw_format.hpp"
#include "raw/summary.hpp"

namespace gilspy::cli {

// What one target's files hold once finished: for the end summary.
struct FinishedTarget {
  const SessionTarget& target;
  std::string raw_path;
  std::string trace_path;  // "" with no trace
  const raw::SummaryBuilder& summary;
  const raw::LoopFigures& figures;
  // Why the raw file could not be finished (raw_path is then its .partial) or the trace not written; ""
  // when they were.
  std::string raw_problem = {}, trace_problem = {};
  uint64_t events = 0, events_in_file = 0;  // the raw file's events: recorded, and wholly in the file
};

// Creates `dir` if needed; throws Error(kIo) naming it and why when it cannot be written to (permission
// denied, read-only file system, ...).
void ensure_output_dir(const std::string& dir);

class RawFileSink final : public Sink {
 public:
  // `on_finished` is called per target once its files are complete (the end summary prints from it).
  // Files are created with `file_mode` (base/output_file.hpp: never through a link in the folder). When the
  // disk refuses writes (full, read-only), the sink says so on stderr at once, keeps the records in memory up
  // to a bound (raw::WriterOptions) and writes them when it can; at the end it says what was lost.
  RawFileSink(std::string output_dir, bool write_trace, mode_t file_mode,
              std::function<void(const FinishedTarget&)> on_finished);
  ~RawFileSink() override;

  void start(const SessionTarget& target) override;
  void record(const SessionTarget& target, const raw::Record& r) override;  // ThreadState is not stored
  void stats(const LiveStats& live) override;  // flushes: a killed run loses 50 ms
  void finish(const SessionEnd& end) override;
  // The summary lists garbage collections at least this long (`record --gc-threshold-ms`); before start().
  void set_gc_threshold_ns(int64_t ns) { gc_threshold_ns_ = ns; }

 private:
  struct File {
    const SessionTarget* target = nullptr;
    std::string raw_path, trace_path;
    std::unique_ptr<raw::Writer> writer;
    raw::SummaryBuilder summary;
    bool write_failing = false;  // said on stderr; said again when it recovers
    uint64_t lost_when_failing = 0;
  };
  // One target's files at the end, and what became of them.
  struct Finished {
    File* file = nullptr;
    raw::LoopFigures figures;
    std::string raw_problem = {}, trace_problem = {};
  };
  void flush(File& f);
  // Finishes f's raw file and writes its trace; throws the first Error, said in `done` too.
  void finish_file(File& f, const SessionEnd& end, Finished& done);
  std::string output_dir_;
  bool write_trace_;
  mode_t file_mode_;
  std::function<void(const FinishedTarget&)> on_finished_;
  std::map<raw::TargetId, File> files_;  // in the order targets started (ids grow)
  int64_t gc_threshold_ns_ = -1;
};

}  // namespace gilspy::cli
