// Built from raw + convert + base alone (tests/CMakeLists.txt): if `convert` ever needs the sampler (ptrace,
// process_vm_readv), this stops linking. Run as a test, it converts one raw file.
#include <cstdio>
#include <exception>

#include "convert/chrome_trace.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RAW OUT\n", argv[0]);
    return 2;
  }
  try {
    const auto report = gilspy::convert::convert_to_chrome_trace({argv[1]}, argv[2]);
    return report.inputs.size() == 1 && report.inputs[0].complete && report.events_written > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
