#pragma once
// `gilspy record --json`: what the recording did, for programs (the Python API, scripts), as JSON lines on
// stdout instead of the summary table; notes and errors stay on stderr.
//
//   {"event":"started","targets":[{"pid":..,"ns_pid":..,"rank":..,"python_version":..,"command":..}],
//    "skipped":[{"pid":..,"reason":..}]}                    once polling has begun
//   {"event":"found","target":{...}}                       each process found later (no -p, --subprocesses)
//   {"event":"finished","exit_status":N,"message":"..","stop_reason":"..","elapsed_s":..,
//    "targets":[{...,"raw":"..","trace":".."|null,"stop_reason":"..","summary":{...}}],"skipped":[...]}
//
// "summary" is the raw file's (docs/raw-format.md). Target text is JSON-escaped with every non-ASCII
// character as \uXXXX, so the lines are safe on a terminal too. A line that cannot be written ends the
// printing only.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/raw_sink.hpp"
#include "cli/session.hpp"
#include "cli/sink.hpp"

namespace gilspy::cli {

class RecordJsonSink final : public Sink {
 public:
  explicit RecordJsonSink(const Session& session) : session_(session) {}

  void start(const SessionTarget& target) override;
  void record(const SessionTarget&, const raw::Record&) override {}
  void stats(const LiveStats& live) override;
  void finish(const SessionEnd& end) override { stop_reason_ = end.stop_reason; }

  // From the raw-file sink, as each target's files are complete.
  void finished_target(const FinishedTarget& done);
  // The last line, once the exit status is known.
  void print_finished(int exit_status, const std::string& message, const SessionOutcome& outcome);

 private:
  void put(const nlohmann::json& line);
  nlohmann::json skipped() const;
  const Session& session_;
  std::vector<const SessionTarget*> targets_;
  bool started_ = false;
  nlohmann::json finished_ = nlohmann::json::array();
  bool gone_ = false;
  std::string stop_reason_;
};

// {"pid", "ns_pid", "rank", "python_version", "command"} of a target.
nlohmann::json target_json(const SessionTarget& t);

}  // namespace gilspy::cli
