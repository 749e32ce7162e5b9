#pragma once
// Python objects laid out in fake memory (fake_memory_reader.hpp) as a given version's StackLayout says: str,
// bytes, int, dict, type, module, code objects, frames and thread states, enough for the stack and
// thread-name readers to walk. Test-only; every address is made up.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cpython_layouts/stack_layout.hpp"
#include "support/fake_memory_reader.hpp"

namespace gilspy::testing {

class FakePython {
 public:
  static constexpr uint64_t kBase = 0x1000000;
  static constexpr size_t kSize = size_t{8} << 20;

  explicit FakePython(const layouts::StackLayout& layout) : l(layout) {
    mem.map(kBase, kSize);
    str_type = type("str", uint64_t{1} << 28);
    bytes_type = type("bytes", uint64_t{1} << 27);
    dict_type = type("dict", uint64_t{1} << 29);
    int_type = type("int", uint64_t{1} << 24);
    code_type = type("code", 0);
    module_type = type("module", 0);
  }

  layouts::StackLayout l;
  sampler::FakeMemoryReader mem;
  uint64_t str_type = 0, bytes_type = 0, dict_type = 0, int_type = 0, code_type = 0, module_type = 0;

  uint64_t alloc(size_t n) {
    const uint64_t at = next_;
    next_ += (n + 15) & ~size_t{15};
    if (next_ > kBase + kSize) throw std::runtime_error("fake python: out of memory");
    return at;
  }
  template <class T>
  void put(uint64_t at, T v) {
    mem.put(at, v);
  }
  template <class T>
  void put(uint64_t base, Field<T> f, std::type_identity_t<T> v) {
    mem.put(base, f, v);
  }

  // A type object: tp_name, tp_flags, and (for a class) basicsize, dictoffset, cached keys.
  uint64_t type(const std::string& name, uint64_t flags, int64_t basicsize = 16, int64_t dictoffset = 0,
                uint64_t cached_keys = 0) {
    const uint64_t t = alloc(l.object.ht_cached_keys.end());
    const uint64_t n = alloc(name.size() + 16);
    mem.write(n, name.c_str(), name.size() + 1);
    put(t, l.object.tp_name, n);
    put(t, l.object.tp_flags, flags);
    put(t, l.object.tp_basicsize, basicsize);
    put(t, l.object.tp_dictoffset, dictoffset);
    put(t, l.object.ht_cached_keys, cached_keys);
    return t;
  }
  static constexpr uint64_t kHeapType = uint64_t{1} << 9;

  // A compact str of code points, 1, 2 or 4 bytes each (the smallest that fits, as CPython stores them).
  uint64_t str(const std::u32string& s) {
    uint32_t max = 0;
    for (const char32_t c : s) max = std::max<uint32_t>(max, c);
    const int kind = max < 0x100 ? 1 : max < 0x10000 ? 2 : 4;
    const bool ascii = max < 0x80;
    const uint32_t data = ascii ? l.unicode.ascii_data : l.unicode.compact_data;
    const uint64_t o = alloc(data + (s.size() + 1) * static_cast<size_t>(kind));
    put(o, l.object.ob_type, str_type);
    put(o, l.unicode.length, static_cast<int64_t>(s.size()));
    // Garbage in the upper bits of the state word: only its low byte is the state.
    const uint32_t state = 0xABCD0000u | (static_cast<uint32_t>(kind) << l.unicode.kind_shift) |
                           (1u << l.unicode.compact_bit) | (ascii ? 1u << l.unicode.ascii_bit : 0u);
    put(o, l.unicode.state, state);
    for (size_t i = 0; i < s.size(); ++i) {
      const uint32_t c = s[i];
      mem.write(o + data + i * static_cast<size_t>(kind), &c, static_cast<size_t>(kind));
    }
    return o;
  }
  uint64_t str(const std::string& ascii) { return str(std::u32string(ascii.begin(), ascii.end())); }

  uint64_t bytes(const std::vector<uint8_t>& b) {
    const uint64_t o = alloc(l.bytes.data + b.size() + 1);
    put(o, l.object.ob_type, bytes_type);
    put(o, l.bytes.size, static_cast<int64_t>(b.size()));
    if (!b.empty()) mem.write(o + l.bytes.data, b.data(), b.size());
    return o;
  }

