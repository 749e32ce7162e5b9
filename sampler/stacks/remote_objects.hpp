#pragma once
// Reading Python objects out of the target: which built-in type an object is, a str as UTF-8, a small int, a
// dict's items. Layouts from cpython_layouts/stack_layout.hpp; every buffer is sized at construction, so
// nothing here allocates once built (the poll thread calls it between polls). Everything read is counted
// (bytes, reads) for the cost figures.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "base/byte_fields.hpp"
#include "cpython_layouts/stack_layout.hpp"
#include "sampler/remote/memory_reader.hpp"

namespace gilspy::sampler {

// A zero-filled array from calloc: pages nobody writes stay unmapped (the tables are sized for the worst
// case).
template <class T>
class ZeroedArray {
 public:
  explicit ZeroedArray(size_t n) : n_(n), p_(static_cast<T*>(std::calloc(n == 0 ? 1 : n, sizeof(T)))) {
    if (p_ == nullptr) throw std::bad_alloc();
  }
  ~ZeroedArray() { std::free(p_); }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  T* p_;
};

enum class PyKind : uint8_t { kOther, kStr, kBytes, kCode, kDict, kInt, kModule };

// A str object's shape, from its header.
struct StrShape {
  uint64_t length = 0;  // in code points
  int char_size = 1;    // 1 (ASCII or Latin-1), 2 (UCS-2), 4 (UCS-4)
  bool ascii = false;
  uint32_t data_offset = 0;
};

class RemoteObjects {
 public:
  static constexpr size_t kMaxDictEntries =
      16384;                             // a bigger dict is not read (sys.modules of large apps fits)
  static constexpr size_t kBatch = 512;  // objects read per process_vm_readv when scanning keys

  RemoteObjects(MemoryReader& reader, const layouts::StackLayout& layout);

  const layouts::StackLayout& layout() const { return layout_; }
  // Counted reads: every read of stacks and names goes through here.
  size_t read(std::span<const ReadRegion> regions);
  // Field `f` of the structure at `base`, at the field's own type.
  template <class T>
  bool read_field(uint64_t base, Field<T> f, T* into) {
    return read_one(base + f.off, into, sizeof(T));
  }
  bool read_one(uint64_t remote, void* local, size_t len) {
    const ReadRegion r{remote, local, len};
    return read({&r, 1}) == 1;
  }
  uint64_t bytes_read() const { return bytes_; }

  // Which built-in type the type object at `type` is: its tp_name and flags, read once and remembered (a
  // built-in type lives as long as the interpreter). kOther for anything else (a heap type never counts).
  PyKind kind_of_type(uint64_t type);
  PyKind kind_of(uint64_t obj);  // reads ob_type

  // The shape of a str from its header bytes (at least layout().unicode.ascii_data of them); nullopt when it
  // is not a compact string of a known kind.
  std::optional<StrShape> str_shape(RemoteBytes header) const;
  // A str's text as UTF-8 into `out` (cut at a character boundary when longer: *cut set). nullopt when `obj`
  // is not a str, cannot be read, or holds a code point UTF-8 cannot carry (a lone surrogate).
  std::optional<size_t> read_str(uint64_t obj, std::span<char> out, bool* cut = nullptr);
  // UTF-8 of `n` characters of `char_size` bytes each at `data`, as read_str() writes it.
  static std::optional<size_t> utf8_of(RemoteBytes data, uint64_t n, int char_size, std::span<char> out,
                                       bool* cut);
  // An int that fits 64 bits unsigned (a thread ident); nullopt otherwise.
  std::optional<uint64_t> read_uint(uint64_t obj);

  // A dict's live items (key, value), into the buffers below; false when `dict` is not a readable dict or is
  // larger than kMaxDictEntries. Values of a split dict come from its values array.
  bool read_dict(uint64_t dict);
  // Items of a keys object whose values live apart (an instance's values with its type's cached keys).
  bool read_keys(uint64_t keys, uint64_t values);
  size_t item_count() const { return items_; }
  uint64_t item_key(size_t i) const { return keys_[i]; }
  uint64_t item_value(size_t i) const { return values_[i]; }
  // The value of the str key `want` among the items read last; 0 when absent.
  uint64_t find_str_key(std::string_view want);

  // `name` in the namespace of module `module` (sys.modules[module].__dict__[name]) of the interpreter at
  // `interp_addr`; 0 when the module is not imported or cannot be read. Reuses the dict buffers.
  uint64_t module_global(uint64_t interp_addr, std::string_view module, std::string_view name);

  // An instance's attribute `name` (a str key), wherever this version keeps instance attributes; 0 when not
  // found. Reads the type's slots (remembered per type).
  uint64_t attribute(uint64_t obj, std::string_view name);

 private:
  struct TypeInfo {
    uint64_t addr = 0;
    PyKind kind = PyKind::kOther;
    uint64_t flags = 0;
    int64_t basicsize = 0, dictoffset = 0;
    uint64_t cached_keys = 0;
    bool slots_read = false;
  };
  TypeInfo* type_info(uint64_t type, bool need_slots);

  MemoryReader& reader_;
  layouts::StackLayout layout_;
  uint64_t bytes_ = 0;
  static constexpr size_t kTypes = 64;
  std::array<TypeInfo, kTypes> types_{};
  size_t type_count_ = 0;
  // The last dict read.
  ZeroedArray<uint64_t> keys_, values_;
  size_t items_ = 0;
  ZeroedArray<uint8_t> entries_;     // raw entries of a keys object
  ZeroedArray<uint8_t> headers_;     // kBatch key headers at a time
  ZeroedArray<ReadRegion> regions_;  // kBatch
};

}  // namespace gilspy::sampler
