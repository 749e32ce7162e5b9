// The raw file's meta line: Meta to and from JSON (raw_format.hpp).
#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "raw/raw_format.hpp"

namespace gilspy::raw {

using nlohmann::json;

json to_json(const Meta& m) {
  return json{{"gilspy_version", m.gilspy_version},
              {"pid", m.pid},
              {"rank", m.rank},
              {"python_version", m.python_version},
              {"python_binary", m.python_binary},
              {"build", m.build},
              {"free_threaded", m.free_threaded},
              {"command", m.command},
              {"hostname", m.hostname},
              {"clock", {{"monotonic_ns", m.monotonic_ns}, {"realtime_ns", m.realtime_ns}}},
              {"rate_hz", m.rate_hz},
              {"switch_interval_us", m.switch_interval_us},
              {"gil_addr", m.gil_addr},
              {"ns_pid", m.ns_pid},  // 0 unless the target runs in another PID namespace
              {"mode", m.mode}};
}

Meta meta_from_json(const json& j) {
  auto need = [&](const char* key) -> const json& {
    if (!j.is_object() || !j.contains(key))
      throw Error(ErrorKind::kBadInput, std::string("meta has no \"") + key + "\"");
    return j.at(key);
  };
  // Only integers (a float converted to one would be undefined past its range), within int64.
  auto integer = [](const json& v, const char* key) -> int64_t {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})) {
      throw Error(ErrorKind::kBadInput, std::string("meta's \"") + key + "\" is not an integer in range");
    }
    return v.get<int64_t>();
  };
  auto optional_unsigned = [&](const char* key) -> uint64_t {
    return j.contains(key) && j.at(key).is_number_unsigned() ? j.at(key).get<uint64_t>() : 0;
  };
  try {
    Meta m;
    m.gilspy_version = need("gilspy_version").get<std::string>();
    m.pid = integer(need("pid"), "pid");
    m.rank = integer(need("rank"), "rank");
    m.python_version = need("python_version").get<std::string>();
    m.python_binary = j.value("python_binary", "");
    m.build = j.value("build", "");
    m.free_threaded = j.value("free_threaded", false);
    m.command = j.value("command", "");
    m.hostname = j.value("hostname", "");
    const json& clock = need("clock");
    m.monotonic_ns = integer(clock.at("monotonic_ns"), "clock.monotonic_ns");
    m.realtime_ns = integer(clock.at("realtime_ns"), "clock.realtime_ns");
    m.rate_hz = need("rate_hz").get<double>();
    m.switch_interval_us = optional_unsigned("switch_interval_us");
    m.gil_addr = optional_unsigned("gil_addr");
    m.ns_pid = j.contains("ns_pid") ? integer(j.at("ns_pid"), "ns_pid") : 0;
    m.mode = j.contains("mode") && j.at("mode").is_string() ? j.at("mode").get<std::string>() : "sampled";
    // Bounded so that what readers compute from them (a trace's time offsets, pid shifts) cannot overflow.
    if (m.pid < 0 || m.pid > INT32_MAX) throw Error(ErrorKind::kBadInput, "meta has a pid out of range");
    if (m.ns_pid < 0 || m.ns_pid > INT32_MAX)
      throw Error(ErrorKind::kBadInput, "meta has an ns_pid out of range");
    constexpr int64_t kMaxClockNs = int64_t{1} << 62;  // year 2116
    if (m.monotonic_ns < 0 || m.monotonic_ns > kMaxClockNs || m.realtime_ns < 0 ||
        m.realtime_ns > kMaxClockNs) {
      throw Error(ErrorKind::kBadInput, "meta has a clock anchor out of range");
    }
    return m;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kBadInput, std::string("meta is malformed: ") + e.what());
  }
}

}  // namespace gilspy::raw
