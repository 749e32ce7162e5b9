#include "sampler/stacks/thread_dump.hpp"

#include "base/clock.hpp"

namespace gilspy::sampler {
namespace {

constexpr int64_t kWalkBudgetNs = 200'000'000;  // one walk: generous, nothing else waits for it

const char* why_not(WalkResult r) {
  switch (r) {
    case WalkResult::kTorn:
      return "its frames changed under every read (the thread runs Python)";
    case WalkResult::kInvalid:
      return "what was read is not a Python stack";
    case WalkResult::kBudget:
      return "reading it took too long";
    case WalkResult::kFull:
      return "too many distinct frames to keep";
    case WalkResult::kOk:
    case WalkResult::kEmpty:
      break;
  }
  return "";
}

}  // namespace

ThreadDump::ThreadDump(const Interpreter& interp, MemoryReader& reader)
    : interp_(interp),
      objects_(reader, interp_.stack_layout),
      tables_(StackTableSizes{.strings = 4096, .string_bytes = 1 << 20, .frames = 8192, .stacks = 1024}),
      codes_(objects_, tables_),
      walker_(objects_, codes_, kMaxDepth) {}

DumpStack ThreadDump::stack(uint64_t tstate) {
  DumpStack out;
  if (!interp_.stack_layout.known) {
    out.why = "gilspy does not read stacks of Python " + interp_.binary.version.text();
    return out;
  }
  WalkResult r = WalkResult::kTorn;
  WalkOutput w;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    r = walker_.walk(tstate, monotonic_ns() + kWalkBudgetNs, &w);
    if (r == WalkResult::kOk || r == WalkResult::kEmpty || r == WalkResult::kFull) break;
  }
  if (r != WalkResult::kOk && r != WalkResult::kEmpty) {
    out.why = why_not(r);
    return out;
  }
  out.read = true;
  out.truncated = w.truncated;
  for (const FrameKey& k : walker_.frames()) {
    out.frames.push_back({.function = std::string(tables_.string(k.qualname)),
                          .file = std::string(tables_.string(k.file)),
                          .line = k.line});
  }
  return out;
}

std::unordered_map<uint64_t, std::string> ThreadDump::python_names() {
  std::unordered_map<uint64_t, std::string> names;
  if (!interp_.stack_layout.known) return names;
  const uint64_t active = objects_.module_global(interp_.interp_addr, "threading", "_active");
  if (active == 0 || objects_.kind_of(active) != PyKind::kDict || !objects_.read_dict(active)) return names;
  // Copied out first: reading each name reuses the dict buffers.
  std::vector<std::pair<uint64_t, uint64_t>> items;  // (ident object, Thread object)
  for (size_t i = 0; i < objects_.item_count(); ++i)
    items.emplace_back(objects_.item_key(i), objects_.item_value(i));
  std::string text(CodeCache::kMaxName, '\0');
  for (const auto& [ident_obj, thread] : items) {
    const auto ident = objects_.read_uint(ident_obj);
    const uint64_t name = ident ? objects_.attribute(thread, "_name") : 0;
    const auto len = name != 0 ? objects_.read_str(name, text) : std::nullopt;
    if (len && *len > 0) names[*ident] = text.substr(0, *len);
  }
  return names;
}

}  // namespace gilspy::sampler
