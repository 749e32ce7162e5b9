#include "support/dwarf_types.hpp"

#include <dwarf.h>
#include <libdwarf.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.hpp"

// How it works: open() walks the top-level DIEs of every unit in .debug_info once (types are top-level in C,
// and walking siblings does not descend into function bodies) and remembers, per name, the global offset of
// the first complete struct/union definition (no DW_AT_declaration) and of the first typedef. Queries then go
// straight to those DIEs with dwarf_offdie_b. A typedef that leads to a declaration (the struct is only
// defined in another unit) is resolved through the struct-tag index. Every DIE, attribute and error libdwarf
// hands out is released as soon as it is no longer needed.

namespace gilspy::elf {

namespace {

// One Dwarf_Die, released with dwarf_dealloc_die.
class Die {
 public:
  Die() = default;
  explicit Die(Dwarf_Die die) : die_(die) {}
  Die(Die&& other) noexcept : die_(std::exchange(other.die_, nullptr)) {}
  Die& operator=(Die&& other) noexcept {
    if (this != &other) {
      reset();
      die_ = std::exchange(other.die_, nullptr);
    }
    return *this;
  }
  Die(const Die&) = delete;
  Die& operator=(const Die&) = delete;
  ~Die() { reset(); }
  Dwarf_Die get() const { return die_; }
  explicit operator bool() const { return die_ != nullptr; }

 private:
  void reset() {
    if (die_ != nullptr) dwarf_dealloc_die(die_);
    die_ = nullptr;
  }
  Dwarf_Die die_ = nullptr;
};

// One Dwarf_Attribute, released with dwarf_dealloc_attribute.
class Attr {
 public:
  explicit Attr(Dwarf_Attribute attr) : attr_(attr) {}
  Attr(const Attr&) = delete;
  Attr& operator=(const Attr&) = delete;
  ~Attr() {
    if (attr_ != nullptr) dwarf_dealloc_attribute(attr_);
  }
  Dwarf_Attribute get() const { return attr_; }

 private:
  Dwarf_Attribute attr_ = nullptr;
};

bool is_struct_like(Dwarf_Half tag) {
  return tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_class_type;
}

// Reads an unsigned LEB128; false when it runs past `end`.
bool read_uleb(const uint8_t*& p, const uint8_t* end, uint64_t* out) {
  uint64_t value = 0;
  unsigned shift = 0;
  while (p < end) {
    const uint8_t byte = *p++;
    if (shift < 64) value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    shift += 7;
    if ((byte & 0x80) == 0) {
      *out = value;
      return true;
    }
  }
  return false;
}

// DW_AT_data_member_location given as a location expression (DWARF 2/3 style): DW_OP_plus_uconst N.
std::optional<uint64_t> offset_from_expression(const uint8_t* p, uint64_t len) {
  const uint8_t* end = p + len;
  if (len == 0 || *p != DW_OP_plus_uconst) return std::nullopt;
  ++p;
  uint64_t value = 0;
  if (!read_uleb(p, end, &value) || p != end) return std::nullopt;
  return value;
}

}  // namespace

struct DwarfTypes::Impl {
  std::string path;
  Dwarf_Debug dbg = nullptr;
  std::unordered_map<std::string, Dwarf_Off> tags;      // struct/union tag -> first complete definition
  std::unordered_map<std::string, Dwarf_Off> typedefs;  // typedef name -> first typedef DIE

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (dbg != nullptr) {
      Dwarf_Error err = nullptr;
      dwarf_finish(dbg, &err);
    }
  }

  [[noreturn]] void fail(const std::string& what, Dwarf_Error err) const {
    std::string msg = "cannot read DWARF of " + path + ": " + what;
    if (err != nullptr) {
      const char* text = dwarf_errmsg(err);
      if (text != nullptr) msg += std::string(" (") + text + ")";
      dwarf_dealloc_error(dbg, err);
    }
    throw Error(ErrorKind::kElf, msg);
  }

  // DW_DLV_ERROR throws; otherwise the return code (DW_DLV_OK or DW_DLV_NO_ENTRY) comes back.
  int check(int rc, Dwarf_Error err, const char* what) const {
    if (rc == DW_DLV_ERROR) fail(what, err);
    return rc;
  }

