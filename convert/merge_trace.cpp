#include "convert/merge_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/gzip_io.hpp"
#include "convert/input_events.hpp"
#include "convert/json_writer.hpp"
#include "convert/merge_lanes.hpp"
#include "convert/namespace_lanes.hpp"
#include "convert/trace_survey.hpp"
#include "gilspy_version.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

// Pass 2: the trace copied, traceEvents first, the GIL events at the end of its events.
class TraceCopy final : public TraceScanHandler {
 public:
  TraceCopy(JsonWriter& out, std::function<void(size_t)> gil_events)
      : out_(out), gil_events_(std::move(gil_events)) {}

  void shape(TraceShape s) override { shape_ = s; }
  void member(std::string_view, std::string_view text) override {
    if (!events_done_) {
      before_.emplace_back(text);  // written after traceEvents
    } else {
      write(",\n  ");
      write(text);
    }
  }
  void events_begin() override { write(shape_ == TraceShape::kObject ? "{\n  \"traceEvents\": [" : "["); }
  void event(std::string_view text) override {
    write(events_ == 0 ? "\n  " : ",\n  ");
    write(text);
    ++events_;
  }
  void events_end() override {
    gil_events_(events_);  // each after ",\n", as EventWriter separates them
    write(shape_ == TraceShape::kObject ? "\n  ]" : "\n]");
    for (const auto& m : before_) {
      write(",\n  ");
      write(m);
    }
    before_.clear();
    events_done_ = true;
  }
  size_t events() const { return events_; }

 private:
  // The trace's own text, byte for byte.
  void write(std::string_view text) {
    out_.raw(text);
    out_.maybe_drain();
  }

  JsonWriter& out_;
  std::function<void(size_t)> gil_events_;
  TraceShape shape_ = TraceShape::kObject;
  std::vector<std::string> before_;
  bool events_done_ = false;
  size_t events_ = 0;
};

struct Match {
  bool matched = false;
  int64_t pid = 0;
  std::string by;
  bool namespace_ids = false;
};

Match match_input(const raw::Meta& m, const MergeOptions& o, const TraceSurvey& t) {
  for (const auto& [gil, trace] : o.pid_map) {
    if (gil != m.pid && (m.ns_pid == 0 || gil != m.ns_pid)) continue;
    const std::optional<int64_t> key = t.find_process(trace);
    if (!key) {
      throw Error(ErrorKind::kBadInput,
                  fmt::format("--pid-map {}:{}: {} has no process {}", gil, trace, o.trace, trace));
    }
    const bool ns = o.pid_namespace ? *o.pid_namespace == PidNamespace::kTarget : m.ns_pid != 0;
    return {true, *key, "--pid-map", ns && m.ns_pid != 0};
  }
  const bool target_ok = !o.pid_namespace || *o.pid_namespace == PidNamespace::kTarget;
  const bool host_ok = !o.pid_namespace || *o.pid_namespace == PidNamespace::kHost || m.ns_pid == 0;
  if (target_ok && m.ns_pid != 0 && t.processes.contains(m.ns_pid)) return {true, m.ns_pid, "ns_pid", true};
  if (host_ok && t.processes.contains(m.pid)) return {true, m.pid, "pid", false};
  return {};
}

// A process of a program, not a GPU's or a span lane's: named, or with threads.
bool program_process(const TraceProcess& p) {
  return !p.name.empty() || p.tids.size() > 1;
}

// PyTorch's legacy profiler's trace has one program process, "CPU functions" (C++'s RecordProfile writes
// "CPU Functions"), and no pid a recording could match: its key, when that is so.
std::optional<int64_t> legacy_cpu_process(const TraceSurvey& t) {
  std::optional<int64_t> found;
  for (const auto& [key, p] : t.processes) {
    std::string lower = p.pid_text;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (lower == "cpu functions") {
      found = key;
    } else if (p.pid_text.empty() && program_process(p)) {
      return std::nullopt;
    }
  }
  return found;
}