  uint64_t integer(uint64_t v) {
    const uint64_t o = alloc(l.long_int.digits + 16);
    put(o, l.object.ob_type, int_type);
    std::vector<uint32_t> digits;
    for (uint64_t x = v; x != 0; x >>= l.long_int.digit_bits)
      digits.push_back(static_cast<uint32_t>(x & ((1u << l.long_int.digit_bits) - 1)));
    const auto n = static_cast<int64_t>(digits.size());
    put(o, l.long_int.size_or_tag, l.long_int.tagged ? (n == 0 ? 1 : n << 3) : n);
    for (size_t i = 0; i < digits.size(); ++i) put<uint32_t>(o + l.long_int.digits + 4 * i, digits[i]);
    return o;
  }

  // A keys object with these (key, value) entries, combined (values in the entries) or split (values apart:
  // returned in *values_out, `values_items` bytes after the values pointer).
  uint64_t keys(const std::vector<std::pair<uint64_t, uint64_t>>& items, bool unicode, bool split = false,
                uint64_t* values_out = nullptr) {
    const auto& d = l.dict;
    const size_t n = items.size();
    size_t size = 8;
    while (size < 2 * n) size *= 2;
    size_t index_bytes = size;  // one byte per index at these sizes
    const size_t esize = d.log2_keys && (unicode || split) ? 16 : 24;
    const uint64_t k = alloc(d.dk_indices + index_bytes + n * esize);
    if (d.log2_keys) {
      uint8_t log2 = 0;
      while ((size_t{1} << log2) < size) ++log2;
      put(k, d.dk_log2_size, log2);
      put(k, d.dk_log2_index_bytes, log2);  // 1-byte indices: log2(index bytes) == log2(size)
      put(k, d.dk_kind, split ? 2 : unicode ? 1 : 0);
    } else {
      put(k, d.dk_size, static_cast<int64_t>(size));
    }
    put(k, d.dk_nentries, static_cast<int64_t>(n));
    const uint64_t entries = k + d.dk_indices + index_bytes;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t e = entries + i * esize;
      if (esize == 24) {
        put<int64_t>(e, 1234 + static_cast<int64_t>(i));  // the hash
        put<uint64_t>(e + 8, items[i].first);
        if (!split) put<uint64_t>(e + 16, items[i].second);
      } else {
        put<uint64_t>(e, items[i].first);
        if (!split) put<uint64_t>(e + 8, items[i].second);
      }
    }
    if (split && values_out != nullptr) {
      const uint64_t v = alloc(d.values_items + 8 * n);
      for (size_t i = 0; i < n; ++i) put<uint64_t>(v + d.values_items + 8 * i, items[i].second);
      *values_out = v;
    }
    return k;
  }

  uint64_t dict(const std::vector<std::pair<uint64_t, uint64_t>>& items, bool unicode = true) {
    const uint64_t o = alloc(l.dict.ma_values.end());
    put(o, l.object.ob_type, dict_type);
    put(o, l.dict.ma_keys, keys(items, unicode));
    put(o, l.dict.ma_values, 0);
    return o;
  }

  uint64_t module(uint64_t md_dict) {
    const uint64_t o = alloc(64);
    put(o, l.object.ob_type, module_type);
    put(o, l.module_dict, md_dict);
    return o;
  }

