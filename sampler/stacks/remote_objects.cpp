#include "sampler/stacks/remote_objects.hpp"

#include <algorithm>
#include <cstring>

#include "base/byte_fields.hpp"

namespace gilspy::sampler {
namespace {

// Type flags (Include/object.h, the same bits in 3.8-3.15).
constexpr uint64_t kHeapType = uint64_t{1} << 9;
constexpr uint64_t kLongSubclass = uint64_t{1} << 24;
constexpr uint64_t kBytesSubclass = uint64_t{1} << 27;
constexpr uint64_t kUnicodeSubclass = uint64_t{1} << 28;
constexpr uint64_t kDictSubclass = uint64_t{1} << 29;

constexpr size_t kHeaderBytes = 64;  // a key's header and the start of its text, per key scanned

}  // namespace

RemoteObjects::RemoteObjects(MemoryReader& reader, const layouts::StackLayout& layout)
    : reader_(reader),
      layout_(layout),
      keys_(kMaxDictEntries),
      values_(kMaxDictEntries),
      entries_(kMaxDictEntries * 24),
      headers_(kBatch * kHeaderBytes),
      regions_(kBatch) {}

size_t RemoteObjects::read(std::span<const ReadRegion> regions) {
  const size_t n = reader_.read(regions);
  for (size_t i = 0; i < n; ++i) bytes_ += regions[i].len;
  return n;
}

RemoteObjects::TypeInfo* RemoteObjects::type_info(uint64_t type, bool need_slots) {
  if (type == 0 || (type & 7) != 0) return nullptr;
  TypeInfo* t = nullptr;
  for (size_t i = 0; i < type_count_; ++i) {
    if (types_[i].addr == type) t = &types_[i];
  }
  if (t == nullptr) {
    // A new type: what it is, from its name and flags. The table holds the built-in types and the few classes
    // whose attributes are read (threading.Thread and its subclasses); when full, the oldest class goes.
    uint64_t name_ptr = 0, flags = 0;
    const ReadRegion r[2] = {field_region(type, layout_.object.tp_name, &name_ptr),
                             field_region(type, layout_.object.tp_flags, &flags)};
    if (read(r) != 2) return nullptr;
    char name[16] = {};
    PyKind kind = PyKind::kOther;
    if ((flags & kHeapType) == 0 && name_ptr != 0 &&
        (read_one(name_ptr, name, sizeof name) || read_one(name_ptr, name, 8))) {
      const std::string_view n(name, strnlen(name, sizeof name));
      if (n == "str" && (flags & kUnicodeSubclass) != 0) kind = PyKind::kStr;
      if (n == "bytes" && (flags & kBytesSubclass) != 0) kind = PyKind::kBytes;
      if (n == "dict" && (flags & kDictSubclass) != 0) kind = PyKind::kDict;
      if (n == "int" && (flags & kLongSubclass) != 0) kind = PyKind::kInt;
      if (n == "code") kind = PyKind::kCode;
      if (n == "module") kind = PyKind::kModule;
    }
    if (type_count_ < kTypes) {
      t = &types_[type_count_++];
    } else {
      // Keep the built-in types: replace a class.
      t = &types_[kTypes - 1];
      for (size_t i = 0; i < kTypes; ++i) {
        if (types_[i].kind == PyKind::kOther) t = &types_[i];
      }
    }
    *t = TypeInfo{.addr = type, .kind = kind, .flags = flags};
  }
  if (need_slots && !t->slots_read) {
    const auto& o = layout_.object;
    const ReadRegion r[3] = {field_region(type, o.tp_basicsize, &t->basicsize),
                             field_region(type, o.tp_dictoffset, &t->dictoffset),
                             field_region(type, o.ht_cached_keys, &t->cached_keys)};
    const bool heap = (t->flags & kHeapType) != 0;
    if (read({r, heap ? 3u : 2u}) != (heap ? 3u : 2u)) return nullptr;
    if (!heap) t->cached_keys = 0;
    t->slots_read = true;
  }
  return t;
}

PyKind RemoteObjects::kind_of_type(uint64_t type) {
  const TypeInfo* t = type_info(type, false);
  return t == nullptr ? PyKind::kOther : t->kind;
}

PyKind RemoteObjects::kind_of(uint64_t obj) {
  uint64_t type = 0;
  if (obj == 0 || !read_field(obj, layout_.object.ob_type, &type)) return PyKind::kOther;
  return kind_of_type(type);
}

std::optional<StrShape> RemoteObjects::str_shape(RemoteBytes h) const {
  const auto& u = layout_.unicode;
  const uint32_t state = load(h, u.state) & 0xff;  // the upper bits are not the state's
  const int kind = static_cast<int>((state >> u.kind_shift) & ((1u << u.kind_bits) - 1));
  const bool compact = ((state >> u.compact_bit) & 1) != 0;
  const bool ascii = ((state >> u.ascii_bit) & 1) != 0;
  const int64_t length = load(h, u.length);
  if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) || length < 0 ||
      length > (int64_t{1} << 20)) {
    return std::nullopt;
  }
  return StrShape{.length = static_cast<uint64_t>(length),
                  .char_size = kind,
                  .ascii = ascii,
                  .data_offset = ascii ? u.ascii_data : u.compact_data};
}

