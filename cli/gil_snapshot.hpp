#pragma once
// One look at a running interpreter, for `info` and `dump`: attach (waiting for a starting interpreter), and
// the GIL with every thread's role read at one moment.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sampler/proc/task_syscall.hpp"
#include "sampler/remote/memory_reader.hpp"
#include "sampler/target/gil_sample.hpp"
#include "sampler/target/interpreter.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::cli {

struct ThreadLook {
  sampler::ThreadRef ref;
  bool main = false;
  const char* role = "released";  // "holding", "waiting" or "released"
  sampler::TaskState task = sampler::TaskState::kUnknown;
  long syscall = -1;  // the system call it is blocked in (x86-64 number), -1 when running or unknown
  std::string comm;   // the kernel's name (target text: escape before printing)
};

struct GilSnapshot {
  sampler::GilSample gil;
  std::vector<ThreadLook> threads;  // in the interpreter's order
  int64_t holder_tid = 0;
  bool consistent = false;  // the GIL did not change hands while the threads were read
};

// What info and dump are told: the process, and how to read it.
struct LookOptions {
  int pid = 0;
  bool json = false;
  double wait_s = 2.0;
  bool strict_version = false;
  bool any_user = false;
};
// -p, --json, --any-user, --strict-version, --wait on `cmd`, into `o`.
void add_look_options(CLI::App* cmd, LookOptions& o);

// A running interpreter and its threads, as info and dump begin: the pid checked (a process, one gilspy may
// read), attached to (waiting for a starting interpreter), the version policy applied, the threads walked.
struct LookedAt {
  std::unique_ptr<sampler::RemoteMemoryReader> reader;
  sampler::Interpreter in;
  std::vector<sampler::ThreadRef> threads;
  bool truncated = false;  // more than ThreadWalker::kMaxThreads
  bool other_pid_namespace = false;
};
LookedAt look_at(const LookOptions& o);

// One JSON object on one line of stdout; target text that is not UTF-8 is replaced, not an error.
void print_json_line(const nlohmann::json& j);

// Attaches to `pid`; a python executable that has not mapped libpython yet is waited for up to `wait_s`,
// anything else is refused at once.
sampler::Interpreter attach_for_look(int pid, double wait_s, sampler::RemoteMemoryReader& reader);
sampler::GilSample read_gil_now(sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in);
// The GIL and the kernel's view of each thread are read at different moments: the GIL is read before and
// after the threads, and a snapshot in which it did not change hands is kept (a few tries), so the holder
// and the waiters shown belong together.
GilSnapshot read_gil_snapshot(int pid, sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in,
                              const std::vector<sampler::ThreadRef>& threads);

}  // namespace gilspy::cli
