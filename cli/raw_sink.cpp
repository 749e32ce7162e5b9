#include "cli/raw_sink.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/output_file.hpp"
#include "convert/chrome_trace.hpp"
#include "gilspy_version.hpp"
#include "sampler/gil/process_sampler.hpp"

namespace gilspy::cli {

void ensure_output_dir(const std::string& dir) {
  // What exists of the path is walked first as every output file's folder is (open_output_dir()):
  // create_directories() alone would follow a link another user planted on the way.
  std::error_code ec;
  std::filesystem::path existing = dir;
  while (existing.has_relative_path() &&
         !std::filesystem::exists(std::filesystem::symlink_status(existing, ec))) {
    existing = existing.parent_path();
  }
  const std::string walk = existing.empty() ? std::string(".") : existing.string();
  try {
    ::close(open_output_dir(walk));
  } catch (const Error& e) {
    throw Error(ErrorKind::kIo, "cannot write to the output directory " + dir + ": " + e.what());
  }
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error(ErrorKind::kIo,
                "cannot write to the output directory " + dir + ": " + errno_text(ec.value()));
  // access() says why: EACCES (permission denied) or EROFS (read-only file system) among others.
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int e = errno;
    throw Error(ErrorKind::kIo,
                "cannot write to the output directory " + dir + ": " +
                    (e == EROFS ? std::string("it is on a read-only file system") : errno_text(e)));
  }
}

RawFileSink::RawFileSink(std::string output_dir, bool write_trace, mode_t file_mode,
                         std::function<void(const FinishedTarget&)> on_finished)
    : output_dir_(std::move(output_dir)),
      write_trace_(write_trace),
      file_mode_(file_mode),
      on_finished_(std::move(on_finished)) {}

RawFileSink::~RawFileSink() = default;

void RawFileSink::start(const SessionTarget& t) {
  File& f = files_[t.id];
  f.target = &t;
  f.summary.gc().set_list_threshold(gc_threshold_ns_);
  const std::string base = fmt::format("{}/GIL_{}_rank_{}", output_dir_, t.pid, t.rank);
  f.raw_path = base + ".json";
  f.trace_path = base + ".trace.json";
  raw::Meta meta;
  meta.gilspy_version = kGilspyVersion;
  meta.pid = t.pid;
  meta.rank = t.rank;
  meta.python_version = t.interp->binary.version.text();
  meta.python_binary = t.interp->binary.path;
  meta.build = t.interp->binary.shared_library ? "shared" : "static";
  meta.free_threaded = t.interp->layout.free_threaded;
  meta.command = t.command;
  meta.hostname = t.hostname;
  meta.monotonic_ns = t.monotonic_ns;
  meta.realtime_ns = t.realtime_ns;
  meta.rate_hz = t.rate_hz;
  meta.switch_interval_us = t.interp->first_gil.interval_us;
  meta.gil_addr = t.interp->gil_addr;
  meta.ns_pid = t.ns_pid;
  meta.mode = t.sampler != nullptr && t.sampler->exact() != nullptr ? "exact" : "sampled";
  try {
    OutputFile::check_replaceable(f.trace_path);  // now, not after the whole recording
    f.writer = std::make_unique<raw::Writer>(f.raw_path, meta, raw::WriterOptions{.mode = file_mode_});
  } catch (const Error& e) {
    const std::string partial = f.raw_path + ".partial";
    // Nothing was recorded yet: take back the files of the targets set up before this one.
    for (auto& [id, other] : files_) {
      if (other.writer) other.writer->discard();
    }
    files_.clear();
    if (e.kind() == ErrorKind::kBusy) {
      throw Error(ErrorKind::kBusy, fmt::format("pid {} is already being recorded into {} (another gilspy is "
                                                "writing {})",
                                                t.pid, output_dir_, partial));
    }
    throw;
  }
}

void RawFileSink::record(const SessionTarget& t, const raw::Record& r) {
  File& f = files_.at(t.id);
  f.summary.add(r);
  f.writer->write(r);
}

