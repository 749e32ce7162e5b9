#pragma once
// Struct layouts from a binary's DWARF (libdwarf): sizes of types and offsets of (nested) members. Used to
// check cpython_layouts/ against the real builds. Test-only: gilspy never needs DWARF at run time, so the
// gilspy binary does not link libdwarf.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gilspy::elf {

class DwarfTypes {
 public:
  // Throws Error(kElf) when the file cannot be opened or carries no DWARF.
  static DwarfTypes open(const std::string& path);
  ~DwarfTypes();
  DwarfTypes(DwarfTypes&&) noexcept;
  DwarfTypes& operator=(DwarfTypes&&) noexcept;

  // `type` is a struct tag ("_gil_runtime_state", "_is", "_ts", "pyruntimestate") or a typedef name
  // ("PyInterpreterState", "PyThreadState", "_PyRuntimeState"); the first complete definition wins.
  std::optional<uint64_t> size_of(std::string_view type) const;
  // `member_path` may go through nested structs: "ceval.gil", "interpreters.head", "threads.head".
  std::optional<uint64_t> offset_of(std::string_view type, std::string_view member_path) const;
  // The byte size of that member's type (typedefs followed): what a table's Field<T> must be as wide as.
  std::optional<uint64_t> member_size(std::string_view type, std::string_view member_path) const;

 private:
  struct Impl;
  explicit DwarfTypes(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gilspy::elf
