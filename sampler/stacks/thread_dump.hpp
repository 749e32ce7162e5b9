#pragma once
// One look at every thread's Python stack and Python name, for `gilspy dump`: unlike the stack sampler it is
// not on the poll thread and has no time budget, so it allocates what it returns and reads a stack again
// when a read was torn (the holder runs on while it is read; the others run no Python and keep still).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sampler/remote/memory_reader.hpp"
#include "sampler/stacks/code_cache.hpp"
#include "sampler/stacks/remote_objects.hpp"
#include "sampler/stacks/stack_tables.hpp"
#include "sampler/stacks/stack_walker.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::sampler {

struct DumpFrame {
  std::string function;  // the code object's qualified name (3.11+) or name
  std::string file;
  int32_t line = 0;
};

struct DumpStack {
  bool read = false;              // false: `why` says why there is no stack
  std::vector<DumpFrame> frames;  // innermost first
  bool truncated = false;         // deeper than kMaxDepth frames
  std::string why;
};

class ThreadDump {
 public:
  static constexpr size_t kMaxDepth = 256;
  static constexpr int kTries = 20;  // reads of a stack that keeps moving before it is given up

  ThreadDump(const Interpreter& interp, MemoryReader& reader);
  DumpStack stack(uint64_t tstate);
  // threading's name of each thread, by its ident (pthread_t); empty when threading is not imported or its
  // table cannot be read.
  std::unordered_map<uint64_t, std::string> python_names();

 private:
  Interpreter interp_;
  RemoteObjects objects_;
  StackTables tables_;
  CodeCache codes_;
  StackWalker walker_;
};

}  // namespace gilspy::sampler
