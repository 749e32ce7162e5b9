#include "cli/raw_sink.hpp"

#include <unistd.h>

#include <exception>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "convert/chrome_trace.hpp"
#include "gilspy_version.hpp"

namespace gilspy::cli {

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || ::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw Error(ErrorKind::kIo, "cannot write to the output directory " + dir +
                                    (ec ? ": " + ec.message() : ": permission denied"));
  }
}

RawFileSink::RawFileSink(std::string output_dir, bool write_trace,
                         std::function<void(const FinishedTarget&)> on_finished)
    : output_dir_(std::move(output_dir)), write_trace_(write_trace), on_finished_(std::move(on_finished)) {}

RawFileSink::~RawFileSink() = default;

void RawFileSink::start(const SessionTarget& t) {
  File& f = files_[t.id];
  f.target = &t;
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
  f.writer = std::make_unique<raw::Writer>(f.raw_path, meta);
}

void RawFileSink::record(const SessionTarget& t, const raw::Record& r) {
  File& f = files_.at(t.id);
  f.summary.add(r);
  f.writer->write(r);
}

void RawFileSink::stats(const LiveStats&) {
  for (auto& [id, f] : files_) f.writer->flush();
}

// Finishes every file, even when the session failed: what was recorded stays readable.
void RawFileSink::finish(const SessionEnd& end) {
  // Every file first, then the reports: a report that cannot be printed (stdout closed) or a file that cannot
  // be finished must not leave the other targets' files unfinished. The first failure is rethrown after.
  std::exception_ptr first_error;
  std::vector<File*> finished;
  for (auto& [id, f] : files_) {
    try {
      const raw::LoopFigures& fig = end.figures.at(id);
      f.summary.set_end(end.end_ns);
      f.writer->finish(f.summary.to_json(f.target->rate_hz, fig));
      if (write_trace_) convert::convert_to_chrome_trace({f.raw_path}, f.trace_path);
      finished.push_back(&f);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  for (File* f : finished) {
    on_finished_({*f->target, f->raw_path, write_trace_ ? f->trace_path : "", f->summary,
                  end.figures.at(f->target->id)});
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace gilspy::cli