std::string no_match_message(const std::vector<ConvertInputReport>& inputs, const TraceSurvey& t,
                             const MergeOptions& o) {
  std::string ours;
  for (const auto& r : inputs) {
    ours += fmt::format("{}{}", ours.empty() ? "" : ", ", r.meta.pid);
    if (r.meta.ns_pid != 0) ours += fmt::format(" (pid {} in its PID namespace)", r.meta.ns_pid);
  }
  std::string theirs;
  size_t shown = 0;
  for (const auto& [key, p] : t.processes) {
    if (!program_process(p)) continue;
    if (++shown > 8) {
      theirs += ", ...";
      break;
    }
    theirs += fmt::format("{}{}{}", theirs.empty() ? "" : ", ", t.pid_label(key),
                          p.name.empty() ? "" : " (" + p.name + ")");
  }
  return fmt::format(
      "none of the recordings' pids ({}) is a process of {}{}; if the profiler saw the program "
      "under another pid (a container, another host), name it: --pid-map GILPID:TRACEPID",
      ours, o.trace,
      theirs.empty() ? " (it has no process of a program)" : ", whose processes are " + theirs);
}

// Before 2001-09-09 (10^18 ns): no trace of a program gilspy can record was written then, so a trace whose
// events start earlier has ts on some other origin (the legacy profiler's start: 12.3 µs).
constexpr int64_t kEpochTimesFromNs = 1'000'000'000'000'000'000;

// The ns since the epoch of the trace's ts 0: --align-at, else baseTimeNanoseconds, else the epoch (absolute
// µs), which times that cannot be since the epoch refute.
void place_trace_times(const TraceSurvey& survey, const MergeOptions& o, MergeReport& report) {
  if (o.align_at) {
    if (!o.align_at->marker.empty() && !survey.marker_ns) {
      throw Error(ErrorKind::kBadInput,
                  fmt::format("--align-at {}@{}: {} has no event named \"{}\"", o.align_at->marker,
                              o.align_at->ns, o.trace, o.align_at->marker));
    }
    report.aligned_by_option = true;
    report.convert.base_time_ns = o.align_at->ns - survey.marker_ns.value_or(0);
    return;
  }
  report.absolute_times = survey.shape_ == TraceShape::kArray || !survey.base_ns;
  report.convert.base_time_ns = report.absolute_times ? 0 : *survey.base_ns;
  if (report.absolute_times && survey.first_ns <= survey.last_ns && survey.first_ns < kEpochTimesFromNs) {
    throw Error(
        ErrorKind::kBadInput,
        fmt::format("{} cannot be aligned with the recordings: it has no baseTimeNanoseconds and its ts are "
                    "not times since the epoch (its first event is at {:.3f} ms: after the profiler "
                    "started, as PyTorch's legacy profiler writes them, a moment the file does not hold); "
                    "give that moment: --align-at NS (ns since the epoch of ts 0, e.g. time.time_ns() just "
                    "before the profiler started), or --align-at NAME@NS (when the first event named NAME "
                    "began)",
                    o.trace, static_cast<double>(survey.first_ns) / 1e6));
  }
}

// Pass 1 over the trace: what it is and holds, into the report.
void survey_trace(TraceSurvey& survey, const MergeOptions& o, MergeReport& report) {
  {
    InputBytes in(survey.path());
    report.input_gzip = in.compressed();
    scan_trace(in, survey);
  }
  report.shape = survey.shape_;
  report.trace_events = survey.events;
  place_trace_times(survey, o, report);
  if (survey.first_ns <= survey.last_ns) {
    report.trace_start_ns = report.convert.base_time_ns + survey.first_ns;
    report.trace_end_ns = report.convert.base_time_ns + survey.last_ns;
  }
  for (const auto& [key, p] : survey.processes)
    report.trace_processes.emplace_back(survey.pid_label(key), p.name);
}

