#include "convert/chrome_trace.hpp"

#include <algorithm>
#include <memory>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/gzip_io.hpp"
#include "convert/input_events.hpp"
#include "convert/json_writer.hpp"
#include "convert/namespace_lanes.hpp"
#include "gilspy_version.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

// Pass 1: every input's metadata (a file that is not a recording fails here, before any output exists), in
// rank order (GIL_*_rank_*.json in any order: the processes appear so, and sort so by process_sort_index),
// each with the pid its process gets and the trace's base time.
void plan_inputs(const std::vector<std::string>& inputs, const ConvertOptions& options,
                 ConvertReport& report) {
  for (const auto& path : inputs) {
    ConvertInputReport r;
    r.path = path;
    r.meta = read_input_meta(path);
    report.inputs.push_back(std::move(r));
  }
  std::stable_sort(
      report.inputs.begin(), report.inputs.end(),
      [](const ConvertInputReport& a, const ConvertInputReport& b) { return a.meta.rank < b.meta.rank; });
  std::set<int64_t> pids_used;
  for (auto& r : report.inputs) {
    r.namespace_ids = options.pid_namespace == PidNamespace::kTarget && r.meta.ns_pid != 0;
    r.trace_pid = r.namespace_ids ? r.meta.ns_pid : r.meta.pid;
    while (!pids_used.insert(r.trace_pid).second) r.trace_pid += kPidOffset;
  }
  report.base_time_ns = report.inputs.front().meta.realtime_ns;
  for (const auto& r : report.inputs) report.base_time_ns = std::min(report.base_time_ns, r.meta.realtime_ns);
}

}  // namespace

std::string default_output_path(const std::string& input) {
  std::string stem = input;
  auto strip = [&](std::string_view suffix) {
    if (stem.size() > suffix.size() &&
        stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      stem.resize(stem.size() - suffix.size());
      return true;
    }
    return false;
  };
  strip(".partial");
  strip(".json");
  return stem + ".trace.json";
}

ConvertReport convert_to_chrome_trace(const std::vector<std::string>& inputs, const std::string& output,
                                      const ConvertOptions& options) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no input to convert");
  ConvertReport report;
  report.output = output;
  plan_inputs(inputs, options, report);

  // Pass 2: stream the events.
  OutputBytes file(output, options.mode, /*gzip=*/false);
  JsonWriter out([&](std::string_view text) { file.write(text); });
  out.raw("{\"traceEvents\":[\n");
  size_t events = 0;
  json other_inputs = json::array();
  for (auto& r : report.inputs) {
    std::unique_ptr<LanePlacement> lanes = r.namespace_ids ? namespace_placement() : nullptr;
    other_inputs.push_back(write_input_events(
        out, events, r, report.base_time_ns,
        {.salvage = options.salvage, .placement = lanes.get(), .frame_slices = options.frame_slices}));
  }
  report.events_written = events;

  const json other = {
      {"gilspy_version", kGilspyVersion},
      {"time_base",
       "ts and dur are microseconds; ts counts from baseTimeNanoseconds (CLOCK_REALTIME, ns since the "
       "Unix epoch), the earliest start among the inputs"},
      {"inputs", std::move(other_inputs)}};
  out.raw("\n],\n\"displayTimeUnit\":\"ms\",\n\"baseTimeNanoseconds\":");
  out.value(report.base_time_ns);
  out.raw(",\n\"otherData\":");
  out.json(other);
  out.raw("}\n");
  out.drain();
  file.commit();
  return report;
}

}  // namespace gilspy::convert
