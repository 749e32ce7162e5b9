#pragma once
// What a call threw, as a value a test can check: the error's kind and message, or nullopt when it did not
// throw an Error (anything else propagates and fails the test).
#include <functional>
#include <optional>
#include <string>

#include "base/error.hpp"

namespace gilspy::test {

struct Caught {
  ErrorKind kind;
  std::string message;
};

inline std::optional<Caught> catch_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return Caught{e.kind(), e.what()};
  }
  return std::nullopt;
}

}  // namespace gilspy::test
