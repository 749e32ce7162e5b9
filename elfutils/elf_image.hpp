#pragma once
#include <sys/types.h>
// One ELF file on disk, read with libelf: symbols (.dynsym and .symtab), sections, and the bytes behind a
// virtual address. Knows nothing of CPython.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gelf.h>

namespace gilspy::elf {

struct Symbol {
  uint64_t value = 0;  // link-time virtual address
  uint64_t size = 0;
};

// A function symbol with its name (functions_where()).
struct NamedSymbol {
  std::string name;
  Symbol symbol;
};

struct Section {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t file_offset = 0;
};

// Opens `path` as process `pid` sees it (inside /proc/PID/root, no symlink followed: see
// ElfImage::open_in_process) for reading; the descriptor, or -1 with *why saying what failed. `nonblocking`:
// O_NONBLOCK too, so that a FIFO planted where a library was does not hang the reader.
int open_file_in_process(pid_t pid, const std::string& path, std::string* why, bool nonblocking = false);

class ElfImage {
 public:
  // Throws Error(kElf) when the file cannot be opened or is not ELF.
  static ElfImage open(const std::string& path);
  // `path` as process `pid` sees it (its mount namespace: a container's files), resolved inside the process's
  // root without following any symlink (the target controls its file system: a link planted there must not
  // make gilspy, as root, read something else). The maps' paths are canonical, so a real binary needs none.
  static ElfImage open_in_process(pid_t pid, const std::string& path);
  ~ElfImage();
  ElfImage(ElfImage&&) noexcept;
  ElfImage& operator=(ElfImage&&) noexcept;

  const std::string& path() const { return path_; }
  bool is_executable() const { return is_exec_; }  // ET_EXEC: load bias 0
  bool has_symtab() const { return has_symtab_; }  // not stripped
  // The lowest PT_LOAD virtual address, page-aligned: what offset 0 of the file maps to.
  uint64_t first_load_vaddr() const { return first_load_vaddr_; }
  std::optional<Symbol> symbol(const std::string& name) const;
  // Every defined function symbol of .dynsym and .symtab whose name `keep` accepts, each name once.
  std::vector<NamedSymbol> functions_where(const std::function<bool(std::string_view)>& keep) const;
  // Where the bytes of link-time address `vaddr` lie in the file (what a uprobe is placed by); nullopt
  // outside the PT_LOAD segments' file contents.
  std::optional<uint64_t> file_offset_of(uint64_t vaddr) const;
  // This very file, as a path the kernel resolves through gilspy's own descriptor (/proc/self/fd/N): valid
  // while the image lives, and it names what was opened, not what a path in the target's tree points to now.
  std::string descriptor_path() const;
  std::optional<Section> section(const std::string& name) const;
  std::string soname() const;
  // Bytes of the file backing [vaddr, vaddr+len), from the PT_LOAD segments; nullopt outside them
  // (or in .bss).
  std::optional<std::vector<uint8_t>> read_vaddr(uint64_t vaddr, size_t len) const;
  // The whole of a section's bytes.
  std::optional<std::vector<uint8_t>> section_bytes(const std::string& name) const;

 private:
  // Every defined symbol of .dynsym, then .symtab, until `visit` returns false.
  void for_each_symbol(const std::function<bool(const char* name, const GElf_Sym& sym)>& visit) const;
  struct Impl;
  explicit ElfImage(std::unique_ptr<Impl> impl);
  static ElfImage from_fd(int fd, const std::string& path);  // takes the descriptor
  std::unique_ptr<Impl> impl_;
  std::string path_;
  bool is_exec_ = false;
  bool has_symtab_ = false;
  uint64_t first_load_vaddr_ = 0;
};

}  // namespace gilspy::elf