  Die offdie(Dwarf_Off off) const {
    Dwarf_Die die = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_offdie_b(dbg, off, true, &die, &err), err, "dwarf_offdie_b") != DW_DLV_OK) {
      fail("no DIE at offset " + std::to_string(off), nullptr);
    }
    return Die(die);
  }

  Die child(const Die& die) const {
    Dwarf_Die out = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_child(die.get(), &out, &err), err, "dwarf_child") != DW_DLV_OK) return Die();
    return Die(out);
  }

  // The next sibling; a null `die` gives the unit DIE of the current unit.
  Die sibling(const Die& die) const {
    Dwarf_Die out = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_siblingof_b(dbg, die.get(), true, &out, &err), err, "dwarf_siblingof_b") != DW_DLV_OK) {
      return Die();
    }
    return Die(out);
  }

  Dwarf_Half tag(const Die& die) const {
    Dwarf_Half t = 0;
    Dwarf_Error err = nullptr;
    check(dwarf_tag(die.get(), &t, &err), err, "dwarf_tag");
    return t;
  }

  Dwarf_Off offset(const Die& die) const {
    Dwarf_Off off = 0;
    Dwarf_Error err = nullptr;
    check(dwarf_dieoffset(die.get(), &off, &err), err, "dwarf_dieoffset");
    return off;
  }

  // The DIE's name; empty for anonymous ones. The string lives in the DWARF sections (not to be freed).
  std::string_view name(const Die& die) const {
    char* text = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_diename(die.get(), &text, &err), err, "dwarf_diename") != DW_DLV_OK || text == nullptr) {
      return {};
    }
    return text;
  }

  bool has(const Die& die, Dwarf_Half attr) const {
    Dwarf_Bool present = false;
    Dwarf_Error err = nullptr;
    check(dwarf_hasattr(die.get(), attr, &present, &err), err, "dwarf_hasattr");
    return present != 0;
  }

  std::optional<uint64_t> udata(const Die& die, Dwarf_Half attr_num) const {
    Dwarf_Attribute raw = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_attr(die.get(), attr_num, &raw, &err), err, "dwarf_attr") != DW_DLV_OK)
      return std::nullopt;
    Attr attr(raw);
    Dwarf_Unsigned value = 0;
    if (check(dwarf_formudata(attr.get(), &value, &err), err, "dwarf_formudata") != DW_DLV_OK)
      return std::nullopt;
    return value;
  }

  // DW_AT_type as a global .debug_info offset; nullopt for `void`.
  std::optional<Dwarf_Off> type_of(const Die& die) const {
    Dwarf_Attribute raw = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_attr(die.get(), DW_AT_type, &raw, &err), err, "dwarf_attr") != DW_DLV_OK)
      return std::nullopt;
    Attr attr(raw);
    Dwarf_Off off = 0;
    if (check(dwarf_global_formref(attr.get(), &off, &err), err, "dwarf_global_formref") != DW_DLV_OK) {
      return std::nullopt;
    }
    return off;
  }

  // DW_AT_data_member_location: a constant (DWARF 4+) or a DW_OP_plus_uconst expression (older DWARF).
  std::optional<uint64_t> member_location(const Die& die) const {
    Dwarf_Attribute raw = nullptr;
    Dwarf_Error err = nullptr;
    if (check(dwarf_attr(die.get(), DW_AT_data_member_location, &raw, &err), err, "dwarf_attr") !=
        DW_DLV_OK) {
      return std::nullopt;
    }
    Attr attr(raw);
    Dwarf_Half form = 0;
    check(dwarf_whatform(attr.get(), &form, &err), err, "dwarf_whatform");
    if (form == DW_FORM_exprloc) {
      Dwarf_Unsigned len = 0;
      Dwarf_Ptr ptr = nullptr;
      check(dwarf_formexprloc(attr.get(), &len, &ptr, &err), err, "dwarf_formexprloc");
      return offset_from_expression(static_cast<const uint8_t*>(ptr), len);
    }
    if (form == DW_FORM_block1 || form == DW_FORM_block2 || form == DW_FORM_block4 || form == DW_FORM_block) {
      Dwarf_Block* block = nullptr;
      check(dwarf_formblock(attr.get(), &block, &err), err, "dwarf_formblock");
      const auto value = offset_from_expression(static_cast<const uint8_t*>(block->bl_data), block->bl_len);
      dwarf_dealloc(dbg, block, DW_DLA_BLOCK);
      return value;
    }
    Dwarf_Unsigned value = 0;
    check(dwarf_formudata(attr.get(), &value, &err), err, "dwarf_formudata (DW_AT_data_member_location)");
    return value;
  }

  // Offset in bytes of a member inside its struct; for a bit field, the byte that holds its lowest bit
  // (x86-64 is little-endian). Unions carry no location: 0.
  uint64_t member_offset(const Die& member) const {
    const uint64_t location = member_location(member).value_or(0);
    if (const auto data_bit_offset = udata(member, DW_AT_data_bit_offset)) {  // DWARF 4+
      return location + *data_bit_offset / 8;
    }
    if (const auto bit_offset = udata(member, DW_AT_bit_offset)) {  // DWARF 2/3: counted from the MSB
      const uint64_t bit_size = udata(member, DW_AT_bit_size).value_or(0);
      uint64_t storage = udata(member, DW_AT_byte_size).value_or(0);
      if (storage == 0) {
        if (const auto type = type_of(member)) {
          if (const auto resolved = resolve(*type))
            storage = udata(offdie(*resolved), DW_AT_byte_size).value_or(0);
        }
      }
      const uint64_t bits = storage * 8;
      if (bits >= *bit_offset + bit_size) return location + (bits - *bit_offset - bit_size) / 8;
    }
    return location;
  }

  // Follows typedef/const/volatile/restrict/atomic to the underlying type; a struct/union declaration is
  // replaced by the first complete definition of that tag. nullopt for `void` or a tag never defined.
  std::optional<Dwarf_Off> resolve(Dwarf_Off off) const {
    for (int depth = 0; depth < 64; ++depth) {
      const Die die = offdie(off);
      const Dwarf_Half t = tag(die);
      if (t == DW_TAG_typedef || t == DW_TAG_const_type || t == DW_TAG_volatile_type ||
          t == DW_TAG_restrict_type || t == DW_TAG_atomic_type) {
        const auto next = type_of(die);
        if (!next) return std::nullopt;
        off = *next;
        continue;
      }
      if (is_struct_like(t) && has(die, DW_AT_declaration)) {
        const auto it = tags.find(std::string(name(die)));
        if (it == tags.end()) return std::nullopt;
        return it->second;
      }
      return off;
    }
    fail("type chain too long at offset " + std::to_string(off), nullptr);
  }

  std::optional<Dwarf_Off> find_type(std::string_view type_name) const {
    const std::string key(type_name);
    if (const auto it = tags.find(key); it != tags.end()) return it->second;
    if (const auto it = typedefs.find(key); it != typedefs.end()) return resolve(it->second);
    return std::nullopt;
  }

  struct Found {
    uint64_t offset = 0;
    std::optional<Dwarf_Off> type;
  };

  // The member `member_name` of the struct/union at `struct_off`, looking through anonymous members.
  std::optional<Found> find_member(Dwarf_Off struct_off, std::string_view member_name, int depth = 0) const {
    if (depth > 16) return std::nullopt;
    const Die parent = offdie(struct_off);
    if (!is_struct_like(tag(parent))) return std::nullopt;
    for (Die m = child(parent); m; m = sibling(m)) {
      if (tag(m) != DW_TAG_member) continue;
      const std::string_view n = name(m);
      if (n == member_name) return Found{member_offset(m), type_of(m)};
      if (n.empty()) {  // anonymous struct/union member: its fields belong to the parent
        const auto type = type_of(m);
        const auto resolved = type ? resolve(*type) : std::nullopt;
        if (!resolved) continue;
        if (auto inner = find_member(*resolved, member_name, depth + 1)) {
          inner->offset += member_offset(m);
          return inner;
        }
      }
    }
    return std::nullopt;
  }

  void build_index() {
    for (;;) {
      Dwarf_Unsigned header_length = 0, type_offset = 0, next_header = 0;
      Dwarf_Half version = 0, address_size = 0, length_size = 0, extension_size = 0, unit_type = 0;
      Dwarf_Off abbrev_offset = 0;
      Dwarf_Sig8 signature{};
      Dwarf_Error err = nullptr;
      const int rc = dwarf_next_cu_header_d(dbg, true, &header_length, &version, &abbrev_offset,
                                            &address_size, &length_size, &extension_size, &signature,
                                            &type_offset, &next_header, &unit_type, &err);
      if (check(rc, err, "dwarf_next_cu_header_d") != DW_DLV_OK) break;
      const Die unit = sibling(Die());
      if (!unit) continue;
      for (Die die = child(unit); die; die = sibling(die)) {
        const Dwarf_Half t = tag(die);
        if (is_struct_like(t)) {
          if (has(die, DW_AT_declaration)) continue;
          const std::string_view n = name(die);
          if (!n.empty()) tags.try_emplace(std::string(n), offset(die));
        } else if (t == DW_TAG_typedef) {
          const std::string_view n = name(die);
          if (!n.empty()) typedefs.try_emplace(std::string(n), offset(die));
        }
      }
    }
  }
};

