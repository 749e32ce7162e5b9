#pragma once
// The interned strings, frames and stacks of one target. The poll thread adds to them (allocation-free: every
// table is sized at construction; a full table takes nothing more and says so); the session's thread reads an
// entry once the record naming it came through the record queue (the queue's release/acquire publishes it).
// An entry never changes once added, so the two threads never touch the same memory at the same time.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "raw/records.hpp"
#include "sampler/stacks/remote_objects.hpp"

namespace gilspy::sampler {

struct FrameKey {
  uint32_t qualname = 0, file = 0;  // string ids
  int32_t line = 0, first_line = 0;
  bool operator==(const FrameKey&) const = default;
};

struct StackTableSizes {
  size_t strings = 16384;
  size_t string_bytes = size_t{2} << 20;
  size_t frames = 32768;
  size_t stacks = 32768;
  size_t stack_frame_ids = size_t{1} << 20;  // the frame ids of every stack, together
};

class StackTables {
 public:
  explicit StackTables(StackTableSizes sizes = {});

  // Poll thread. Each returns the entry's id (from 1), 0 when its table is full; *added tells a new entry.
  uint32_t intern_string(std::string_view s);
  uint32_t intern_frame(const FrameKey& k, bool* added);
  uint32_t intern_stack(std::span<const uint32_t> frames, bool truncated, bool* added);
  bool full() const { return full_; }  // some table refused an entry

  // Either thread, for an id it was given (the session: from a record).
  std::string_view string(uint32_t id) const;
  const FrameKey& frame(uint32_t id) const { return frames_[id]; }
  std::span<const uint32_t> stack_frames(uint32_t id) const;
  bool stack_truncated(uint32_t id) const { return stacks_[id].truncated; }

  // The session's side: fills a FrameDef's strings, a StackDef's frames, a ThreadName's name from the tables.
  void fill(raw::Record& r) const;

 private:
  struct StringEntry {
    uint32_t offset, length;
  };
  struct StackEntry {
    uint32_t offset, depth;
    bool truncated;
  };
  // Open addressing over ids (0 = empty slot), capacity a power of two, at least twice the table's.
  static size_t slots_for(size_t n);
  template <class Equal>
  uint32_t* slot(ZeroedArray<uint32_t>& index, uint64_t hash, Equal equal);

  StackTableSizes sizes_;
  ZeroedArray<char> text_;
  size_t text_used_ = 0;
  ZeroedArray<StringEntry> strings_;
  size_t string_count_ = 0;
  ZeroedArray<uint32_t> string_index_;
  ZeroedArray<FrameKey> frames_;
  size_t frame_count_ = 0;
  ZeroedArray<uint32_t> frame_index_;
  ZeroedArray<StackEntry> stacks_;
  size_t stack_count_ = 0;
  ZeroedArray<uint32_t> stack_ids_;
  size_t stack_ids_used_ = 0;
  ZeroedArray<uint32_t> stack_index_;
  bool full_ = false;
};

}  // namespace gilspy::sampler