  // An instance of a new class with attributes `attrs` (str keys), stored as this version stores them.
  uint64_t instance(const std::vector<std::pair<std::string, uint64_t>>& attrs) {
    std::vector<std::pair<uint64_t, uint64_t>> items;
    for (const auto& [name, value] : attrs) items.emplace_back(str(name), value);
    using K = layouts::AttributeLayout::Kind;
    const auto& a = l.attributes;
    const uint64_t prefix = a.kind == K::kDictOffset ? 0 : 32;  // managed dicts live before the object
    if (a.kind == K::kDictOffset) {
      const uint64_t t = type("Thread", kHeapType, 32, 16);
      const uint64_t o = alloc(32);
      put(o, l.object.ob_type, t);
      put<uint64_t>(o + 16, dict(items));
      return o;
    }
    uint64_t values = 0;
    const uint64_t shared = keys(items, true, true, &values);
    if (a.kind == K::kInlineValues) {
      const uint64_t t =
          type("Thread", kHeapType | a.managed_dict_flag | a.inline_values_flag, 16, -1, shared);
      const uint64_t base = alloc(prefix + 16 + 8 + 8 * items.size());
      const uint64_t o = base + prefix;
      put(o, l.object.ob_type, t);
      put(o + 16, a.inline_valid, 1);
      for (size_t i = 0; i < items.size(); ++i)
        put<uint64_t>(o + 16 + l.dict.values_items + 8 * i, items[i].second);
      return o;
    }
    const uint64_t t = type("Thread", kHeapType | a.managed_dict_flag, 16, -1, shared);
    const uint64_t base = alloc(prefix + 16);
    const uint64_t o = base + prefix;
    put(o, l.object.ob_type, t);
    if (a.kind == K::kValuesPointer) {
      put<uint64_t>(o - 32, values);
    } else {  // kDictOrValues: values + 1 would be odd; CPython stores values - 1
      put<uint64_t>(o - 24, values - 1);
    }
    return o;
  }

  // A code object: names, first line, a line table, `units` instructions (2 bytes each).
  uint64_t code(const std::string& qualname, const std::string& file, int first_line,
                const std::vector<uint8_t>& table, int64_t units) {
    const auto& c = l.code;
    const uint64_t o =
        alloc(std::max<size_t>(c.read_size, c.code_adaptive.value_or(0)) + 2 * static_cast<size_t>(units));
    put(o, l.object.ob_type, code_type);
    put(o, c.firstlineno, first_line);
    put(o, c.filename, str(file));
    put(o, c.name,
        str(qualname.substr(qualname.rfind('.') == std::string::npos ? 0 : qualname.rfind('.') + 1)));
    if (c.qualname) put(o, *c.qualname, str(qualname));
    put(o, c.linetable, bytes(table));
    if (c.code_adaptive) {
      put(o, l.object.ob_size, units);
    } else {
      put(o, *c.co_code, bytes(std::vector<uint8_t>(static_cast<size_t>(2 * units), 0)));
    }
    return o;
  }
  // Where instruction `unit` of `code` is (3.11+), or the f_lasti for it (3.8-3.10).
  int64_t instr(uint64_t code, int64_t unit) const {
    if (l.frame.kind == layouts::FrameLayout::Kind::kFrameObject)
      return unit * 2 / l.frame.lasti_bytes_per_unit;
    return static_cast<int64_t>(code + *l.code.code_adaptive) + 2 * unit;
  }

  uint64_t frame(uint64_t code, int64_t instr, uint64_t previous, uint8_t owner = 0) {
    const auto& f = l.frame;
    const uint64_t o = alloc(f.read_size + 16);
    put(o, f.code, code);
    put(o, f.previous, previous);
    if (f.kind == layouts::FrameLayout::Kind::kFrameObject) {
      put<int32_t>(o + f.instr, static_cast<int32_t>(instr));
    } else {
      put<uint64_t>(o + f.instr, static_cast<uint64_t>(instr));
    }
    if (f.owner) put(o, *f.owner, owner);
    if (f.refcount) put(o, *f.refcount, 1);  // a live frame object
    return o;
  }

  // A thread state whose innermost frame is `frame` (through a _PyCFrame on 3.11-3.12).
  uint64_t tstate(uint64_t frame) {
    const uint64_t ts = alloc(1024);
    set_frame(ts, frame);
    return ts;
  }
  void set_frame(uint64_t ts, uint64_t frame) {
    const auto& f = l.frame;
    if (f.cframe_current) {
      uint64_t cframe = 0;
      const auto r = sampler::field_region(ts, f.tstate_frame, &cframe);
      if (mem.read({&r, 1}) != 1 || cframe == 0) {
        cframe = alloc(32);
        put(ts, f.tstate_frame, cframe);
      }
      put(cframe, *f.cframe_current, frame);
    } else {
      put(ts, f.tstate_frame, frame);
    }
  }

 private:
  uint64_t next_ = kBase;
};

}  // namespace gilspy::testing