std::optional<size_t> RemoteObjects::utf8_of(RemoteBytes data, uint64_t n, int char_size, std::span<char> out,
                                             bool* cut) {
  size_t used = 0;
  if (cut != nullptr) *cut = false;
  if (n > data.size() || !fits(data, 0, n * static_cast<uint64_t>(char_size))) return std::nullopt;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t cp = char_size == 1   ? load<uint8_t>(data, i)
                  : char_size == 2 ? load<uint16_t>(data, 2 * i)
                                   : load<uint32_t>(data, 4 * i);
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return std::nullopt;  // UTF-8 cannot carry it
    char enc[4];
    size_t len = 0;
    if (cp < 0x80) {
      enc[len++] = static_cast<char>(cp);
    } else if (cp < 0x800) {
      enc[len++] = static_cast<char>(0xC0 | (cp >> 6));
      enc[len++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      enc[len++] = static_cast<char>(0xE0 | (cp >> 12));
      enc[len++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      enc[len++] = static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      enc[len++] = static_cast<char>(0xF0 | (cp >> 18));
      enc[len++] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      enc[len++] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      enc[len++] = static_cast<char>(0x80 | (cp & 0x3F));
    }
    if (used + len > out.size()) {
      if (cut != nullptr) *cut = true;
      break;
    }
    std::memcpy(out.data() + used, enc, len);
    used += len;
  }
  return used;
}

std::optional<size_t> RemoteObjects::read_str(uint64_t obj, std::span<char> out, bool* cut) {
  uint8_t header[kHeaderBytes] = {};
  const size_t header_len = layout_.unicode.ascii_data;
  if (obj == 0 || header_len > sizeof header || !read_one(obj, header, header_len)) return std::nullopt;
  if (kind_of_type(load(header, layout_.object.ob_type)) != PyKind::kStr) return std::nullopt;
  const auto shape = str_shape(header);
  if (!shape) return std::nullopt;
  // No more characters than `out` can take (each is at least one byte of UTF-8); read in pieces of 1 KiB.
  const uint64_t chars = std::min<uint64_t>(shape->length, out.size());
  uint8_t buf[1024];
  size_t used = 0;
  bool was_cut = chars < shape->length;
  for (uint64_t done = 0; done < chars;) {
    const uint64_t take =
        std::min<uint64_t>(chars - done, sizeof buf / static_cast<size_t>(shape->char_size));
    if (!read_one(obj + shape->data_offset + done * static_cast<uint64_t>(shape->char_size), buf,
                  take * static_cast<uint64_t>(shape->char_size))) {
      return std::nullopt;
    }
    bool piece_cut = false;
    const auto n = utf8_of(buf, take, shape->char_size, out.subspan(used), &piece_cut);
    if (!n) return std::nullopt;
    used += *n;
    done += take;
    if (piece_cut) {
      was_cut = true;
      break;
    }
  }
  if (cut != nullptr) *cut = was_cut;
  return used;
}

std::optional<uint64_t> RemoteObjects::read_uint(uint64_t obj) {
  uint8_t b[48] = {};
  const auto& l = layout_.long_int;
  const size_t len = l.digits + 4 * 3;
  if (obj == 0 || len > sizeof b || !read_one(obj, b, len)) return std::nullopt;
  if (kind_of_type(load(b, layout_.object.ob_type)) != PyKind::kInt) return std::nullopt;
  const int64_t word = load(b, l.size_or_tag);
  int64_t ndigits = 0;
  if (l.tagged) {
    const int sign = static_cast<int>(word & 3);  // 0 positive, 1 zero, 2 negative
    if (sign == 1) return 0;
    if (sign != 0) return std::nullopt;
    ndigits = word >> 3;
  } else {
    if (word < 0) return std::nullopt;
    ndigits = word;
  }
  if (ndigits < 0 || ndigits > 3) return std::nullopt;
  uint64_t v = 0;
  for (int64_t i = ndigits - 1; i >= 0; --i) {
    const uint32_t d = load<uint32_t>(b, l.digits + 4 * static_cast<size_t>(i));
    if ((d >> l.digit_bits) != 0) return std::nullopt;
    if (i == 2 && (d >> 4) != 0) return std::nullopt;  // past 64 bits
    v = (v << l.digit_bits) | d;
  }
  return v;
}

bool RemoteObjects::read_dict(uint64_t dict) {
  items_ = 0;
  uint8_t b[64] = {};
  const auto& d = layout_.dict;
  const size_t len = std::max(d.ma_keys.end(), d.ma_values.end());
  if (dict == 0 || len > sizeof b || !read_one(dict, b, len)) return false;
  if (kind_of_type(load(b, layout_.object.ob_type)) != PyKind::kDict) return false;
  return read_keys(load(b, d.ma_keys), load(b, d.ma_values));
}

bool RemoteObjects::read_keys(uint64_t keys, uint64_t values) {
  items_ = 0;
  const auto& d = layout_.dict;
  uint8_t h[64] = {};
  if (keys == 0 || d.dk_indices > sizeof h || !read_one(keys, h, d.dk_indices)) return false;
  const int64_t nentries = load(h, d.dk_nentries);
  uint64_t entries = 0;
  size_t esize = 24, key_at = 8, value_at = 16;
  if (d.log2_keys) {
    const uint8_t log2_size = load(h, d.dk_log2_size), log2_index = load(h, d.dk_log2_index_bytes),
                  kind = load(h, d.dk_kind);
    if (log2_size > 30 || log2_index > 34 || kind > 2 || nentries > (int64_t{1} << log2_size)) return false;
    entries = keys + d.dk_indices + (uint64_t{1} << log2_index);
    if (kind != 0) esize = 16, key_at = 0, value_at = 8;  // unicode and split keys carry no hash
  } else {
    const int64_t size = load(h, d.dk_size);
    if (size <= 0 || size > (int64_t{1} << 30) || nentries > size) return false;
    const uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffLL ? 4 : 8;
    entries = keys + d.dk_indices + static_cast<uint64_t>(size) * width;
  }
  if (nentries < 0 || static_cast<size_t>(nentries) > kMaxDictEntries) return false;
  const size_t n = static_cast<size_t>(nentries);
  if (n == 0) return true;
  if (!read_one(entries, entries_.data(), n * esize)) return false;
  if (values != 0 && !read_one(values + d.values_items, values_.data(), n * 8)) return false;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = load<uint64_t>(RemoteBytes(entries_.data(), n * esize), i * esize + key_at);
    const uint64_t v = values != 0
                           ? values_[i]
                           : load<uint64_t>(RemoteBytes(entries_.data(), n * esize), i * esize + value_at);
    if (k == 0 || v == 0) continue;  // a deleted entry, or an attribute not set
    keys_[items_] = k;
    values_[items_] = v;
    ++items_;
  }
  return true;
}

