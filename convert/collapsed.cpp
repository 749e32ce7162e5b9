#include "convert/collapsed.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "base/error.hpp"
#include "raw/stack_summary.hpp"

namespace gilspy::convert {
namespace {

// A piece's weight under `weight`, ns.
int64_t piece_weight(const raw::StackPiece& p, FoldWeight weight) {
  const int64_t len = p.to - p.from;
  switch (weight) {
    case FoldWeight::kHold:
      return p.role == raw::GilRole::kHolding ? len : 0;
    case FoldWeight::kContention:
      return p.role == raw::GilRole::kHolding ? p.contended_ns : 0;
    case FoldWeight::kWait:
      return p.role == raw::GilRole::kWaiting ? len : 0;
    case FoldWeight::kReleased:
      return p.role == raw::GilRole::kReleased ? len : 0;
    case FoldWeight::kAll:
      return len;
  }
  return 0;
}

// A frame as flame-graph tools read it: ';' separates frames and the last space the count, so neither may be
// ambiguous; newlines would end the line.
std::string folded_frame(const raw::FrameDef& f) {
  std::string s = fmt::format("{} ({}:{})", f.qualname, f.file, f.line);
  for (char& c : s) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// A piece's stack as a folded line, outermost first; "[no stack sample]" without one.
std::string folded_line(const raw::StackPieces& pieces, uint32_t stack) {
  std::string line;
  const auto s = pieces.stacks().find(stack);
  if (s != pieces.stacks().end()) {
    for (auto it = s->second.frames.rbegin(); it != s->second.frames.rend(); ++it) {
      const auto f = pieces.frames().find(*it);
      if (f == pieces.frames().end()) continue;
      if (!line.empty()) line += ';';
      line += folded_frame(f->second);
    }
  }
  return line.empty() ? std::string(raw::kNoStackSample) : line;
}

}  // namespace

std::string default_collapsed_path(const std::string& input) {
  std::string stem = input;
  for (const char* suffix : {".partial", ".json"}) {
    const std::string_view sv(suffix);
    if (stem.size() > sv.size() && stem.compare(stem.size() - sv.size(), sv.size(), sv) == 0) {
      stem.resize(stem.size() - sv.size());
    }
  }
  return stem + ".folded";
}

std::vector<FoldedWeights> fold_weights(const std::vector<std::string>& inputs,
                                        const std::vector<FoldWeight>& weights, bool salvage,
                                        CollapsedReport& report) {
  std::vector<FoldedWeights> folded(weights.size());  // per weight: folded stack -> ns
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::kIo, "cannot open " + path + ": " + std::strerror(errno));
    raw::StackPieces* pieces_ptr = nullptr;
    int64_t end_ns = 0;
    raw::StackPieces pieces([&](const std::vector<raw::StackPiece>& pieces_of_interval) {
      for (const raw::StackPiece& p : pieces_of_interval) {
        std::string line;  // made once, for the first weight that counts the piece
        for (size_t w = 0; w < weights.size(); ++w) {
          const int64_t ns = piece_weight(p, weights[w]);
          if (ns <= 0) continue;
          if (line.empty()) line = folded_line(*pieces_ptr, p.stack);
          folded[w][line] += ns;
        }
      }
    });
    pieces_ptr = &pieces;
    const raw::ReadResult result = raw::read(
        in, path, [](const raw::Meta&) {},
        [&](const raw::Record& r) {
          if (std::holds_alternative<raw::StackSample>(r)) ++report.stack_samples;
          end_ns = std::max(end_ns, raw::end_of(r));
          pieces.add(r);
        },
        {.salvage = salvage});
    pieces.finish(end_ns);  // released stretches still open at the end (--all-threads)
    if (!result.complete) report.incomplete.push_back(path);
  }
  return folded;
}

CollapsedReport convert_to_collapsed(const std::vector<std::string>& inputs, const std::string& output,
                                     const CollapsedOptions& options) {
  if (inputs.empty()) throw Error(ErrorKind::kUsage, "no input to convert");
  CollapsedReport report;
  OutputFile out = OutputFile::temporary(output, options.mode);  // the name is checked before any work
  const FoldedWeights weights = fold_weights(inputs, {options.weight}, options.salvage, report).front();
  std::string text;
  for (const auto& [stack, ns] : weights) {
    const uint64_t us = static_cast<uint64_t>((ns + 500) / 1000);
    if (us == 0) continue;
    text += fmt::format("{} {}\n", stack, us);
    ++report.lines;
    report.total_us += us;
    if (stack == raw::kNoStackSample) report.unattributed_us += us;
  }
  out.write_all(text);
  out.commit();
  return report;
}

}  // namespace gilspy::convert
