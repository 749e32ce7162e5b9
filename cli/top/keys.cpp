#include "cli/top/keys.hpp"

namespace gilspy::top {

std::vector<Key> decode_keys(std::string_view bytes) {
  std::vector<Key> keys;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c == '\x1b') {
      // CSI (ESC [ params final) or SS3 (ESC O x): skip to the final byte; otherwise ESC + one key (Alt+key).
      if (i + 1 < bytes.size() && bytes[i + 1] == '[') {
        i += 2;
        while (i < bytes.size() && !(bytes[i] >= 0x40 && bytes[i] <= 0x7E)) ++i;
      } else if (i + 1 < bytes.size() && bytes[i + 1] == 'O') {
        i += 2;
      } else {
        ++i;
      }
      continue;
    }
    switch (c) {
      case 'h':
        keys.push_back(Key::kSortHold);
        break;
      case 'w':
        keys.push_back(Key::kSortWait);
        break;
      case 'i':
        keys.push_back(Key::kSortTid);
        break;
      case 't':
        keys.push_back(Key::kToggleTotals);
        break;
      case 'p':
        keys.push_back(Key::kTogglePause);
        break;
      case 'r':
        keys.push_back(Key::kReset);
        break;
      case 'c':
        keys.push_back(Key::kToggleCpu);
        break;
      case 'f':
        keys.push_back(Key::kToggleFunctions);
        break;
      case 'q':
      case 'Q':
        keys.push_back(Key::kQuit);
        break;
      default:
        break;
    }
  }
  return keys;
}

bool apply_view_key(Key key, RenderOptions& o) {
  switch (key) {
    case Key::kSortHold:
      o.sort = SortKey::kHold;
      return true;
    case Key::kSortWait:
      o.sort = SortKey::kWait;
      return true;
    case Key::kSortTid:
      o.sort = SortKey::kTid;
      return true;
    case Key::kToggleTotals:
      o.totals = !o.totals;
      return true;
    case Key::kTogglePause:
      o.paused = !o.paused;
      return true;
    case Key::kToggleCpu:
      o.cpu = !o.cpu;
      return true;
    case Key::kToggleFunctions:
      o.functions = !o.functions;
      return true;
    case Key::kReset:
    case Key::kQuit:
      return false;
  }
  return false;
}

}  // namespace gilspy::top
