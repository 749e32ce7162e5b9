#include "elfutils/glibc_version.hpp"

#include <cctype>

#include "base/error.hpp"
#include "elfutils/elf_image.hpp"

namespace gilspy::elf {
namespace {

bool is_libc_name(std::string_view base) {
  return base == "libc.so.6" || (base.starts_with("libc-2.") && base.ends_with(".so"));
}

std::string_view basename_view(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::optional<GlibcVersion> from_file(pid_t pid, const std::string& path) {
  try {
    const auto image = ElfImage::open_in_process(pid, path);
    const auto rodata = image.section_bytes(".rodata");
    if (!rodata) return std::nullopt;
    return glibc_version_from_banner(
        std::string_view(reinterpret_cast<const char*>(rodata->data()), rodata->size()));
  } catch (const Error&) {
    return std::nullopt;  // unreadable: the caller falls back to the common layout
  }
}

}  // namespace

std::optional<GlibcVersion> glibc_version_from_banner(std::string_view bytes) {
  static constexpr std::string_view kLibrary = "GNU C Library";
  static constexpr std::string_view kRelease = "release version ";
  for (size_t at = bytes.find(kLibrary); at != std::string_view::npos; at = bytes.find(kLibrary, at + 1)) {
    const size_t end = bytes.find('\0', at);
    const std::string_view banner = bytes.substr(at, end == std::string_view::npos ? end : end - at);
    const size_t rel = banner.find(kRelease);
    if (rel == std::string_view::npos) continue;
    size_t i = rel + kRelease.size();
    auto number = [&](int& out) {
      const size_t start = i;
      out = 0;
      while (i < banner.size() && std::isdigit(static_cast<unsigned char>(banner[i])) && i - start < 4) {
        out = out * 10 + (banner[i++] - '0');
      }
      return i > start;
    };
    GlibcVersion v;
    if (!number(v.major) || i >= banner.size() || banner[i++] != '.' || !number(v.minor)) continue;
    return v;
  }
  return std::nullopt;
}

std::optional<GlibcVersion> locate_glibc(pid_t pid, const std::vector<Mapping>& maps,
                                         const std::string& fallback_path) {
  for (const auto& m : maps) {
    if (m.offset == 0 && !m.path.empty() && m.path[0] == '/' && is_libc_name(basename_view(m.path))) {
      if (auto v = from_file(pid, m.path)) return v;
    }
  }
  return fallback_path.empty() ? std::nullopt : from_file(pid, fallback_path);
}

}  // namespace gilspy::elf
