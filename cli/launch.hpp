#pragma once
// Launch mode: start a program and attach to its interpreter as soon as it has one.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sampler/remote/memory_reader.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::cli {

// Starts `command` (PATH lookup); an exec failure comes back as Error(kUsage) through a close-on-exec pipe.
// `stdout_to_stderr`: the program writes its stdout to the same place as gilspy's stderr.
pid_t launch(const std::vector<std::string>& command, bool stdout_to_stderr = false);

// A wait status as a shell would report it: the exit code, 128 + N for signal N.
int exit_status_of(int status);

// Attaches to the launched `child`, retrying until its interpreter exists or `timeout_s` passes. When the
// child exits first, sets *child_status and throws Error(kNoSuchProcess).
sampler::Interpreter attach_launched(pid_t child, sampler::RemoteMemoryReader& reader, double timeout_s,
                                     const std::string& program, std::optional<int>* child_status);

}  // namespace gilspy::cli
