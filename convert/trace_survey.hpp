#pragma once
// Inside convert/: the first pass of `convert --merge-into` over a profiler's trace
// (convert/merge_trace.hpp): its shape, time base, processes and their tids, the span of its events, and
// where --align-at's marker is.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "convert/trace_scan.hpp"

namespace gilspy::convert {

struct TraceProcess {
  std::string name;  // its process_name
  std::set<int64_t> tids;
  std::string pid_text;  // a string pid ("CPU functions", PyTorch's legacy profiler) as written; else empty
};

// String pids are kept under keys of their own, below any pid a trace writes, in order of appearance.
inline constexpr int64_t kStringPidKeyBase = -(int64_t{1} << 48);

class TraceSurvey final : public TraceScanHandler {
 public:
  // `marker`: the name of the event whose start --align-at gives (empty: none).
  TraceSurvey(const std::string& path, std::string marker) : path_(path), marker_(std::move(marker)) {}
  const std::string& path() const { return path_; }

  void shape(TraceShape s) override { shape_ = s; }
  void member(std::string_view key, std::string_view text) override;
  void events_begin() override {}
  void event(std::string_view text) override;
  void events_end() override {}

  // The key of the process a --pid-map names: a string pid written so, else a number, else none.
  std::optional<int64_t> find_process(std::string_view text) const;
  // The pid as the trace writes it, for messages: 1074, "CPU functions" (quoted).
  std::string pid_label(int64_t key) const;

  TraceShape shape_ = TraceShape::kObject;
  std::optional<int64_t> base_ns;
  std::set<std::string> keys;
  std::map<int64_t, TraceProcess> processes;  // by pid, or by kStringPidKeyBase + n for a string pid
  size_t events = 0, timed = 0, string_ts = 0;
  int64_t first_ns = std::numeric_limits<int64_t>::max(), last_ns = std::numeric_limits<int64_t>::min();
  std::optional<int64_t> marker_ns;  // the earliest start of an event named `marker`, ns on the trace's ts

 private:
  TraceProcess* process_of(const nlohmann::json& pid);
  void event_time(const nlohmann::json& event);

  const std::string& path_;
  std::string marker_;
  std::map<std::string, int64_t, std::less<>> string_pids_;
};

}  // namespace gilspy::convert
