#include "convert/json_writer.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include <nlohmann/json.hpp>

namespace gilspy::convert {
namespace {

// Bjoern Hoehrmann's UTF-8 decoder, as nlohmann::json's serializer has it (detail/output/serializer.hpp):
// byte classes, then the state transitions. kAccept: a code point is complete; kReject: the byte does not
// continue the sequence.
constexpr uint8_t kAccept = 0;
constexpr uint8_t kReject = 1;
constexpr std::array<uint8_t, 400> kUtf8d = {{
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 00..1F
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 20..3F
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 40..5F
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0,  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 60..7F
    1,  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    9,  9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,  // 80..9F
    7,  7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7,  7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,  // A0..BF
    8,  8, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2,  2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  // C0..DF
    10, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 3, 3,  // E0..EF
    11, 6, 6, 6, 5, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,  // F0..FF
    0,  1, 2, 3, 5, 8, 7, 1, 1, 1, 4, 6, 1, 1, 1, 1,  // s0..s0
    1,  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1,  0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1,  // s1..s2
    1,  2, 1, 1, 1, 1, 1, 2, 1, 2, 1, 1, 1, 1, 1, 1,
    1,  1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1,  // s3..s4
    1,  2, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1,
    1,  1, 1, 1, 1, 1, 1, 3, 1, 3, 1, 1, 1, 1, 1, 1,  // s5..s6
    1,  3, 1, 1, 1, 1, 1, 3, 1, 3, 1, 1, 1, 1, 1, 1,
    1,  3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // s7..s8
}};

uint8_t decode(uint8_t& state, uint32_t& codepoint, uint8_t byte) {
  const uint8_t type = kUtf8d[byte];
  codepoint = state != kAccept ? (byte & 0x3fu) | (codepoint << 6u) : (0xffu >> type) & byte;
  state = kUtf8d[256u + state * 16u + type];
  return state;
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The text of one complete code point whose last byte is `byte` (a multi-byte one's other bytes are written
// already): escaped where JSON needs it. Returns its length (at most 6).
size_t code_point_text(uint32_t codepoint, char byte, char* out) {
  const auto two = [&](char c) {
    out[0] = '\\';
    out[1] = c;
    return size_t{2};
  };
  switch (codepoint) {
    case 0x08:
      return two('b');
    case 0x09:
      return two('t');
    case 0x0A:
      return two('n');
    case 0x0C:
      return two('f');
    case 0x0D:
      return two('r');
    case 0x22:
      return two('"');
    case 0x5C:
      return two('\\');
    default:
      if (codepoint <= 0x1F) {
        constexpr char kHex[] = "0123456789abcdef";
        const char text[6] = {'\\', 'u', '0', '0', kHex[codepoint >> 4], kHex[codepoint & 0xF]};
        std::memcpy(out, text, 6);
        return 6;
      }
      out[0] = byte;
      return 1;
  }
}

}  // namespace

size_t plain_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && kPlainByte[static_cast<uint8_t>(s[i])]) ++i;
  return i;
}

size_t us_text(int64_t ns, char* out) {
  // Integer arithmetic: a double would lose the nanoseconds of a large offset.
  char* p = out;
  const bool negative = ns < 0;
  const uint64_t a = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (negative) *p++ = '-';
  const fmt::format_int whole(a / 1000);
  std::memcpy(p, whole.data(), whole.size());
  p += whole.size();
  const auto r = static_cast<unsigned>(a % 1000);
  *p++ = '.';
  *p++ = static_cast<char>('0' + r / 100);
  *p++ = static_cast<char>('0' + r / 10 % 10);
  *p++ = static_cast<char>('0' + r % 10);
  return static_cast<size_t>(p - out);
}

JsonWriter::JsonWriter(Sink sink)
    : sink_(std::move(sink)), data_(std::make_unique_for_overwrite<char[]>(256)), capacity_(256) {}

void JsonWriter::grow(size_t n) {
  const size_t capacity = std::max({capacity_ * 2, size_ + n, kDrainAt * 2});
  auto data = std::make_unique_for_overwrite<char[]>(capacity);
  if (size_ != 0) std::memcpy(data.get(), data_.get(), size_);
  data_ = std::move(data);
  capacity_ = capacity;
}

JsonWriter& JsonWriter::begin_object() {
  char* p = value_space(1);
  *p++ = '{';
  done(p);
  comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  char* p = value_space(1);
  *p++ = '[';
  done(p);
  comma_ = false;
  return *this;
}

void JsonWriter::escaped_value(char* start, std::string_view s) {
  done(start);
  append_escaped(s);
}

JsonWriter& JsonWriter::value(bool b) {
  const std::string_view text = b ? "true" : "false";
  char* p = value_space(text.size());
  std::memcpy(p, text.data(), text.size());
  done(p + text.size());
  return *this;
}

JsonWriter& JsonWriter::us(int64_t ns) {
  char* p = value_space(kUsTextMax);
  done(p + us_text(ns, p));
  return *this;
}

JsonWriter& JsonWriter::us_string(int64_t ns) {
  char* p = value_space(kUsTextMax + 2);
  *p++ = '"';
  p += us_text(ns, p);
  *p++ = '"';
  done(p);
  return *this;
}

JsonWriter& JsonWriter::fixed(double v, int decimals) {
  done(value_space(0));
  fmt::memory_buffer text;
  fmt::format_to(std::back_inserter(text), "{:.{}f}", v, decimals);
  append(std::string_view(text.data(), text.size()));
  return *this;
}

JsonWriter& JsonWriter::json(const nlohmann::json& doc) {
  done(value_space(0));
  append(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return *this;
}

void JsonWriter::drain() {
  if (size_ == 0) return;
  sink_(std::string_view(data_.get(), size_));
  size_ = 0;
}

// nlohmann::json's dump_escaped (ensure_ascii false, error_handler_t::replace), step for step: a byte that
// cannot continue the sequence before it drops that sequence for one U+FFFD and is read again on its own; a
// sequence cut off by the string's end is one U+FFFD too.
void JsonWriter::append_escaped(std::string_view s) {
  append("\"");
  size_t i = plain_prefix(s);
  append(s.substr(0, i));
  uint32_t codepoint = 0;
  uint8_t state = kAccept;
  size_t after_last_accept = size_;
  size_t undumped = 0;  // bytes of the sequence being read
  for (; i < s.size(); ++i) {
    const auto byte = static_cast<uint8_t>(s[i]);
    switch (decode(state, codepoint, byte)) {
      case kAccept: {
        char* p = space(6);
        done(p + code_point_text(codepoint, s[i], p));
        after_last_accept = size_;
        undumped = 0;
        break;
      }
      case kReject:
        if (undumped > 0) --i;  // read it again, on its own
        size_ = after_last_accept;
        append(kReplacement);
        after_last_accept = size_;
        undumped = 0;
        state = kAccept;
        break;
      default:  // inside a multi-byte sequence
        append(s.substr(i, 1));
        ++undumped;
        break;
    }
  }
  if (state != kAccept) {
    size_ = after_last_accept;
    append(kReplacement);
  }
  append("\"");
}

std::string json_string(std::string_view s) {
  std::string out;
  JsonWriter w([&](std::string_view text) { out.append(text); });
  w.value(s);
  w.drain();
  return out;
}

}  // namespace gilspy::convert
