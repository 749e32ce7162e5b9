#pragma once
// Code objects by address: a frame names its code object by pointer, and resolving one (its names, its file,
// its line table) costs three reads, so each is resolved once and remembered. A cached entry is checked
// against the object with each stack it is used in (the pointers to its names and table, read with the
// walk's last read): a code object freed and another allocated at its address has other strings. Sized at
// construction; when full it starts over.
#include <cstddef>
#include <cstdint>
#include <span>

#include "cpython_layouts/line_table.hpp"
#include "sampler/stacks/remote_objects.hpp"
#include "sampler/stacks/stack_tables.hpp"

namespace gilspy::sampler {

struct CodeInfo {
  uint64_t addr = 0;
  uint64_t fingerprint[4] = {};     // the object's pointers to its file name, names and line table
  uint32_t qualname = 0, file = 0;  // string ids in the StackTables
  int32_t first_line = 0;
  uint32_t table_offset = 0, table_length = 0;
  int64_t code_bytes = 0;    // the instructions' length in bytes
  uint64_t instr_start = 0;  // 3.11+: where the first instruction is
};

enum class CodeResult : uint8_t {
  kOk,
  kNotCode,  // not a code object
  kInvalid,  // a code object whose names or table do not read as they must: the stack is dropped
  kFull,     // the string table is full
};

class CodeCache {
 public:
  static constexpr size_t kEntries = 4096;
  static constexpr size_t kTableBytes = size_t{1} << 20;
  static constexpr size_t kMaxTable = size_t{256} << 10;  // a bigger line table is not read
  static constexpr size_t kMaxName = 1024;                // bytes of a name or file name kept

  CodeCache(RemoteObjects& objects, StackTables& tables);

  static constexpr size_t kMaxRevalidate = 256;  // code objects per stack checked in one read

  // The check of a stack's cached entries, made with the walk's last read (the frames still linking to the
  // same code objects, and those objects still holding the same pointers, make the stack whole):
  // revalidate_regions() writes to `out` (at least kMaxRevalidate long) the regions that read the cached
  // entries among `addrs` again, and returns how many; once they are read (`got` of them in full),
  // revalidated() forgets the entries whose objects changed (resolved again at the next lookup) and
  // returns whether none did.
  size_t revalidate_regions(std::span<const uint64_t> addrs, std::span<ReadRegion> out);
  bool revalidated(size_t got);
  CodeResult lookup(uint64_t addr, const CodeInfo** out);
  // The line of the instruction `instr` (3.8-3.10: f_lasti; 3.11+: the instruction pointer) in this code.
  layouts::LineLookup line(const CodeInfo& c, int64_t instr) const;
  uint64_t resolved() const { return resolved_; }

 private:
  uint32_t* index_slot(uint64_t addr);
  void clear();
  // The objects a code object points to that resolve() reads (co_code: before 3.11 only, else 0).
  struct CodeRefs {
    uint64_t filename = 0, qualname = 0, table = 0, co_code = 0;
  };
  CodeResult resolve(uint64_t addr, CodeInfo* out);
  // resolve()'s steps: the headers of the objects it points to, then each name's text.
  CodeResult read_code_headers(const CodeRefs& refs, uint8_t (&h)[4][64], CodeInfo* out, int64_t* table_len);
  CodeResult intern_name(uint64_t obj, RemoteBytes header, uint32_t* id);

  RemoteObjects& objects_;
  StackTables& tables_;
  const layouts::StackLayout& layout_;
  uint32_t fp_start_ = 0, fp_words_ = 0;
  ZeroedArray<CodeInfo> entries_;  // from 1
  size_t count_ = 0;
  ZeroedArray<uint32_t> index_;  // open addressing by address, 0 = empty
  ZeroedArray<uint8_t> table_bytes_;
  size_t table_used_ = 0;
  ZeroedArray<uint64_t> fingerprints_;  // the revalidation's buffer
  uint32_t revalidate_ids_[kMaxRevalidate] = {};
  size_t revalidate_count_ = 0;
  ZeroedArray<char> text_;  // a name while it is decoded
  uint64_t resolved_ = 0;
};

}  // namespace gilspy::sampler
