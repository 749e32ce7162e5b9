#include "cli/top/gc_format.hpp"

#include <fmt/format.h>

#include "cli/top/top_format.hpp"

namespace gilspy::top {

std::string gc_row_text(const GcFigures& g) {
  return fmt::format(
      "GC  collections {}/{}/{} (gen0/1/2)   paused {} ({} %)  longest {}   GIL waiting in GC {}{}",
      g.collections[0], g.collections[1], g.collections[2], format_duration(g.pause_ns),
      format_percent(g.time_share), format_duration(g.longest_ns),
      g.wait_share ? format_percent(*g.wait_share) + " %" : std::string("-"),
      g.enabled ? "" : "   gc disabled");
}

}  // namespace gilspy::top
