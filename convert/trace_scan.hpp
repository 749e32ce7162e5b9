#pragma once
// Streams a framework profiler's trace (the file `convert --merge-into` adds GIL lanes to) without building
// it in memory, handing out its parts as the exact bytes of the file, so that what is copied is what was
// there:
//
//   PyTorch profiler (Kineto):  {"schemaVersion": 1, ..., "traceEvents": [ {...}, {...} ], ...,
//   "baseTimeNanoseconds": N}
//     -> member() for each top-level member but traceEvents (its text from the key's quote to the value's
//     end),
//        events_begin(), event() for each element of traceEvents, events_end(), in file order.
//   Ascend (torch_npu trace_view.json): [ {...}, {...} ]   a bare array
//     -> events_begin(), event() per element, events_end().
//
// The scanner checks the structure (brackets, strings, commas, what follows the root) and bounds nesting; the
// values themselves are left to whoever parses an event's text. Memory: one member or one event at a time.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "convert/gzip_io.hpp"

namespace gilspy::convert {

enum class TraceShape { kObject, kArray };

class TraceScanHandler {
 public:
  virtual ~TraceScanHandler() = default;
  virtual void shape(TraceShape s) = 0;  // first, once the root's first byte is read
  virtual void member(std::string_view key, std::string_view text) = 0;  // key unescaped when it is plain
  virtual void events_begin() = 0;
  virtual void event(std::string_view text) = 0;
  virtual void events_end() = 0;
};

// Values nested deeper than this inside an event or member are refused (Kineto writes 5 levels at most).
inline constexpr int kMaxTraceNesting = 256;
// One event, or one member beside "traceEvents", longer than this is refused: each is held in memory whole
// while it is parsed, and a 204 KB gzip bomb made of one 5 GB string aborted gilspy (std::bad_alloc).
// Kineto's events are a few KB, its largest members (deviceProperties, distributedInfo) tens of KB.
inline constexpr size_t kMaxTraceValueBytes = size_t{64} << 20;

// Scans the whole input. Throws Error(kBadInput) naming `in.path()`, what is wrong and the byte offset (of
// the decompressed text) for what is not a JSON object or array of that shape; and when an object has no
// "traceEvents" array: "has no \"traceEvents\"".
void scan_trace(InputBytes& in, TraceScanHandler& handler);

}  // namespace gilspy::convert
