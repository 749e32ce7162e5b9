#include "convert/merge_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/gzip_io.hpp"
#include "convert/input_events.hpp"
#include "convert/json_writer.hpp"
#include "convert/merge_lanes.hpp"
#include "convert/namespace_lanes.hpp"
#include "gilspy_version.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

// A ts or dur as the trace writes it (µs: an integer, a float, or Ascend's string "1736405443863674.400") in
// ns; nullopt for anything else.
std::optional<int64_t> trace_ns(const json& v) {
  constexpr double kLimitUs = 9.2e15;  // int64 ns
  if (v.is_number_integer()) {
    const double us = v.get<double>();
    if (std::fabs(us) >= kLimitUs) return std::nullopt;
    return v.get<int64_t>() * 1000;
  }
  if (v.is_number_float()) {
    const double us = v.get<double>();
    if (!std::isfinite(us) || std::fabs(us) >= kLimitUs) return std::nullopt;
    return std::llround(us * 1000.0);
  }
  if (!v.is_string()) return std::nullopt;
  // Decimal text, read exactly: whole µs, then up to three decimals (more are cut).
  const std::string& s = v.get_ref<const std::string&>();
  const size_t dot = s.find('.');
  int64_t whole = 0;
  const char* first = s.data();
  const char* dot_at = s.data() + (dot == std::string::npos ? s.size() : dot);
  const auto r = std::from_chars(first, dot_at, whole);
  if (r.ec != std::errc() || r.ptr != dot_at || std::fabs(static_cast<double>(whole)) >= kLimitUs)
    return std::nullopt;
  int64_t frac = 0;
  if (dot != std::string::npos) {
    int digits = 0;
    for (size_t i = dot + 1; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      if (digits < 3) {
        frac = frac * 10 + (s[i] - '0');
        ++digits;
      }
    }
    while (digits++ < 3) frac *= 10;
  }
  return whole * 1000 + (s.front() == '-' ? -frac : frac);
}

struct TraceProcess {
  std::string name;
  std::set<int64_t> tids;
};

// Pass 1 over the trace: its shape, time base, processes and their tids, the span of its events.
class TraceSurvey final : public TraceScanHandler {
 public:
  explicit TraceSurvey(const std::string& path) : path_(path) {}
  const std::string& path() const { return path_; }

  void shape(TraceShape s) override { shape_ = s; }
  void member(std::string_view key, std::string_view text) override {
    keys.insert(std::string(key));
    // Copied byte for byte: it must be JSON (the scanner checks only the structure around it).
    const json m = json::parse("{" + std::string(text) + "}", nullptr, false);
    if (m.is_discarded() || m.size() != 1) {
      throw Error(ErrorKind::kBadInput,
                  fmt::format("{} is not a trace gilspy can merge into: its member \"{}\" is "
                              "not valid JSON",
                              path_, std::string(key.substr(0, 64))));
    }
    if (key != "baseTimeNanoseconds") return;
    const json& v = m.begin().value();
    if (!v.is_number_integer() || v.get<double>() < 0 || v.get<double>() > 9.2e18) {
      throw Error(ErrorKind::kBadInput, path_ + ": baseTimeNanoseconds is not a time in nanoseconds");
    }
    base_ns = v.get<int64_t>();
  }
  void events_begin() override {}
  void event(std::string_view text) override {
    ++events;
    const json e = json::parse(text, nullptr, false);
    if (e.is_discarded()) {
      throw Error(ErrorKind::kBadInput,
                  fmt::format("{} is not a trace gilspy can merge into: its event #{} is not "
                              "valid JSON",
                              path_, events));
    }
    if (!e.is_object()) return;
    const auto pid = e.find("pid");
    const auto ph = e.find("ph");
    const bool metadata = ph != e.end() && ph->is_string() && *ph == "M";
    if (pid != e.end() && pid->is_number_integer()) {
      TraceProcess& p = processes[pid->get<int64_t>()];
      const auto tid = e.find("tid");
      if (tid != e.end() && tid->is_number_integer()) p.tids.insert(tid->get<int64_t>());
      const auto name = e.find("name");
      if (metadata && name != e.end() && *name == "process_name") {
        const auto args = e.find("args");
        if (args != e.end() && args->is_object() && args->contains("name") && (*args)["name"].is_string()) {
          p.name = (*args)["name"].get<std::string>();
        }
      }
    }
    const auto ts = e.find("ts");
    if (ts == e.end() || metadata) return;
    if (ts->is_string()) ++string_ts;
    ++timed;
    const auto t = trace_ns(*ts);
    if (!t) return;
    int64_t end = *t;
    if (const auto dur = e.find("dur"); dur != e.end()) {
      if (const auto d = trace_ns(*dur); d && *d > 0) end += *d;
    }
    first_ns = std::min(first_ns, *t);
    last_ns = std::max(last_ns, end);
  }
  void events_end() override {}

