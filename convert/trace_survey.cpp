#include "convert/trace_survey.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/error.hpp"

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

}  // namespace

void TraceSurvey::member(std::string_view key, std::string_view text) {
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

void TraceSurvey::event(std::string_view text) {
  ++events;
  const json e = json::parse(text, nullptr, false);
  if (e.is_discarded()) {
    throw Error(ErrorKind::kBadInput,
                fmt::format("{} is not a trace gilspy can merge into: its event #{} is not valid JSON", path_,
                            events));
  }
  if (!e.is_object()) return;
  const auto pid = e.find("pid");
  const auto ph = e.find("ph");
  const bool metadata = ph != e.end() && ph->is_string() && *ph == "M";
  if (TraceProcess* p = pid != e.end() ? process_of(*pid) : nullptr; p != nullptr) {
    const auto tid = e.find("tid");
    if (tid != e.end() && tid->is_number_integer()) p->tids.insert(tid->get<int64_t>());
    const auto name = e.find("name");
    if (metadata && name != e.end() && *name == "process_name") {
      const auto args = e.find("args");
      if (args != e.end() && args->is_object() && args->contains("name") && (*args)["name"].is_string()) {
        p->name = (*args)["name"].get<std::string>();
      }
    }
  }
  if (!metadata) event_time(e);
}

TraceProcess* TraceSurvey::process_of(const json& pid) {
  if (pid.is_number_integer()) return &processes[pid.get<int64_t>()];
  if (!pid.is_string()) return nullptr;
  const std::string& text = pid.get_ref<const std::string&>();
  auto it = string_pids_.find(text);
  if (it == string_pids_.end()) {
    it = string_pids_.emplace(text, kStringPidKeyBase + static_cast<int64_t>(string_pids_.size())).first;
    processes[it->second].pid_text = text;
  }
  return &processes[it->second];
}

void TraceSurvey::event_time(const json& e) {
  const auto ts = e.find("ts");
  if (ts == e.end()) return;
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
  if (marker_.empty()) return;
  const auto name = e.find("name");
  if (name != e.end() && name->is_string() && *name == marker_ && (!marker_ns || *t < *marker_ns)) {
    marker_ns = *t;
  }
}

std::optional<int64_t> TraceSurvey::find_process(std::string_view text) const {
  if (const auto it = string_pids_.find(text); it != string_pids_.end()) return it->second;
  int64_t pid = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !processes.contains(pid))
    return std::nullopt;
  return pid;
}

std::string TraceSurvey::pid_label(int64_t key) const {
  const auto it = processes.find(key);
  if (it == processes.end() || it->second.pid_text.empty()) return std::to_string(key);
  return "\"" + it->second.pid_text + "\"";
}

}  // namespace gilspy::convert
