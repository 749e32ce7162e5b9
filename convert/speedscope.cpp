#include "convert/speedscope.hpp"

#include <iterator>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/collapsed.hpp"
#include "gilspy_version.hpp"
#include "raw/stack_summary.hpp"

namespace gilspy::convert {
namespace {

using nlohmann::json;

struct View {
  const char* name;
  FoldWeight weight;
  bool only_if_any;  // left out when nothing weighs in it (no stretch without the GIL was read)
};

constexpr View kViews[] = {{"held while others waited", FoldWeight::kContention, false},
                           {"held", FoldWeight::kHold, false},
                           {"waited", FoldWeight::kWait, false},
                           {"without the GIL", FoldWeight::kReleased, true}};

// Frames by their folded text ("qualname (file:line)", or "[no stack sample]"), each once, in first use.
class FrameTable {
 public:
  size_t index(const std::string& text) {
    const auto [it, added] = ids_.try_emplace(text, frames_.size());
    if (added) frames_.push_back(frame_json(text));
    return it->second;
  }
  json take() { return std::move(frames_); }
  size_t size() const { return ids_.size(); }

 private:
  static json frame_json(const std::string& text) {
    const size_t open = text.rfind(" (");
    const size_t colon = text.rfind(':');
    if (open == std::string::npos || colon == std::string::npos || colon < open || text.back() != ')') {
      return {{"name", text}};
    }
    const std::string line = text.substr(colon + 1, text.size() - colon - 2);
    json f = {{"name", text.substr(0, open)}, {"file", text.substr(open + 2, colon - open - 2)}};
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos)
      f["line"] = std::stoi(line);
    return f;
  }
  std::map<std::string, size_t> ids_;
  json frames_ = json::array();
};

// One profile: each folded stack a sample, outermost frame first, weighted in µs as --format collapsed.
json profile(const char* name, const std::map<std::string, int64_t>& weights, FrameTable& frames,
             uint64_t* total_us) {
  json samples = json::array(), values = json::array();
  *total_us = 0;
  for (const auto& [stack, ns] : weights) {
    const auto us = static_cast<uint64_t>((ns + 500) / 1000);
    if (us == 0) continue;
    json sample = json::array();
    for (size_t from = 0;;) {
      const size_t semi = stack.find(';', from);
      sample.push_back(
          frames.index(stack.substr(from, semi == std::string::npos ? std::string::npos : semi - from)));
      if (semi == std::string::npos) break;
      from = semi + 1;
    }
    samples.push_back(std::move(sample));
    values.push_back(us);
    *total_us += us;
  }
  return {{"type", "sampled"},     {"name", name},       {"unit", "microseconds"}, {"startValue", 0},
          {"endValue", *total_us}, {"samples", samples}, {"weights", values}};
}

}  // namespace

SpeedscopeReport convert_to_speedscope(const std::vector<std::string>& inputs, const std::string& output,
                                       const SpeedscopeOptions& options) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no input to convert");
  OutputFile out = OutputFile::temporary(output, options.mode);  // the name is checked before any work
  SpeedscopeReport report;
  FrameTable frames;
  json profiles = json::array();
  std::vector<FoldWeight> weights;
  for (const View& v : kViews) weights.push_back(v.weight);
  CollapsedReport read;
  const std::vector<FoldedWeights> folded = fold_weights(inputs, weights, options.salvage, read);  // one pass
  report.stack_samples = read.stack_samples;
  report.incomplete = read.incomplete;
  for (size_t i = 0; i < std::size(kViews); ++i) {
    const View& v = kViews[i];
    uint64_t total = 0;
    json p = profile(v.name, folded[i], frames, &total);
    if (v.only_if_any && total == 0) continue;
    profiles.push_back(std::move(p));
    report.profiles.emplace_back(v.name);
    report.totals_us.push_back(total);
  }
  report.frames = frames.size();
  const json doc = {{"$schema", "https://www.speedscope.app/file-format-schema.json"},
                    {"name", "gilspy: " + inputs.front() + (inputs.size() > 1 ? " and others" : "")},
                    {"exporter", std::string("gilspy ") + kGilspyVersion},
                    {"activeProfileIndex", 0},
                    {"shared", {{"frames", frames.take()}}},
                    {"profiles", std::move(profiles)}};
  out.write_all(doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
  out.commit();
  return report;
}

std::string default_speedscope_path(const std::string& input) {
  const std::string folded = default_collapsed_path(input);  // X.folded
  return folded.substr(0, folded.size() - std::string(".folded").size()) + ".speedscope.json";
}

}  // namespace gilspy::convert