DwarfTypes::DwarfTypes(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DwarfTypes::~DwarfTypes() = default;
DwarfTypes::DwarfTypes(DwarfTypes&&) noexcept = default;
DwarfTypes& DwarfTypes::operator=(DwarfTypes&&) noexcept = default;

DwarfTypes DwarfTypes::open(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(ErrorKind::kElf, "cannot read DWARF of " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::kElf, "cannot read DWARF of " + path + ": not a regular file");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Dwarf_Error err = nullptr;
  const int rc = dwarf_init_path(path.c_str(), nullptr, 0, DW_DLC_READ, DW_GROUPNUMBER_ANY, nullptr, nullptr,
                                 &impl->dbg, nullptr, 0, nullptr, &err);
  if (rc == DW_DLV_ERROR) {
    std::string msg = "cannot read DWARF of " + path;
    if (err != nullptr) {
      const char* text = dwarf_errmsg(err);
      if (text != nullptr) msg += std::string(": ") + text;
      dwarf_dealloc(nullptr, err, DW_DLA_ERROR);  // no Dwarf_Debug exists: libdwarf frees it on its own
    }
    impl->dbg = nullptr;
    throw Error(ErrorKind::kElf, msg);
  }
  if (rc == DW_DLV_NO_ENTRY) {
    impl->dbg = nullptr;
    throw Error(ErrorKind::kElf,
                "no DWARF debug information in " + path + " (stripped, or not an object file)");
  }
  impl->build_index();
  if (impl->tags.empty() && impl->typedefs.empty()) {
    throw Error(ErrorKind::kElf, "no type information in the DWARF of " + path);
  }
  return DwarfTypes(std::move(impl));
}

std::optional<uint64_t> DwarfTypes::size_of(std::string_view type) const {
  const auto off = impl_->find_type(type);
  if (!off) return std::nullopt;
  return impl_->udata(impl_->offdie(*off), DW_AT_byte_size);
}

std::optional<uint64_t> DwarfTypes::offset_of(std::string_view type, std::string_view member_path) const {
  auto current = impl_->find_type(type);
  uint64_t total = 0;
  while (current) {
    const size_t dot = member_path.find('.');
    const std::string_view part = member_path.substr(0, dot);
    if (part.empty()) return std::nullopt;
    const auto found = impl_->find_member(*current, part);
    if (!found) return std::nullopt;
    total += found->offset;
    if (dot == std::string_view::npos) return total;
    member_path.remove_prefix(dot + 1);
    current = found->type ? impl_->resolve(*found->type) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint64_t> DwarfTypes::member_size(std::string_view type, std::string_view member_path) const {
  auto current = impl_->find_type(type);
  while (current) {
    const size_t dot = member_path.find('.');
    const std::string_view part = member_path.substr(0, dot);
    if (part.empty()) return std::nullopt;
    const auto found = impl_->find_member(*current, part);
    if (!found || !found->type) return std::nullopt;
    current = impl_->resolve(*found->type);
    if (dot == std::string_view::npos) {
      if (!current) return std::nullopt;
      const Die die = impl_->offdie(*current);
      // gcc writes a pointer's size as DW_FORM_implicit_const, which dwarf_formudata does not read; the
      // tables are x86-64's.
      if (impl_->tag(die) == DW_TAG_pointer_type) return 8;
      return impl_->udata(die, DW_AT_byte_size);
    }
    member_path.remove_prefix(dot + 1);
  }
  return std::nullopt;
}

}  // namespace gilspy::elf
