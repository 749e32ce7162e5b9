#include "cli/record_json.hpp"

#include <cstdio>

#include "sampler/target/interpreter.hpp"

namespace gilspy::cli {

using nlohmann::json;

json target_json(const SessionTarget& t) {
  return {{"pid", t.pid},
          {"ns_pid", t.ns_pid != 0 ? json(t.ns_pid) : json(nullptr)},
          {"rank", t.rank},
          {"python_version", t.interp != nullptr ? t.interp->binary.version.text() : std::string()},
          {"command", t.command}};
}

void RecordJsonSink::put(const json& line) {
  if (gone_) return;
  // ensure_ascii: target text (commands, paths) reaches the terminal as \uXXXX, never as control characters.
  const std::string text = line.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
  if (std::fputs(text.c_str(), stdout) < 0 || std::fflush(stdout) != 0) gone_ = true;
}

json RecordJsonSink::skipped() const {
  json out = json::array();
  for (const auto& s : session_.skipped())
    out.push_back({{"pid", s.pid}, {"reason", s.reason}, {"named", s.named}});
  return out;
}

void RecordJsonSink::start(const SessionTarget& target) {
  targets_.push_back(&target);
  if (started_) put({{"event", "found"}, {"target", target_json(target)}});
}

void RecordJsonSink::stats(const LiveStats&) {
  // After the first drain: the poll loop runs, every target's file is open.
  if (started_) return;
  started_ = true;
  json targets = json::array();
  for (const SessionTarget* t : targets_) targets.push_back(target_json(*t));
  put({{"event", "started"}, {"targets", std::move(targets)}, {"skipped", skipped()}});
}

void RecordJsonSink::finished_target(const FinishedTarget& done) {
  json t = target_json(done.target);
  t["raw"] = done.raw_path;
  t["trace"] = done.trace_path.empty() ? json(nullptr) : json(done.trace_path);
  // A file that could not be written (a full disk): why, and what the raw file lacks.
  if (!done.raw_problem.empty()) {
    t["raw_error"] = done.raw_problem;
    t["raw_events"] = {{"recorded", done.events}, {"in_file", done.events_in_file}};
  }
  if (!done.trace_problem.empty()) t["trace_error"] = done.trace_problem;
  t["stop_reason"] = done.figures.stop_reason;
  t["summary"] = done.summary.to_json(done.target.rate_hz, done.figures);
  finished_.push_back(std::move(t));
}

void RecordJsonSink::print_finished(int exit_status, const std::string& message,
                                    const SessionOutcome& outcome) {
  put({{"event", "finished"},
       {"exit_status", exit_status},
       {"message", message},
       {"stop_reason", stop_reason_},
       {"elapsed_s", outcome.elapsed_s},
       {"targets", finished_},
       {"skipped", skipped()}});
}

}  // namespace gilspy::cli
