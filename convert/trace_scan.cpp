#include "convert/trace_scan.hpp"

#include <string>

#include "base/error.hpp"

namespace gilspy::convert {
namespace {

class Scanner {
 public:
  Scanner(InputBytes& in, TraceScanHandler& h) : in_(in), h_(h) {}

  void run() {
    skip_ws();
    if (peek() == 0xEF) {  // a UTF-8 byte order mark, as some Windows tools write
      for (const int expected : {0xEF, 0xBB, 0xBF}) {
        if (take() != expected) fail("it does not start with a JSON object or array");
      }
      skip_ws();
    }
    const int c = peek();
    if (c == '{') {
      object();
    } else if (c == '[') {
      h_.shape(TraceShape::kArray);
      events_array();
    } else {
      fail(c < 0 ? "it is empty" : "it does not start with a JSON object or array");
    }
    skip_ws();
    if (peek() >= 0) fail("more data follows the end of its JSON document");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorKind::kBadInput, in_.path() + " is not a trace gilspy can merge into: " + what +
                                          " (at byte offset " + std::to_string(offset_) + ")");
  }

  int peek() {
    if (pos_ == len_) {
      if (at_end_) return -1;
      // What was captured up to here stays; the buffer is refilled.
      len_ = in_.read(buf_, sizeof buf_);
      pos_ = 0;
      if (len_ == 0) {
        at_end_ = true;
        return -1;
      }
    }
    return static_cast<unsigned char>(buf_[pos_]);
  }
  int take() {
    const int c = peek();
    if (c < 0) return c;
    ++pos_;
    ++offset_;
    if (capturing_) {
      if (capture_.size() >= kMaxTraceValueBytes) {
        fail("one of its events or members is longer than " + std::to_string(kMaxTraceValueBytes >> 20) +
             " MiB");
      }
      capture_.push_back(static_cast<char>(c));
    }
    return c;
  }
  void expect(char c, const char* what) {
    if (take() != c) fail(std::string("expected ") + what);
  }
  void skip_ws() {
    for (int c = peek(); c == ' ' || c == '\t' || c == '\n' || c == '\r'; c = peek()) take();
  }

  // A string, from its opening quote; returns its text between the quotes, escapes as written (a key), or
  // nothing (a value: only skipped).
  std::string string(bool keep = false) {
    expect('"', "a string");
    std::string text;
    for (;;) {
      int c = take();
      if (c < 0) fail("it ends inside a string");
      if (c == '"') return text;
      if (c == '\\') {
        if (keep) text.push_back('\\');
        c = take();
        if (c < 0) fail("it ends inside a string");
      }
      if (keep) text.push_back(static_cast<char>(c));
    }
  }

  void value(int depth) {
    if (depth > kMaxTraceNesting)
      fail("values nested deeper than " + std::to_string(kMaxTraceNesting) + " levels");
    const int c = peek();
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      take();
      skip_ws();
      if (peek() == close) {
        take();
        return;
      }
      for (;;) {
        skip_ws();
        if (close == '}') {
          if (peek() != '"') fail("expected a key in an object");
          string();
          skip_ws();
          expect(':', "':' after a key");
          skip_ws();
        }
        value(depth + 1);
        skip_ws();
        const int d = take();
        if (d == ',') continue;
        if (d == close) return;
        fail(d < 0 ? "it ends before its last value closes" : std::string("expected ',' or '") + close + "'");
      }
    }
    if (c == '"') {
      string();
      return;
    }
    // A number, true, false or null: what a scalar is made of; the parser of the event checks which.
    size_t n = 0;
    for (int d = peek(); (d >= '0' && d <= '9') || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') ||
                         d == '-' || d == '+' || d == '.';
         d = peek()) {
      take();
      ++n;
    }
    if (n == 0) fail(c < 0 ? "it ends where a value should be" : "expected a value");
  }

  void events_array() {
    take();  // '['
    h_.events_begin();
    skip_ws();
    if (peek() == ']') {
      take();
      h_.events_end();
      return;
    }
    for (;;) {
      skip_ws();
      begin_capture();
      value(1);
      capturing_ = false;
      h_.event(capture_);
      skip_ws();
      const int d = take();
      if (d == ',') continue;
      if (d == ']') break;
      fail(d < 0 ? "it ends inside its events" : "expected ',' or ']' between events");
    }
    h_.events_end();
  }

  void object() {
    take();  // '{'
    h_.shape(TraceShape::kObject);
    bool events_seen = false;
    skip_ws();
    if (peek() == '}') {
      take();
    } else {
      for (;;) {
        skip_ws();
        if (peek() != '"') fail("expected a key");
        begin_capture();
        const std::string key = string(true);
        skip_ws();
        expect(':', "':' after a key");
        skip_ws();
        if (key == "traceEvents") {
          if (peek() != '[') fail("\"traceEvents\" is not an array");
          if (events_seen) fail("it has \"traceEvents\" twice");
          capturing_ = false;
          events_array();
          events_seen = true;
        } else {
          value(1);
          capturing_ = false;
          h_.member(key, capture_);
        }
        skip_ws();
        const int d = take();
        if (d == ',') continue;
        if (d == '}') break;
        fail(d < 0 ? "it ends before its object closes" : "expected ',' or '}' between its members");
      }
    }
    if (!events_seen) {
      throw Error(ErrorKind::kBadInput,
                  in_.path() +
                      " is not a trace gilspy can merge into: it has no \"traceEvents\" (a PyTorch "
                      "profiler trace) and is not a JSON array of events (Ascend's trace_view.json)");
    }
  }

  void begin_capture() {
    capture_.clear();
    capturing_ = true;
  }

  InputBytes& in_;
  TraceScanHandler& h_;
  char buf_[1 << 16];
  size_t len_ = 0, pos_ = 0;
  bool at_end_ = false;
  uint64_t offset_ = 0;
  bool capturing_ = false;
  std::string capture_;
};

}  // namespace

void scan_trace(InputBytes& in, TraceScanHandler& handler) {
  Scanner(in, handler).run();
}

}  // namespace gilspy::convert
