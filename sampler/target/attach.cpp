#include "sampler/target/attach.hpp"

#include <time.h>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "elfutils/python_binary.hpp"

namespace gilspy::sampler {

Interpreter attach(pid_t pid, MemoryReader& reader, const AttachOptions& options) {
  const int64_t deadline = monotonic_ns() + static_cast<int64_t>(options.timeout_s * 1e9);
  while (true) {
    try {
      const auto binary = elf::locate_python(pid);
      return attach_interpreter(pid, reader, binary);
    } catch (const Error& e) {
      const bool retryable = e.kind() == ErrorKind::kNotReady || e.kind() == ErrorKind::kBadAddress ||
                             (options.wait_for_python && e.kind() == ErrorKind::kNotPython);
      if (!retryable || monotonic_ns() >= deadline) {
        if (e.kind() == ErrorKind::kNotReady) {
          throw Error(ErrorKind::kNotReady, "process " + std::to_string(pid) +
                                                ": the Python interpreter is not ready (" + e.what() +
                                                "); it may be starting up or shutting down");
        }
        throw;
      }
    }
    const int64_t ns = static_cast<int64_t>(options.retry_interval_s * 1e9);
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace gilspy::sampler
