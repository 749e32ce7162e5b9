#include "sampler/exact/gil_probes.hpp"

#include <string_view>

namespace gilspy::sampler::exact {

const char* to_string(ProbeKind k) {
  switch (k) {
    case ProbeKind::kTakeEntry:
      return "take_gil entry";
    case ProbeKind::kTakeReturn:
      return "take_gil return";
    case ProbeKind::kDropEntry:
      return "drop_gil entry";
  }
  return "?";
}

namespace {

// "take_gil", "take_gil.constprop.0": the function or a whole clone of it; not "take_gil.cold" (a block the
// compiler moved out of the function: its first byte is no entry) nor "take_gil_foo".
bool names_function(std::string_view symbol, std::string_view function) {
  if (!symbol.starts_with(function)) return false;
  const std::string_view rest = symbol.substr(function.size());
  return rest.empty() || (rest.front() == '.' && rest.find("cold") == std::string_view::npos);
}

}  // namespace

GilProbes find_gil_probes(const elf::ElfImage& image) {
  GilProbes found;
  const auto takes = image.functions_where([](std::string_view s) { return names_function(s, "take_gil"); });
  const auto drops = image.functions_where([](std::string_view s) { return names_function(s, "drop_gil"); });
  if (takes.empty() || drops.empty()) {
    found.problem = image.has_symtab() ? image.path() + " names no take_gil/drop_gil functions"
                                       : image.path() + " is stripped (no take_gil/drop_gil symbols)";
    return found;
  }
  auto add = [&](const elf::NamedSymbol& s, ProbeKind kind) {
    const auto offset = image.file_offset_of(s.symbol.value);
    if (offset) found.points.push_back({kind, s.name, *offset});
  };
  for (const auto& s : takes) {
    add(s, ProbeKind::kTakeEntry);
    add(s, ProbeKind::kTakeReturn);
  }
  for (const auto& s : drops) add(s, ProbeKind::kDropEntry);
  if (found.points.empty())
    found.problem = image.path() + ": take_gil/drop_gil lie outside its loaded segments";
  return found;
}

}  // namespace gilspy::sampler::exact
