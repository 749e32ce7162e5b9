#pragma once
// Random damage for the tests that feed readers broken input: one to three edits, each replacing a byte with
// one of `alphabet`, erasing 1..max_erase bytes, or inserting one. The same seed gives the same damage.
#include <cstddef>
#include <random>
#include <string>
#include <string_view>

namespace gilspy::test {

inline std::string damaged(std::string s, std::mt19937& rng, std::string_view alphabet, size_t max_erase) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < edits && !s.empty(); ++k) {
    const size_t at = rng() % s.size();
    switch (rng() % 3) {
      case 0:
        s[at] = alphabet[rng() % alphabet.size()];
        break;
      case 1:
        s.erase(at, 1 + rng() % max_erase);
        break;
      default:
        s.insert(at, 1, alphabet[rng() % alphabet.size()]);
        break;
    }
  }
  return s;
}

}  // namespace gilspy::test
