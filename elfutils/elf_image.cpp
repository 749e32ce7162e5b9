#include "elfutils/elf_image.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/address_range.hpp"
#include "base/error.hpp"

namespace gilspy::elf {

struct ElfImage::Impl {
  int fd = -1;
  Elf* elf = nullptr;
  ~Impl() {
    if (elf != nullptr) elf_end(elf);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kElf, "cannot read ELF file " + path + ": " + what);
}

}  // namespace

ElfImage::ElfImage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ElfImage::~ElfImage() = default;
ElfImage::ElfImage(ElfImage&&) noexcept = default;
ElfImage& ElfImage::operator=(ElfImage&&) noexcept = default;

ElfImage ElfImage::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::strerror(errno));
  return from_fd(fd, path);
}

int open_file_in_process(pid_t pid, const std::string& path, std::string* why, bool nonblocking) {
  const std::string root_path = "/proc/" + std::to_string(pid) + "/root";
  const int root = ::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    *why = std::strerror(errno);
    return -1;
  }
  const int flags = O_RDONLY | O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0);
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string relative = path.empty() || path[0] != '/' ? path : path.substr(1);
  int fd = static_cast<int>(::syscall(SYS_openat2, root, relative.c_str(), &how, sizeof how));
  if (fd < 0 && errno == ENOSYS) {  // kernels before 5.6: at least the last component is not a link
    fd = ::openat(root, relative.c_str(), flags | O_NOFOLLOW);
  }
  const int err = errno;
  ::close(root);
  if (fd < 0) *why = err == ELOOP ? "a symbolic link on the way (not followed)" : std::strerror(err);
  return fd;
}

ElfImage ElfImage::open_in_process(pid_t pid, const std::string& path) {
  std::string why;
  const int fd = open_file_in_process(pid, path, &why);
  const std::string shown = "/proc/" + std::to_string(pid) + "/root" + path;
  if (fd < 0) fail(shown, why);
  return from_fd(fd, shown);
}

ElfImage ElfImage::from_fd(int fd, const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->fd = fd;
  if (elf_version(EV_CURRENT) == EV_NONE) fail(path, "libelf is too old");
  impl->elf = elf_begin(impl->fd, ELF_C_READ_MMAP, nullptr);
  if (impl->elf == nullptr || elf_kind(impl->elf) != ELF_K_ELF) fail(path, "not an ELF file");
  GElf_Ehdr ehdr;
  if (gelf_getehdr(impl->elf, &ehdr) == nullptr) fail(path, elf_errmsg(-1));
  if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_machine != EM_X86_64) {
    fail(path, "only x86-64 ELF binaries are supported");
  }

  ElfImage image(std::move(impl));
  image.path_ = path;
  image.is_exec_ = ehdr.e_type == ET_EXEC;
  size_t phnum = 0;
  elf_getphdrnum(image.impl_->elf, &phnum);
  bool have_load = false;
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(image.impl_->elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    const uint64_t aligned = ph.p_vaddr - (ph.p_offset % (ph.p_align ? ph.p_align : 1));
    if (!have_load || aligned < image.first_load_vaddr_) image.first_load_vaddr_ = aligned;
    have_load = true;
  }
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(image.impl_->elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) != nullptr && sh.sh_type == SHT_SYMTAB) image.has_symtab_ = true;
  }
  return image;
}

void ElfImage::for_each_symbol(
    const std::function<bool(const char* name, const GElf_Sym& sym)>& visit) const {
  // .dynsym first (always there), then .symtab (absent in stripped binaries). Defined symbols only.
  for (const auto wanted : {SHT_DYNSYM, SHT_SYMTAB}) {
    Elf_Scn* scn = nullptr;
    while ((scn = elf_nextscn(impl_->elf, scn)) != nullptr) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != static_cast<unsigned>(wanted)) continue;
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr || sh.sh_entsize == 0) continue;
      const size_t count = sh.sh_size / sh.sh_entsize;
      for (size_t i = 0; i < count; ++i) {
        GElf_Sym sym;
        if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr || sym.st_shndx == SHN_UNDEF) continue;
        const char* name = elf_strptr(impl_->elf, sh.sh_link, sym.st_name);
        if (name != nullptr && !visit(name, sym)) return;
      }
    }
  }
}

std::optional<Symbol> ElfImage::symbol(const std::string& name) const {
  std::optional<Symbol> found;
  for_each_symbol([&](const char* sym_name, const GElf_Sym& sym) {
    if (name != sym_name) return true;
    found = Symbol{sym.st_value, sym.st_size};
    return false;
  });
  return found;
}

std::vector<NamedSymbol> ElfImage::functions_where(const std::function<bool(std::string_view)>& keep) const {
  std::vector<NamedSymbol> found;
  for_each_symbol([&](const char* name, const GElf_Sym& sym) {
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || !keep(name)) return true;
    const bool known =
        std::any_of(found.begin(), found.end(), [&](const NamedSymbol& s) { return s.name == name; });
    if (!known) found.push_back({name, Symbol{sym.st_value, sym.st_size}});
    return true;
  });
  return found;
}

std::optional<uint64_t> ElfImage::file_offset_of(uint64_t vaddr) const {
  size_t phnum = 0;
  elf_getphdrnum(impl_->elf, &phnum);
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(impl_->elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) return ph.p_offset + (vaddr - ph.p_vaddr);
  }
  return std::nullopt;
}

std::string ElfImage::descriptor_path() const {
  return "/proc/self/fd/" + std::to_string(impl_->fd);
}

std::optional<Section> ElfImage::section(const std::string& name) const {
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(impl_->elf, &shstrndx) != 0) return std::nullopt;
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(impl_->elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr) continue;
    const char* sec_name = elf_strptr(impl_->elf, shstrndx, sh.sh_name);
    if (sec_name != nullptr && name == sec_name) return Section{sh.sh_addr, sh.sh_size, sh.sh_offset};
  }
  return std::nullopt;
}

std::optional<std::vector<uint8_t>> ElfImage::section_bytes(const std::string& name) const {
  const auto sec = section(name);
  if (!sec) return std::nullopt;
  std::vector<uint8_t> bytes(sec->size);
  if (sec->size > 0 && ::pread(impl_->fd, bytes.data(), bytes.size(), static_cast<off_t>(sec->file_offset)) !=
                           static_cast<ssize_t>(bytes.size())) {
    return std::nullopt;
  }
  return bytes;
}

std::string ElfImage::soname() const {
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(impl_->elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_DYNAMIC) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || sh.sh_entsize == 0) continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Dyn dyn;
      if (gelf_getdyn(data, static_cast<int>(i), &dyn) != nullptr && dyn.d_tag == DT_SONAME) {
        const char* s = elf_strptr(impl_->elf, sh.sh_link, dyn.d_un.d_val);
        return s != nullptr ? s : "";
      }
    }
  }
  return "";
}

std::optional<std::vector<uint8_t>> ElfImage::read_vaddr(uint64_t vaddr, size_t len) const {
  size_t phnum = 0;
  elf_getphdrnum(impl_->elf, &phnum);
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(impl_->elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    if (!range_within(ph.p_vaddr, ph.p_filesz, vaddr, len)) continue;
    std::vector<uint8_t> bytes(len);
    const off_t off = static_cast<off_t>(ph.p_offset + (vaddr - ph.p_vaddr));
    if (::pread(impl_->fd, bytes.data(), len, off) != static_cast<ssize_t>(len)) return std::nullopt;
    return bytes;
  }
  return std::nullopt;
}

}  // namespace gilspy::elf
