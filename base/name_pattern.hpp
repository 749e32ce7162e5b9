#pragma once
// Thread names with their numbers taken out, so that threads started alike (a pool's workers, a server's
// per-request threads) fall together: in the summary's table and where ended threads are folded.
#include <string>

namespace gilspy {

// A digit run becomes '*': "thread 4711 (worker-3)" -> "thread * (worker-*)".
std::string name_pattern(const std::string& name);

}  // namespace gilspy