// The recordings' meta, in rank order, each matched to a process of the trace or given one of its own (as a
// plain conversion shows it, on a pid the trace does not use). Throws when none matches.
std::vector<Match> place_inputs(const std::vector<std::string>& inputs, const MergeOptions& o,
                                const TraceSurvey& survey, MergeReport& report) {
  for (const auto& path : inputs) {
    ConvertInputReport r;
    r.path = path;
    r.meta = read_input_meta(path);
    report.convert.inputs.push_back(std::move(r));
  }
  std::stable_sort(
      report.convert.inputs.begin(), report.convert.inputs.end(),
      [](const ConvertInputReport& a, const ConvertInputReport& b) { return a.meta.rank < b.meta.rank; });
  std::set<int64_t> pids_used;
  for (const auto& [pid, p] : survey.processes) pids_used.insert(pid);
  std::vector<Match> matches;
  for (auto& r : report.convert.inputs) {
    Match m = match_input(r.meta, o, survey);
    if (!m.matched && report.convert.inputs.size() == 1 && o.pid_map.empty()) {
      if (const auto legacy = legacy_cpu_process(survey)) m = {true, *legacy, "legacy", false};
    }
    if (m.matched) {
      r.trace_pid = m.pid;
      r.trace_pid_text = survey.processes.at(m.pid).pid_text;
      r.namespace_ids = m.namespace_ids;
    } else {
      r.namespace_ids = o.pid_namespace == PidNamespace::kTarget && r.meta.ns_pid != 0;
      r.trace_pid = r.namespace_ids ? r.meta.ns_pid : r.meta.pid;
      while (!pids_used.insert(r.trace_pid).second) r.trace_pid += kPidOffset;
    }
    matches.push_back(m);
  }
  if (std::none_of(matches.begin(), matches.end(), [](const Match& m) { return m.matched; }))
    throw Error(ErrorKind::kBadInput, no_match_message(report.convert.inputs, survey, o));
  return matches;
}

// Pass 2: the trace copied through `out`, each recording's GIL lanes at the end of its events, a member
// "gilspy" (or "gilspy_2", ... when merged before) at the end of an object trace saying what was merged.
class MergedTrace {
 public:
  MergedTrace(const MergeOptions& o, const TraceSurvey& survey, std::vector<Match> matches,
              MergeReport& report)
      : o_(o), survey_(survey), matches_(std::move(matches)), report_(report) {
    for (const auto& [pid, p] : survey.processes) taken_[pid] = p.tids;
  }

  void write(JsonWriter& out) {
    size_t events = 0;
    TraceCopy copy(out, [&](size_t before) {
      events = before;
      for (size_t i = 0; i < report_.convert.inputs.size(); ++i) merged_.push_back(gil_lanes(out, events, i));
    });
    {
      InputBytes in(o_.trace);
      scan_trace(in, copy);
    }
    if (copy.events() != survey_.events) {
      throw Error(ErrorKind::kBadInput, o_.trace + " changed while it was being read; nothing was written");
    }
    report_.convert.events_written = events - survey_.events;
    if (report_.shape != TraceShape::kObject) {
      out.raw("\n");
      return;
    }
    std::string key = "gilspy";
    for (int n = 2; survey_.keys.contains(key); ++n) key = fmt::format("gilspy_{}", n);  // merged twice
    const json about = {
        {"gilspy_version", kGilspyVersion},
        {"time_base", report_.aligned_by_option
                          ? fmt::format("GIL events: ts in microseconds after {} ns since the Unix epoch "
                                        "(--align-at)",
                                        report_.convert.base_time_ns)
                      : report_.absolute_times
                          ? "GIL events: ts in microseconds since the Unix epoch (the trace "
                            "has no baseTimeNanoseconds)"
                          : "GIL events: ts in microseconds after baseTimeNanoseconds"},
        {"inputs", std::move(merged_)}};
    out.raw(",\n  ");
    out.value(key);
    out.raw(": ");
    out.json(about);
    out.raw("\n}\n");
  }