uint64_t RemoteObjects::find_str_key(std::string_view want) {
  const size_t header_len = layout_.unicode.ascii_data;
  const size_t len = std::min(kHeaderBytes, header_len + want.size());
  if (header_len + want.size() > kHeaderBytes) return 0;  // longer keys are not looked up
  for (size_t start = 0; start < items_; start += kBatch) {
    const size_t n = std::min(kBatch, items_ - start);
    for (size_t i = 0; i < n; ++i) regions_[i] = {keys_[start + i], headers_.data() + i * kHeaderBytes, len};
    // A region that cannot be read (a short key at the very end of a mapping) stops the batch there: the rest
    // is read again after it.
    size_t done = 0;
    while (done < n) {
      const size_t got = read({regions_.data() + done, n - done});
      for (size_t i = done; i < done + got; ++i) {
        const RemoteBytes hdr(headers_.data() + i * kHeaderBytes, kHeaderBytes);
        if (kind_of_type(load(hdr, layout_.object.ob_type)) != PyKind::kStr) continue;
        const auto shape = str_shape(hdr);
        if (shape && shape->ascii && shape->length == want.size() &&
            std::memcmp(hdr.data() + header_len, want.data(), want.size()) == 0) {  // fits: checked above
          return values_[start + i];
        }
      }
      done += got + 1;
    }
  }
  return 0;
}

