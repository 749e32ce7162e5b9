#include "base/name_pattern.hpp"

#include <cctype>

namespace gilspy {

std::string name_pattern(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      out.push_back('*');
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    } else {
      out.push_back(name[i++]);
    }
  }
  return out;
}

}  // namespace gilspy
