#pragma once
// Keys of `gilspy top`. Bytes read from the terminal become commands; escape sequences (arrows, function
// keys, Alt+key) are skipped whole, so that F1 (ESC O P) does not act as 'p'. Ctrl+C is not here: ISIG stays
// on and it arrives as SIGINT.
#include <string_view>
#include <vector>

#include "cli/top/top_render.hpp"

namespace gilspy::top {

enum class Key {
  kSortHold,
  kSortWait,
  kSortTid,
  kToggleTotals,
  kTogglePause,
  kReset,
  kQuit,
  kToggleCpu,
  kToggleFunctions
};

// h, w, i, t, p, r, q (and Q), c, f; anything else is ignored.
std::vector<Key> decode_keys(std::string_view bytes);

// Applies what only changes the view (sort, totals, pause) to `o`; returns false for the keys the session
// acts on itself (reset the model, quit).
bool apply_view_key(Key key, RenderOptions& o);

}  // namespace gilspy::top