uint64_t RemoteObjects::module_global(uint64_t interp_addr, std::string_view module, std::string_view name) {
  uint64_t modules = 0;
  if (!read_field(interp_addr, layout_.interp_modules, &modules) || !read_dict(modules)) return 0;
  const uint64_t mod = find_str_key(module);
  if (mod == 0 || kind_of(mod) != PyKind::kModule) return 0;
  uint64_t module_dict = 0;
  if (!read_field(mod, layout_.module_dict, &module_dict) || !read_dict(module_dict)) return 0;
  return find_str_key(name);
}

uint64_t RemoteObjects::attribute(uint64_t obj, std::string_view name) {
  uint64_t type = 0;
  if (obj == 0 || !read_field(obj, layout_.object.ob_type, &type)) return 0;
  const TypeInfo* t = type_info(type, true);
  if (t == nullptr) return 0;
  const auto& a = layout_.attributes;
  using K = layouts::AttributeLayout::Kind;
  constexpr uint64_t kManagedDictAt =
      3 * 8;  // MANAGED_DICT_OFFSET: the dict (or 3.12's dict-or-values) before obj
  uint64_t dict = 0;
  bool have_items = false;
  const bool managed = a.kind != K::kDictOffset && (t->flags & a.managed_dict_flag) != 0;
  if (!managed) {
    if (t->dictoffset <= 0 || !read_one(obj + static_cast<uint64_t>(t->dictoffset), &dict, 8)) return 0;
  } else if (a.kind == K::kValuesPointer) {
    uint64_t words[2] = {};  // obj - 32: the values; obj - 24: the dict
    if (!read_one(obj - 4 * 8, words, sizeof words)) return 0;
    if (words[0] != 0) {
      if (!read_keys(t->cached_keys, words[0])) return 0;
      have_items = true;
    } else {
      dict = words[1];
    }
  } else if (a.kind == K::kDictOrValues) {
    uint64_t word = 0;
    if (!read_one(obj - kManagedDictAt, &word, 8)) return 0;
    if ((word & 1) != 0) {
      if (!read_keys(t->cached_keys, word + 1)) return 0;  // the values pointer is stored minus one
      have_items = true;
    } else {
      dict = word;
    }
  } else {  // kInlineValues
    uint8_t valid = 0;
    const uint64_t values = obj + static_cast<uint64_t>(t->basicsize);
    if ((t->flags & a.inline_values_flag) != 0 && t->basicsize > 0 &&
        read_field(values, a.inline_valid, &valid) && valid != 0) {
      if (!read_keys(t->cached_keys, values)) return 0;
      have_items = true;
    } else if (!read_one(obj - kManagedDictAt, &dict, 8)) {
      return 0;
    }
  }
  if (!have_items && !read_dict(dict)) return 0;
  return find_str_key(name);
}

}  // namespace gilspy::sampler
