#pragma once
// The one error type of gilspy. It lives in base/, below every other module, so every layer throws it; only
// cli/ turns it into text and an exit code. `kind` lets callers (and tests) react to a class of failure
// without parsing the message; `what()` is a sentence a user can act on.
#include <stdexcept>
#include <string>

namespace gilspy {

enum class ErrorKind {
  kNoSuchProcess,       // the PID does not exist (or exited)
  kPermission,          // ptrace access denied
  kBadAddress,          // remote read hit unmapped memory
  kNotPython,           // no CPython runtime found in the process
  kUnsupportedVersion,  // a CPython we have no layout for
  kLayoutMismatch,      // what we read contradicts the layout
  kNotReady,            // interpreter not initialised yet (no GIL); retry
  kNoGil,               // free-threaded build with the GIL disabled
  kElf,                 // an ELF/DWARF file could not be read
  kIo,                  // files we write or read
  kBadInput,            // a file given to us is not what it should be
  kCorrupt,             // a file given to us starts as it should but is damaged further on (salvageable)
  kUsage,               // wrong arguments
  kBusy,                // a file gilspy would write is being written by another process (another gilspy)
  kUnavailable,  // what was asked for cannot work here (--exact: no uprobe PMU, no permission, stripped)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace gilspy