 private:
  // Recording i's events, in the trace's process that matched it (on lanes of their own) or in its own;
  // returns its entry for the "gilspy" member and fills its MergedInput.
  json gil_lanes(JsonWriter& out, size_t& events, size_t i) {
    ConvertInputReport& r = report_.convert.inputs[i];
    const Match& m = matches_[i];
    std::unique_ptr<LanePlacement> lanes = m.matched ? merge_lanes(taken_[r.trace_pid], m.namespace_ids)
                                           : r.namespace_ids ? namespace_placement()
                                                             : nullptr;
    const bool ts_strings = survey_.string_ts > 0 && survey_.string_ts * 2 >= survey_.timed;
    json entry = write_input_events(out, events, r, report_.convert.base_time_ns,
                                    {.salvage = o_.salvage,
                                     .placement = lanes.get(),
                                     .ts_as_string = ts_strings,
                                     .frame_slices = o_.frame_slices});
    entry["merged_by"] = m.matched ? json(m.by) : json(nullptr);
    MergedInput mi{.matched = m.matched,
                   .matched_by = m.by,
                   .trace_pid_text = r.trace_pid_text,
                   .start_ns = r.meta.realtime_ns};
    const json& s = entry["summary"];
    mi.end_ns = mi.start_ns + (s.contains("duration_ns") && s["duration_ns"].is_number_integer()
                                   ? s["duration_ns"].get<int64_t>()
                                   : 0);
    mi.overlaps = report_.trace_start_ns < report_.trace_end_ns && mi.start_ns < report_.trace_end_ns &&
                  mi.end_ns > report_.trace_start_ns;
    report_.merged.push_back(mi);
    return entry;
  }

  const MergeOptions& o_;
  const TraceSurvey& survey_;
  std::vector<Match> matches_;
  MergeReport& report_;
  std::map<int64_t, std::set<int64_t>> taken_;  // per trace pid: tids in use
  json merged_ = json::array();
};

}  // namespace

std::pair<int64_t, std::string> parse_pid_map(const std::string& text) {
  const size_t colon = text.find(':');
  int64_t gil = 0;
  const std::string_view left = std::string_view(text).substr(0, colon == std::string::npos ? 0 : colon);
  const auto r = std::from_chars(left.data(), left.data() + left.size(), gil);
  if (colon == std::string::npos || left.empty() || r.ec != std::errc() ||
      r.ptr != left.data() + left.size() || gil < 0 || gil > INT32_MAX || colon + 1 == text.size()) {
    throw Error(ErrorKind::kUsage,
                "--pid-map takes GILPID:TRACEPID (a pid, and the trace's pid: a number or "
                "a string pid such as \"CPU functions\"), not '" +
                    text + "'");
  }
  return {gil, text.substr(colon + 1)};
}

TimeAnchor parse_align_at(const std::string& text) {
  const size_t at = text.rfind('@');
  TimeAnchor anchor;
  if (at != std::string::npos) anchor.marker = text.substr(0, at);
  const std::string_view ns = std::string_view(text).substr(at == std::string::npos ? 0 : at + 1);
  const auto r = std::from_chars(ns.data(), ns.data() + ns.size(), anchor.ns);
  if (ns.empty() || r.ec != std::errc() || r.ptr != ns.data() + ns.size() || anchor.ns <= 0 ||
      (at != std::string::npos && anchor.marker.empty())) {
    throw Error(ErrorKind::kUsage,
                "--align-at takes NS (the ns since the epoch of the trace's ts 0) or NAME@NS (of the first "
                "event named NAME), not '" +
                    text + "'");
  }
  return anchor;
}

MergeReport merge_into_trace(const std::vector<std::string>& inputs, const std::string& output,
                             const MergeOptions& o) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no recording to merge");
  MergeReport report;
  report.convert.output = output;
  // Pass 1: the trace (a file that is not one fails here, before any output exists), the recordings' meta.
  TraceSurvey survey(o.trace, o.align_at ? o.align_at->marker : std::string());
  survey_trace(survey, o, report);
  MergedTrace merged(o, survey, place_inputs(inputs, o, survey, report), report);
  // Pass 2: copy the trace, the GIL events at the end of its events.
  report.output_gzip = has_gzip_suffix(output);
  OutputBytes file(output, o.mode, report.output_gzip);
  JsonWriter out([&](std::string_view text) { file.write(text); });
  merged.write(out);
  out.drain();
  file.commit();
  return report;
}

}  // namespace gilspy::convert
