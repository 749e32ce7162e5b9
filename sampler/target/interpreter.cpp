#include "sampler/target/interpreter.hpp"

#include <array>
#include <span>
#include <vector>

#include "base/error.hpp"
#include "cpython_layouts/debug_offsets.hpp"

namespace gilspy::sampler {

uint64_t locate_gil(MemoryReader& reader, const layouts::Layout& layout, uint64_t runtime_addr,
                    uint64_t interp_addr) {
  if (layout.gil_home == layouts::GilHome::kRuntime) return runtime_addr + layout.gil_offset;
  const auto gil =
      reader.read_value<uint64_t>(interp_addr + layout.gil_offset, "the interpreter's ceval.gil");
  if (gil == 0) throw Error(ErrorKind::kNotReady, "the interpreter has no GIL yet");
  return gil;
}

namespace {

// The version's layout from its table or the runtime's first bytes (`head`: _Py_DebugOffsets where the
// version publishes them).
layouts::Layout attach_layout(pid_t pid, const elf::PythonBinary& binary, std::span<const uint8_t> head) {
  try {
    return layouts::resolve_layout(binary.version, head);
  } catch (const Error& e) {
    // "process N runs Python 3.7.16, which gilspy does not support (...)", as elfutils says of 2.7 and 3.6.
    if (e.kind() != ErrorKind::kUnsupportedVersion) throw;
    const std::string what = e.what();
    throw Error(ErrorKind::kUnsupportedVersion,
                "process " + std::to_string(pid) + (what.rfind("Python ", 0) == 0 ? " runs " : ": ") + what);
  }
}

// The stack layout, or why stacks are not read (never a reason to refuse the target).
void attach_stack_layout(Interpreter& in, std::span<const uint8_t> head) {
  try {
    in.stack_layout = layouts::resolve_stack_layout(in.binary.version, head);
    if (!in.stack_layout.known)
      in.stack_problem = "gilspy knows no frame layout for Python " + in.binary.version.text();
    if (in.layout.free_threaded) {
      // Objects carry more header there (ob_tid, a shared refcount), dicts a lock: layouts gilspy does not
      // have.
      in.stack_layout = {};
      in.stack_problem = "a free-threaded build's object layouts are not known to gilspy";
    }
  } catch (const Error& e) {
    in.stack_layout = {};
    in.stack_problem = e.what();
  }
}

// The GIL struct as attach first reads it, checked: every field inside its size (then the poll, which reads
// that size, decodes every time), enabled, created, and a `locked` that makes sense.
GilSample first_gil_of(MemoryReader& reader, const Interpreter& in) {
  const auto& l = in.layout;
  const std::string version = in.binary.version.text();
  std::array<uint8_t, 256> gil_bytes{};
  if (l.gil.size > gil_bytes.size()) {
    throw Error(ErrorKind::kLayoutMismatch, "the GIL layout of Python " + version + " is " +
                                                std::to_string(l.gil.size) +
                                                " bytes, more than gilspy reads");
  }
  reader.read_exact(in.gil_addr, gil_bytes.data(), l.gil.size, "the GIL struct");
  const auto first = decode_gil(RemoteBytes(gil_bytes.data(), l.gil.size), l.gil);
  if (!first) {
    throw Error(ErrorKind::kLayoutMismatch,
                "the GIL layout of Python " + version + " has fields past its size; refusing");
  }
  if (!first->enabled) {
    throw Error(ErrorKind::kNoGil, "process " + std::to_string(in.pid) + " (Python " + version +
                                       "): free-threaded build, GIL disabled: nothing to record");
  }
  if (first->locked == -1) throw Error(ErrorKind::kNotReady, "the GIL is not created yet");
  if (first->locked != 0 && first->locked != 1) {
    throw Error(ErrorKind::kLayoutMismatch, "the GIL struct of Python " + version +
                                                " does not look right (locked = " +
                                                std::to_string(first->locked) + "); refusing to guess");
  }
  // The switch interval is whatever sys.setswitchinterval() was given (0 below 1 µs, any length above):
  // recorded as it is, not a test of the layout (the session says when it is unusual).
  return *first;
}

// The first thread state must point back at this interpreter.
void expect_thread_state_points_back(MemoryReader& reader, const Interpreter& in) {
  const auto& l = in.layout;
  const auto tstate = reader.read_field(in.interp_addr, l.interp.threads_head, "the thread list head");
  if (tstate == 0) throw Error(ErrorKind::kNotReady, "the interpreter has no thread state yet");
  const auto back = reader.read_field(tstate, l.tstate.interp, "a thread state's interp pointer");
  if (back != in.interp_addr) {
    throw Error(ErrorKind::kLayoutMismatch, "a thread state of Python " + in.binary.version.text() +
                                                " does not point back at its interpreter; refusing to guess");
  }
}

}  // namespace

Interpreter attach_interpreter(pid_t pid, MemoryReader& reader, const elf::PythonBinary& binary) {
  Interpreter in;
  in.pid = pid;
  in.binary = binary;

  // The runtime's first bytes hold _Py_DebugOffsets where the version publishes them.
  std::vector<uint8_t> head(layouts::runtime_head_size(binary.version));
  if (!head.empty()) reader.read_exact(binary.runtime_addr, head.data(), head.size(), "_PyRuntime");
  in.layout = attach_layout(pid, binary, head);
  attach_stack_layout(in, head);
  // The GIL's cond is the target's glibc's pthread_cond_t, whatever glibc this machine has.
  const auto glibc = binary.glibc ? layouts::glibc_layout_for(binary.glibc->major, binary.glibc->minor)
                                  : layouts::glibc_layout_for(-1, -1);
  in.layout.gil.cond_wrefs = glibc.cond_wrefs;
  in.layout.gil.cond_wrefs_shift = glibc.cond_wrefs_shift;
  const auto& l = in.layout;

  in.interp_addr =
      reader.read_field(binary.runtime_addr, l.runtime.interpreters_head, "_PyRuntime.interpreters.head");
  if (in.interp_addr == 0) throw Error(ErrorKind::kNotReady, "the interpreter is not initialised yet");
  in.interp_id = reader.read_field(in.interp_addr, l.interp.id, "the interpreter's id");
  in.gil_addr = locate_gil(reader, l, binary.runtime_addr, in.interp_addr);
  in.first_gil = first_gil_of(reader, in);
  expect_thread_state_points_back(reader, in);
  if (l.gc.known) {
    in.gc_addr =
        (l.gc.home == layouts::GcHome::kRuntime ? binary.runtime_addr : in.interp_addr) + l.gc.offset;
  }
  return in;
}

}  // namespace gilspy::sampler