void RawFileSink::stats(const LiveStats&) {
  for (auto& [id, f] : files_) flush(f);
}

// A disk that refuses writes is said at once (one line), and again when it takes them again.
void RawFileSink::flush(File& f) {
  const std::optional<Error> e = f.writer->flush();
  if (e && !f.write_failing) {
    f.write_failing = true;
    f.lost_when_failing = f.writer->lost_records();
    fmt::print(stderr,
               "gilspy: warning: {}; recording on, keeping events in memory (up to {} MiB) until they "
               "can be written\n",
               e->what(), raw::WriterOptions{}.max_pending_bytes >> 20);
  } else if (!e && f.write_failing) {
    f.write_failing = false;
    const uint64_t lost = f.writer->lost_records() - f.lost_when_failing;
    fmt::print(stderr, "gilspy: {} is being written again{}\n", f.writer->partial_path(),
               lost == 0 ? std::string("; no event was lost")
                         : fmt::format("; {} events were lost meanwhile (memory bound reached)", lost));
  }
}

// Finishes every file, even when the session failed or another file cannot be finished: what was recorded
// stays readable. Every file first, then the reports: a report that cannot be printed must not leave another
// target's files unfinished. Every target's summary is reported, also where its files could not be written
// (a full disk: the summary is built from the records, not from the file), with what its files lack. The
// first error is thrown at the end.
void RawFileSink::finish(const SessionEnd& end) {
  std::optional<Error> first_error;
  std::vector<Finished> finished;
  for (auto& [id, f] : files_) {
    Finished done{.file = &f, .figures = end.figures.at(id)};
    try {
      finish_file(f, end, done);
    } catch (const Error& e) {
      if (!first_error) first_error = e;
    }
    finished.push_back(std::move(done));
  }
  for (const Finished& d : finished) {
    on_finished_({.target = *d.file->target,
                  .raw_path = d.raw_problem.empty() ? d.file->raw_path : d.file->writer->partial_path(),
                  .trace_path = write_trace_ && d.trace_problem.empty() ? d.file->trace_path : "",
                  .summary = d.file->summary,
                  .figures = d.figures,
                  .raw_problem = d.raw_problem,
                  .trace_problem = d.trace_problem,
                  .events = d.file->writer->events(),
                  .events_in_file = d.file->writer->events_in_file()});
  }
  if (first_error) throw *first_error;
}

void RawFileSink::finish_file(File& f, const SessionEnd& end, Finished& done) {
  // Events lost to a full disk are missing from the file like those lost to queue overflow.
  const uint64_t queue_dropped = done.figures.dropped_events;
  done.figures.dropped_events += f.writer->lost_records();
  // A target that ended by itself (exited, exec'd) was recorded up to its last record.
  const bool ended_first =
      f.target->sampler != nullptr && f.target->sampler->end_cause() != sampler::TargetEnd::kRunning;
  f.summary.set_span(f.target->attached_ns,
                     ended_first ? std::min(end.end_ns, f.summary.last_ts()) : end.end_ns);
  try {
    f.writer->finish(f.summary.to_json(f.target->rate_hz, done.figures));
  } catch (const Error& e) {
    // What the .partial lacks, exactly: the events lost at the memory bound and those still in memory.
    done.figures.dropped_events = queue_dropped + (f.writer->events() - f.writer->events_in_file());
    done.raw_problem = e.what();
    if (write_trace_) done.trace_problem = "not made from an incomplete raw file";
    throw;
  }
  if (f.writer->lost_records() != 0) {
    fmt::print(stderr,
               "gilspy: warning: {} lacks {} events that could not be written (the disk refused them and the "
               "memory bound was reached); its summary still counts them\n",
               f.raw_path, f.writer->lost_records());
  }
  if (!write_trace_) return;
  try {
    convert::convert_to_chrome_trace({f.raw_path}, f.trace_path, {.mode = file_mode_});
  } catch (const Error& e) {
    done.trace_problem = e.what();
    throw;
  }
}

}  // namespace gilspy::cli
