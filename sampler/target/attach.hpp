#pragma once
// Attaching to a process that may not be ready: a process launched a moment ago (the exec may not have
// happened, libpython may not be mapped, the GIL may not exist yet) is retried until `timeout_s`.
#include <sys/types.h>

#include "sampler/target/interpreter.hpp"

namespace gilspy::sampler {

struct AttachOptions {
  double timeout_s = 0;  // 0: one try
  double retry_interval_s = 0.001;
  bool wait_for_python = false;  // also retry while the process is not (yet) Python: launch mode
};

// Throws the last error when the deadline passes; errors that waiting cannot cure (no such process, no
// permission, unsupported version, layout mismatch) are thrown at once.
Interpreter attach(pid_t pid, MemoryReader& reader, const AttachOptions& options);

}  // namespace gilspy::sampler
