#pragma once
// The one way convert/ writes JSON: a streaming writer that appends an object's fields to a buffer and drains
// it to the output (a file, a gzip stream, a test's string) in large writes. Every trace event goes through
// it (convert/trace_events.hpp), and so does every other byte of a trace: the text around the events, a
// profiler's events copied as they are (raw()), and the few small documents built with nlohmann::json
// (otherData, a merge's "gilspy" member: json()).
//
//   w.begin_object().field("ph", "X").field("pid", 4242).key("ts").us(12345678).end_object();
//   -> {"ph":"X","pid":4242,"ts":12345.678}
//
// Strings are escaped as nlohmann::json's dump with error_handler_t::replace escapes them (tested against it,
// byte for byte): ", \ and control characters escaped, invalid UTF-8 replaced by U+FFFD, the rest as it is.
// So a name from the target (a thread's, a function's) can never end its string or the line. Times are
// written from integer nanoseconds as microseconds with exactly three decimals (us()), never through a
// double.
#include <fmt/format.h>

#include <array>
#include <cassert>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

namespace gilspy::convert {

// The bytes a JSON string holds as they are: printable ASCII other than " and \.
inline constexpr std::array<bool, 256> kPlainByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

// How many bytes at the start of `s` a JSON string holds as they are (printable ASCII other than " and \):
// all of them for nearly every name.
size_t plain_prefix(std::string_view s);

// ns as microseconds with exactly three decimals ("1234.567", "-0.005"): at most 22 characters into `out`;
// returns how many.
size_t us_text(int64_t ns, char* out);
inline constexpr size_t kUsTextMax = 24;

class JsonWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  // The buffer goes out to `sink` at maybe_drain() once it holds kDrainAt bytes, and at drain().
  static constexpr size_t kDrainAt = size_t{1} << 16;
  explicit JsonWriter(Sink sink);
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Structure. A comma goes before a member or an element where one is due.
  JsonWriter& begin_object();
  JsonWriter& end_object() {
    append("}");
    comma_ = true;
    return *this;
  }
  JsonWriter& begin_array();
  JsonWriter& end_array() {
    append("]");
    comma_ = true;
    return *this;
  }
  // "k": where k is a name of gilspy's own ("ts", "cpu %"), never text from a target or a file: nothing in it
  // to escape (debug builds check).
  JsonWriter& key(std::string_view k) {
    assert(!k.empty());
    done(value_space(0, k));
    comma_ = false;
    return *this;
  }

  // Values: a member's (after key()) or an array's element.
  JsonWriter& value(std::string_view s) { return string_value({}, s); }  // a string, escaped
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  template <std::integral T>
  requires(!std::same_as<T, bool>) JsonWriter& value(T v) { return integer_value({}, v); }
  JsonWriter& us(int64_t ns);                 // microseconds, three decimals: 12345.678
  JsonWriter& us_string(int64_t ns);          // the same as a string: "12345.678" (Ascend's trace_view.json)
  JsonWriter& fixed(double v, int decimals);  // 12.500 (fmt's {:.Nf})
  // A whole document built with nlohmann::json (a summary, otherData), as its dump(-1) writes it with
  // invalid UTF-8 replaced.
  JsonWriter& json(const nlohmann::json& doc);

  // key(k), then value(v): in one go for a string or an integer, the members of nearly every event.
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return integer_value(k, v);
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      return string_value(k, v);
    } else {
      key(k);
      return value(v);
    }
  }

  // Text as it is, outside the structure above: what goes around the events, a profiler's events copied.
  // What follows it starts without a comma.
  void raw(std::string_view text) {
    append(text);
    comma_ = false;
  }

  void maybe_drain() {
    if (size_ >= kDrainAt) drain();
  }
  void drain();

 private:
  // Room for n more bytes at the buffer's end: one size check per value, not one per byte.
  char* space(size_t n) {
    if (capacity_ - size_ < n) grow(n);
    return data_.get() + size_;
  }
  void grow(size_t n);
  // Room for a value of up to n bytes, after the comma due before it and its key `k` if it has one; done()
  // says where the value ended.
  char* value_space(size_t n, std::string_view k = {}) {
    char* p = space(n + k.size() + 4);
    if (comma_) *p++ = ',';
    comma_ = true;
    if (!k.empty()) {
      assert(plain_prefix(k) == k.size());
      *p++ = '"';
      std::memcpy(p, k.data(), k.size());
      p += k.size();
      *p++ = '"';
      *p++ = ':';
    }
    return p;
  }
  // A string, copied byte by byte while every byte is plain (all of a name, nearly always), else escaped.
  JsonWriter& string_value(std::string_view k, std::string_view s) {
    char* const start = value_space(s.size() + 2, k);
    char* p = start;
    *p++ = '"';
    for (const char c : s) {
      if (!kPlainByte[static_cast<uint8_t>(c)]) {
        escaped_value(start, s);
        return *this;
      }
      *p++ = c;
    }
    *p++ = '"';
    done(p);
    return *this;
  }
  template <class T>
  JsonWriter& integer_value(std::string_view k, T v) {
    const fmt::format_int text(v);
    char* p = value_space(text.size(), k);
    std::memcpy(p, text.data(), text.size());
    done(p + text.size());
    return *this;
  }
  void done(const char* end) { size_ = static_cast<size_t>(end - data_.get()); }
  void append(std::string_view s) {
    std::memcpy(space(s.size()), s.data(), s.size());
    size_ += s.size();
  }
  void escaped_value(char* start, std::string_view s);
  void append_escaped(std::string_view s);

  Sink sink_;
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, capacity_ = 0;
  bool comma_ = false;  // the last thing written was a value: a comma goes before the next one
};

// `s` as a JSON string, quotes included, escaped as JsonWriter escapes it.
std::string json_string(std::string_view s);

}  // namespace gilspy::convert