  TraceShape shape_ = TraceShape::kObject;
  std::optional<int64_t> base_ns;
  std::set<std::string> keys;
  std::map<int64_t, TraceProcess> processes;
  size_t events = 0, timed = 0, string_ts = 0;
  int64_t first_ns = std::numeric_limits<int64_t>::max(), last_ns = std::numeric_limits<int64_t>::min();

 private:
  const std::string& path_;
};

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
    if (!t.processes.contains(trace)) {
      throw Error(ErrorKind::kBadInput,
                  fmt::format("--pid-map {}:{}: {} has no process {}", gil, trace, o.trace, trace));
    }
    const bool ns = o.pid_namespace ? *o.pid_namespace == PidNamespace::kTarget : m.ns_pid != 0;
    return {true, trace, "--pid-map", ns && m.ns_pid != 0};
  }
  const bool target_ok = !o.pid_namespace || *o.pid_namespace == PidNamespace::kTarget;
  const bool host_ok = !o.pid_namespace || *o.pid_namespace == PidNamespace::kHost || m.ns_pid == 0;
  if (target_ok && m.ns_pid != 0 && t.processes.contains(m.ns_pid)) return {true, m.ns_pid, "ns_pid", true};
  if (host_ok && t.processes.contains(m.pid)) return {true, m.pid, "pid", false};
  return {};
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
  for (const auto& [pid, p] : t.processes) {
    if (p.name.empty() && p.tids.size() <= 1) continue;  // a GPU or a span lane, not a program's process
    if (++shown > 8) {
      theirs += ", ...";
      break;
    }
    theirs +=
        fmt::format("{}{}{}", theirs.empty() ? "" : ", ", pid, p.name.empty() ? "" : " (" + p.name + ")");
  }
  return fmt::format(
      "none of the recordings' pids ({}) is a process of {}{}; if the profiler saw the program "
      "under another pid (a container, another host), name it: --pid-map GILPID:TRACEPID",
      ours, o.trace,
      theirs.empty() ? " (it has no process of a program)" : ", whose processes are " + theirs);
}

// Pass 1 over the trace: what it is and holds, into the report.
void survey_trace(TraceSurvey& survey, MergeReport& report) {
  {
    InputBytes in(survey.path());
    report.input_gzip = in.compressed();
    scan_trace(in, survey);
  }
  report.shape = survey.shape_;
  report.trace_events = survey.events;
  report.absolute_times = survey.shape_ == TraceShape::kArray || !survey.base_ns;
  report.convert.base_time_ns = report.absolute_times ? 0 : *survey.base_ns;
  if (survey.first_ns <= survey.last_ns) {
    report.trace_start_ns = report.convert.base_time_ns + survey.first_ns;
    report.trace_end_ns = report.convert.base_time_ns + survey.last_ns;
  }
  for (const auto& [pid, p] : survey.processes) report.trace_processes.emplace_back(pid, p.name);
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
    const Match m = match_input(r.meta, o, survey);
    if (m.matched) {
      r.trace_pid = m.pid;
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
        {"time_base", report_.absolute_times
                          ? "GIL events: ts in microseconds since the Unix epoch (the trace has no "
                            "baseTimeNanoseconds)"
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
    MergedInput mi{.matched = m.matched, .matched_by = m.by, .start_ns = r.meta.realtime_ns};
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

std::pair<int64_t, int64_t> parse_pid_map(const std::string& text) {
  const size_t colon = text.find(':');
  int64_t a = 0, b = 0;
  auto number = [](std::string_view s, int64_t& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= 0 && v <= INT32_MAX;
  };
  if (colon == std::string::npos || !number(std::string_view(text).substr(0, colon), a) ||
      !number(std::string_view(text).substr(colon + 1), b)) {
    throw Error(ErrorKind::kUsage, "--pid-map takes GILPID:TRACEPID (two pids), not '" + text + "'");
  }
  return {a, b};
}

MergeReport merge_into_trace(const std::vector<std::string>& inputs, const std::string& output,
                             const MergeOptions& o) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no recording to merge");
  MergeReport report;
  report.convert.output = output;
  // Pass 1: the trace (a file that is not one fails here, before any output exists), the recordings' meta.
  TraceSurvey survey(o.trace);
  survey_trace(survey, report);
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
