#include "sampler/target/interpreter.hpp"

#include <array>
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

Interpreter attach_interpreter(pid_t pid, MemoryReader& reader, const elf::PythonBinary& binary) {
  Interpreter in;
  in.pid = pid;
  in.binary = binary;

  // The runtime's first bytes hold _Py_DebugOffsets where the version publishes them.
  std::vector<uint8_t> head(layouts::runtime_head_size(binary.version));
  if (!head.empty()) reader.read_exact(binary.runtime_addr, head.data(), head.size(), "_PyRuntime");
  try {
    in.layout = layouts::resolve_layout(binary.version, head);
  } catch (const Error& e) {
    // "process N runs Python 3.7.16, which gilspy does not support (...)", as elfutils says of 2.7 and 3.6.
    if (e.kind() != ErrorKind::kUnsupportedVersion) throw;
    const std::string what = e.what();
    throw Error(ErrorKind::kUnsupportedVersion,
                "process " + std::to_string(pid) + (what.rfind("Python ", 0) == 0 ? " runs " : ": ") + what);
  }
  try {
    in.stack_layout = layouts::resolve_stack_layout(binary.version, head);
    if (!in.stack_layout.known)
      in.stack_problem = "gilspy knows no frame layout for Python " + binary.version.text();
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
  // The GIL's cond is the target's glibc's pthread_cond_t, whatever glibc this machine has.
  const auto glibc = binary.glibc ? layouts::glibc_layout_for(binary.glibc->major, binary.glibc->minor)
                                  : layouts::glibc_layout_for(-1, -1);
  in.layout.gil.cond_wrefs = glibc.cond_wrefs;
  in.layout.gil.cond_wrefs_shift = glibc.cond_wrefs_shift;
  const auto& l = in.layout;

  in.interp_addr = reader.read_value<uint64_t>(binary.runtime_addr + l.runtime.interpreters_head,
                                               "_PyRuntime.interpreters.head");
  if (in.interp_addr == 0) throw Error(ErrorKind::kNotReady, "the interpreter is not initialised yet");
  in.interp_id = reader.read_value<int64_t>(in.interp_addr + l.interp.id, "the interpreter's id");
  in.gil_addr = locate_gil(reader, l, binary.runtime_addr, in.interp_addr);

  std::array<uint8_t, 256> gil_bytes{};
  if (l.gil.size > gil_bytes.size()) {
    throw Error(ErrorKind::kLayoutMismatch, "the GIL layout of Python " + binary.version.text() + " is " +
                                                std::to_string(l.gil.size) +
                                                " bytes, more than gilspy reads");
  }
  reader.read_exact(in.gil_addr, gil_bytes.data(), l.gil.size, "the GIL struct");
  // Every field inside the struct's size: then the poll, which reads that size, decodes every time.
  const auto first = decode_gil(RemoteBytes(gil_bytes.data(), l.gil.size), l.gil);
  if (!first) {
    throw Error(ErrorKind::kLayoutMismatch,
                "the GIL layout of Python " + binary.version.text() + " has fields past its size; refusing");
  }
  in.first_gil = *first;
  if (!in.first_gil.enabled) {
    throw Error(ErrorKind::kNoGil, "process " + std::to_string(pid) + " (Python " + binary.version.text() +
                                       "): free-threaded build, GIL disabled: nothing to record");
  }
  if (in.first_gil.locked == -1) throw Error(ErrorKind::kNotReady, "the GIL is not created yet");
  if (in.first_gil.locked != 0 && in.first_gil.locked != 1) {
    throw Error(ErrorKind::kLayoutMismatch, "the GIL struct of Python " + binary.version.text() +
                                                " does not look right (locked = " +
                                                std::to_string(in.first_gil.locked) + "); refusing to guess");
  }
  // The switch interval is whatever sys.setswitchinterval() was given (0 below 1 µs, any length above):
  // recorded as it is, not a test of the layout (the session says when it is unusual).

  // The first thread state must point back at this interpreter.
  const auto tstate =
      reader.read_value<uint64_t>(in.interp_addr + l.interp.threads_head, "the thread list head");
  if (tstate == 0) throw Error(ErrorKind::kNotReady, "the interpreter has no thread state yet");
  const auto back = reader.read_value<uint64_t>(tstate + l.tstate.interp, "a thread state's interp pointer");
  if (back != in.interp_addr) {
    throw Error(ErrorKind::kLayoutMismatch, "a thread state of Python " + binary.version.text() +
                                                " does not point back at its interpreter; refusing to guess");
  }
  if (l.gc.known) {
    in.gc_addr =
        (l.gc.home == layouts::GcHome::kRuntime ? binary.runtime_addr : in.interp_addr) + l.gc.offset;
  }
  return in;
}

}  // namespace gilspy::sampler
