#pragma once
// A layout table's fields against a libpython's DWARF, for the layout tests: each mismatch is one doctest
// failure naming the version, the field and both numbers.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/byte_fields.hpp"
#include "support/dwarf_types.hpp"

namespace gilspy::testing {

inline std::string show(std::optional<uint64_t> v) {
  return v ? std::to_string(*v) : std::string("absent");
}

// One table number against DWARF's.
inline void expect(const std::string& version, const std::string& field, std::optional<uint64_t> table,
                   std::optional<uint64_t> dwarf) {
  CHECK_MESSAGE(table == dwarf, "python " << version << " " << field << ": table " << show(table)
                                          << ", DWARF " << show(dwarf));
}

// A typed table field: its offset, and its type's width against the member's (a wrong width reads a
// neighbour's bytes or half a value).
template <class T>
void expect_field(const std::string& version, const std::string& field, Field<T> table,
                  const elf::DwarfTypes& d, std::string_view type, std::string_view member) {
  expect(version, field, table.off, d.offset_of(type, member));
  expect(version, field + " width", sizeof(T), d.member_size(type, member));
}

// A typed field some versions lack: absent in both, or present in both at the same place and width.
template <class T>
void expect_opt_field(const std::string& version, const std::string& field, const OptField<T>& table,
                      const elf::DwarfTypes& d, std::string_view type, std::string_view member) {
  if (!table) {
    expect(version, field, std::nullopt, d.offset_of(type, member));
    return;
  }
  expect_field(version, field, *table, d, type, member);
}

template <class T>
std::optional<uint64_t> opt(const OptField<T>& v) {
  return v ? std::optional<uint64_t>(v->off) : std::nullopt;
}

inline std::optional<uint64_t> opt(std::optional<uint32_t> v) {
  return v ? std::optional<uint64_t>(*v) : std::nullopt;
}

}  // namespace gilspy::testing
