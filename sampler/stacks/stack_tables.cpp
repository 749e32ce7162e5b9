#include "sampler/stacks/stack_tables.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace gilspy::sampler {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

}  // namespace

size_t StackTables::slots_for(size_t n) {
  size_t s = 1;
  while (s < 2 * n + 2) s <<= 1;
  return s;
}

// Entries are numbered from 1: index 0 of every entry array is never used.
StackTables::StackTables(StackTableSizes sizes)
    : sizes_(sizes),
      text_(sizes.string_bytes),
      strings_(sizes.strings + 1),
      string_index_(slots_for(sizes.strings)),
      frames_(sizes.frames + 1),
      frame_index_(slots_for(sizes.frames)),
      stacks_(sizes.stacks + 1),
      stack_ids_(sizes.stack_frame_ids),
      stack_index_(slots_for(sizes.stacks)) {}

template <class Equal>
uint32_t* StackTables::slot(ZeroedArray<uint32_t>& index, uint64_t hash, Equal equal) {
  const size_t mask = index.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    if (index[i] == 0 || equal(index[i])) return &index[i];
  }
}

uint32_t StackTables::intern_string(std::string_view s) {
  uint32_t* at = slot(string_index_, hash_bytes(s), [&](uint32_t id) { return string(id) == s; });
  if (*at != 0) return *at;
  if (string_count_ >= sizes_.strings || text_used_ + s.size() > text_.size()) {
    full_ = true;
    return 0;
  }
  std::memcpy(text_.data() + text_used_, s.data(), s.size());
  const auto id = static_cast<uint32_t>(++string_count_);
  strings_[id] = {static_cast<uint32_t>(text_used_), static_cast<uint32_t>(s.size())};
  text_used_ += s.size();
  *at = id;
  return id;
}

std::string_view StackTables::string(uint32_t id) const {
  // Not string_count_: the poll thread may be adding to it. An id from a record was published with its entry.
  if (id == 0 || id > sizes_.strings) return {};
  return {text_.data() + strings_[id].offset, strings_[id].length};
}

uint32_t StackTables::intern_frame(const FrameKey& k, bool* added) {
  *added = false;
  const uint64_t h =
      mix(mix(mix(k.qualname, k.file), static_cast<uint32_t>(k.line)), static_cast<uint32_t>(k.first_line));
  uint32_t* at = slot(frame_index_, h, [&](uint32_t id) { return frames_[id] == k; });
  if (*at != 0) return *at;
  if (frame_count_ >= sizes_.frames) {
    full_ = true;
    return 0;
  }
  const auto id = static_cast<uint32_t>(++frame_count_);
  frames_[id] = k;
  *at = id;
  *added = true;
  return id;
}

std::span<const uint32_t> StackTables::stack_frames(uint32_t id) const {
  return {stack_ids_.data() + stacks_[id].offset, stacks_[id].depth};
}

uint32_t StackTables::intern_stack(std::span<const uint32_t> frames, bool truncated, bool* added) {
  *added = false;
  uint64_t h = truncated ? 1 : 2;
  for (const uint32_t f : frames) h = mix(h, f);
  uint32_t* at = slot(stack_index_, h, [&](uint32_t id) {
    const auto s = stack_frames(id);
    return stacks_[id].truncated == truncated && s.size() == frames.size() &&
           std::equal(s.begin(), s.end(), frames.begin());
  });
  if (*at != 0) return *at;
  if (stack_count_ >= sizes_.stacks || stack_ids_used_ + frames.size() > stack_ids_.size()) {
    full_ = true;
    return 0;
  }
  std::copy(frames.begin(), frames.end(), stack_ids_.data() + stack_ids_used_);
  const auto id = static_cast<uint32_t>(++stack_count_);
  stacks_[id] = {static_cast<uint32_t>(stack_ids_used_), static_cast<uint32_t>(frames.size()), truncated};
  stack_ids_used_ += frames.size();
  *at = id;
  *added = true;
  return id;
}

void StackTables::fill(raw::Record& r) const {
  if (auto* f = std::get_if<raw::FrameDef>(&r)) {
    const FrameKey& k = frame(f->id);
    f->qualname = std::string(string(k.qualname));
    f->file = std::string(string(k.file));
  } else if (auto* s = std::get_if<raw::StackDef>(&r)) {
    const auto frames = stack_frames(s->id);
    s->frames.assign(frames.begin(), frames.end());
    s->truncated = stack_truncated(s->id);
  } else if (auto* n = std::get_if<raw::ThreadName>(&r)) {
    n->name = std::string(string(n->text_id));
  }
}

}  // namespace gilspy::sampler
