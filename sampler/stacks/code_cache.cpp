#include "sampler/stacks/code_cache.hpp"

#include <algorithm>
#include <cstring>

#include "base/byte_fields.hpp"

namespace gilspy::sampler {
namespace {

constexpr size_t kIndexSlots = 2 * CodeCache::kEntries;  // a power of two

uint64_t hash_addr(uint64_t a) {
  return (a >> 4) * 0x9E3779B97F4A7C15ULL;
}

}  // namespace

CodeCache::CodeCache(RemoteObjects& objects, StackTables& tables)
    : objects_(objects),
      tables_(tables),
      layout_(objects.layout()),
      entries_(kEntries + 1),
      index_(kIndexSlots),
      table_bytes_(kTableBytes),
      fingerprints_(kMaxRevalidate * 4),
      text_(kMaxName) {
  const auto& c = layout_.code;
  // The pointer fields' span: filename, name, qualname and linetable.
  uint32_t lo = std::min(c.filename.off, c.name.off), hi = std::max(c.filename.off, c.name.off);
  lo = std::min(lo, c.linetable.off), hi = std::max(hi, c.linetable.off);
  if (c.qualname) lo = std::min(lo, c.qualname->off), hi = std::max(hi, c.qualname->off);
  fp_start_ = lo;
  fp_words_ = std::min<uint32_t>(4, (hi - lo) / 8 + 1);
}

void CodeCache::clear() {
  std::memset(index_.data(), 0, index_.size() * sizeof(uint32_t));
  count_ = 0;
  table_used_ = 0;
}

uint32_t* CodeCache::index_slot(uint64_t addr) {
  const size_t mask = kIndexSlots - 1;
  for (size_t i = hash_addr(addr) & mask;; i = (i + 1) & mask) {
    if (index_[i] == 0 || entries_[index_[i]].addr == addr) return &index_[i];
  }
}

size_t CodeCache::revalidate_regions(std::span<const uint64_t> addrs, std::span<ReadRegion> out) {
  size_t n = 0;
  for (const uint64_t a : addrs) {
    if (n == kMaxRevalidate || n == out.size()) break;
    const uint32_t id = *index_slot(a);
    if (id == 0 || std::find(revalidate_ids_, revalidate_ids_ + n, id) != revalidate_ids_ + n) continue;
    revalidate_ids_[n] = id;
    out[n] = {a + fp_start_, &fingerprints_[4 * n], 8 * fp_words_};
    ++n;
  }
  revalidate_count_ = n;
  return n;
}

bool CodeCache::revalidated(size_t got) {
  bool same = true;
  for (size_t i = 0; i < revalidate_count_; ++i) {
    CodeInfo& e = entries_[revalidate_ids_[i]];
    if (i < got && std::memcmp(&fingerprints_[4 * i], e.fingerprint, 8 * fp_words_) == 0) continue;
    // Changed (or unreadable): resolved again on lookup. Open addressing cannot delete in place, so the
    // entry keeps its slot with an address no object has.
    e.addr = 1;
    same = false;
  }
  revalidate_count_ = 0;
  return same;
}

CodeResult CodeCache::lookup(uint64_t addr, const CodeInfo** out) {
  *out = nullptr;
  if (addr == 0 || (addr & 7) != 0) return CodeResult::kNotCode;
  uint32_t* slot = index_slot(addr);
  if (*slot != 0) {
    *out = &entries_[*slot];
    return CodeResult::kOk;
  }
  // Full (entries, or room for the biggest line table): start over.
  if (count_ >= kEntries || table_used_ + kMaxTable > kTableBytes) {
    clear();
    slot = index_slot(addr);
  }
  CodeInfo info;
  const CodeResult r = resolve(addr, &info);
  if (r != CodeResult::kOk) return r;
  const auto id = static_cast<uint32_t>(++count_);
  entries_[id] = info;
  *slot = id;
  ++resolved_;
  *out = &entries_[id];
  return CodeResult::kOk;
}

CodeResult CodeCache::resolve(uint64_t addr, CodeInfo* out) {
  const auto& c = layout_.code;
  uint8_t head[256] = {};
  if (c.read_size > sizeof head || !objects_.read_one(addr, head, c.read_size)) return CodeResult::kNotCode;
  if (objects_.kind_of_type(load(head, layout_.object.ob_type)) != PyKind::kCode) return CodeResult::kNotCode;
  out->addr = addr;
  std::memcpy(out->fingerprint, head + fp_start_, 8 * fp_words_);
  out->first_line = load(head, c.firstlineno);
  CodeRefs refs;
  refs.filename = load(head, c.filename);
  refs.qualname = load(head, c.qualname.value_or(c.name));
  refs.table = load(head, c.linetable);
  if (out->first_line < 0) return CodeResult::kInvalid;
  // The instructions' length: 3.11+ Py_SIZE(code) code units inside the object; before, co_code's length.
  if (c.code_adaptive) {
    const int64_t units = load(head, layout_.object.ob_size);
    if (units <= 0 || units > (int64_t{1} << 24)) return CodeResult::kInvalid;
    out->code_bytes = 2 * units;
    out->instr_start = addr + *c.code_adaptive;
  } else {
    refs.co_code = load(head, *c.co_code);
  }
  uint8_t headers[4][64] = {};
  int64_t table_len = 0;
  if (const CodeResult r = read_code_headers(refs, headers, out, &table_len); r != CodeResult::kOk) return r;
  // The names' text and the table's bytes.
  uint32_t ids[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const CodeResult r = intern_name(i == 0 ? refs.filename : refs.qualname, headers[i], &ids[i]);
    if (r != CodeResult::kOk) return r;
  }
  if (table_len > 0 && !objects_.read_one(refs.table + layout_.bytes.data, table_bytes_.data() + table_used_,
                                          static_cast<size_t>(table_len))) {
    return CodeResult::kInvalid;
  }
  out->file = ids[0];
  out->qualname = ids[1];
  out->table_offset = static_cast<uint32_t>(table_used_);
  out->table_length = static_cast<uint32_t>(table_len);
  table_used_ += static_cast<size_t>(table_len);
  return CodeResult::kOk;
}

// The file name and qualified name, the line table's and co_code's headers: one read, each checked for its
// kind; co_code's length (before 3.11) into out->code_bytes, the line table's into *table_len.
CodeResult CodeCache::read_code_headers(const CodeRefs& refs, uint8_t (&h)[4][64], CodeInfo* out,
                                        int64_t* table_len) {
  const size_t str_header = layout_.unicode.ascii_data;
  const size_t bytes_header = layout_.bytes.data;
  if (str_header > 64 || bytes_header > 64) return CodeResult::kInvalid;
  const ReadRegion r[4] = {{refs.filename, h[0], str_header},
                           {refs.qualname, h[1], str_header},
                           {refs.table, h[2], bytes_header},
                           {refs.co_code, h[3], bytes_header}};
  const size_t want = refs.co_code != 0 ? 4 : 3;
  if (refs.filename == 0 || refs.qualname == 0 || refs.table == 0 || objects_.read({r, want}) != want)
    return CodeResult::kInvalid;
  for (int i = 0; i < 2; ++i) {
    if (objects_.kind_of_type(load(h[i], layout_.object.ob_type)) != PyKind::kStr)
      return CodeResult::kInvalid;
  }
  for (size_t i = 2; i < want; ++i) {
    if (objects_.kind_of_type(load(h[i], layout_.object.ob_type)) != PyKind::kBytes) {
      return CodeResult::kInvalid;
    }
  }
  if (refs.co_code != 0) {
    const int64_t n = load(h[3], layout_.bytes.size);
    if (n <= 0 || n > (int64_t{1} << 26)) return CodeResult::kInvalid;
    out->code_bytes = n;
  }
  *table_len = load(h[2], layout_.bytes.size);
  if (*table_len < 0 || static_cast<size_t>(*table_len) > kMaxTable) return CodeResult::kInvalid;
  return CodeResult::kOk;
}

// The text of the str at `obj` (whose header is `header`), interned into *id.
CodeResult CodeCache::intern_name(uint64_t obj, RemoteBytes header, uint32_t* id) {
  const auto shape = objects_.str_shape(header);
  if (!shape) return CodeResult::kInvalid;
  const uint64_t chars = std::min<uint64_t>(shape->length, kMaxName);
  uint8_t data[kMaxName * 4];
  if (chars > 0 &&
      !objects_.read_one(obj + shape->data_offset, data, chars * static_cast<uint64_t>(shape->char_size))) {
    return CodeResult::kInvalid;
  }
  const auto len =
      RemoteObjects::utf8_of(data, chars, shape->char_size, {text_.data(), text_.size()}, nullptr);
  if (!len) return CodeResult::kInvalid;  // not text UTF-8 can carry: not a name
  *id = tables_.intern_string({text_.data(), *len});
  if (*id == 0) return CodeResult::kFull;
  return CodeResult::kOk;
}

layouts::LineLookup CodeCache::line(const CodeInfo& c, int64_t instr) const {
  int64_t addr = 0;
  if (layout_.frame.kind == layouts::FrameLayout::Kind::kFrameObject) {
    addr = instr < 0 ? -1 : instr * layout_.frame.lasti_bytes_per_unit;
  } else {
    // In unsigned arithmetic: a torn read's instruction pointer may lie anywhere, and a signed difference
    // could overflow (undefined); a wrapped one lands outside the code and is refused below.
    addr = static_cast<int64_t>(static_cast<uint64_t>(instr) - c.instr_start);
    if (addr % 2 != 0) return {};
  }
  // An instruction outside the code is not this code's: the frame ran on while it was read.
  if (addr < -2 || addr >= c.code_bytes) return {};
  return layouts::line_for_address(
      layout_.code.line_table, {table_bytes_.data() + c.table_offset, c.table_length}, c.first_line, addr);
}

}  // namespace gilspy::sampler
