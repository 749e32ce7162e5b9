#include "raw/fast_reader.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "raw/counter_lines.hpp"
#include "raw/event_line.hpp"

namespace gilspy::raw {
namespace {

using nlohmann::json;

// Lines of a stream, without their '\n'. A line longer than kMaxLine ends the fast path (no event is that
// long; a summary of thousands of threads is far below it).
class LineReader {
 public:
  static constexpr size_t kChunk = size_t{1} << 20;
  static constexpr size_t kMaxLine = size_t{64} << 20;

  explicit LineReader(std::istream& in) : in_(in) {}

  // The next line; nullopt at the end of the input or for a line too long. `terminated`: it ended in '\n'.
  std::optional<std::string_view> next(bool* terminated) {
    for (;;) {
      const char* nl = end_ > pos_
                           ? static_cast<const char*>(std::memchr(buf_.data() + pos_, '\n', end_ - pos_))
                           : nullptr;
      if (nl != nullptr) {
        const size_t at = static_cast<size_t>(nl - buf_.data());
        std::string_view line(buf_.data() + pos_, at - pos_);
        pos_ = at + 1;
        *terminated = true;
        return line;
      }
      if (eof_) {
        if (pos_ == end_) return std::nullopt;
        std::string_view line(buf_.data() + pos_, end_ - pos_);
        pos_ = end_;
        *terminated = false;
        return line;
      }
      if (end_ - pos_ > kMaxLine) return std::nullopt;
      fill();
    }
  }
  // Whether nothing follows what was read.
  bool at_end() {
    if (pos_ < end_) return false;
    if (!eof_) fill();
    return pos_ == end_;
  }

 private:
  void fill() {
    // Keep the unfinished line at the front, read the next chunk after it.
    if (pos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
      end_ -= pos_;
      pos_ = 0;
    }
    if (buf_.size() < end_ + kChunk) buf_.resize(end_ + kChunk);
    in_.read(buf_.data() + end_, static_cast<std::streamsize>(kChunk));
    const auto got = in_.gcount();
    end_ += static_cast<size_t>(got);
    if (got == 0 || !in_) eof_ = true;
  }

  std::istream& in_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
};

bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// Whether brackets nest at most kMaxNesting deep (strings skipped): before handing a line to nlohmann::json,
// whose values are then safe to dump and destroy.
bool nesting_ok(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::optional<json> parse_value(std::string_view s) {
  if (!nesting_ok(s)) return std::nullopt;
  json v = json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

// A JSON integer as the Writer writes it: -?(0|[1-9][0-9]*), within int64. Anything else (a float, a leading
// zero, "-0", out of range) is left to nlohmann's reading of the line.
bool parse_int(std::string_view s, size_t& i, int64_t& out) {
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  const size_t first = i;
  int64_t v = 0;
  // 18 digits cannot overflow; longer numbers (ns past 31 years, addresses) go the generic way.
  const size_t stop = std::min(s.size(), first + 18);
  while (i < stop && static_cast<unsigned char>(s[i] - '0') < 10) {
    v = v * 10 + (s[i] - '0');
    ++i;
  }
  const size_t digits = i - first;
  if (digits == 0 || (i < s.size() && static_cast<unsigned char>(s[i] - '0') < 10)) return false;
  if ((digits > 1 && s[first] == '0') || (negative && v == 0)) return false;
  out = negative ? -v : v;
  return true;
}

// The integers of `["K",a,b,...]` (kind K one letter) into `f`; false when the line has another form (a
// string field, spaces, no fields) or more than f.size() fields.
bool int_fields(std::string_view s, std::array<int64_t, 8>& f, size_t& n) {
  if (s.size() < 7 || s[0] != '[' || s[1] != '"' || s[3] != '"' || s[4] != ',' || s.back() != ']')
    return false;
  size_t i = 5;
  n = 0;
  for (;;) {
    if (n == f.size() || !parse_int(s, i, f[n])) return false;
    ++n;
    if (s[i] == ']') return i + 1 == s.size();
    if (s[i] != ',') return false;
    ++i;
  }
}

bool moment_ok(int64_t t) {
  return t >= -kMaxEventNs && t <= kMaxEventNs;
}
bool duration_ok(int64_t d) {
  return d >= 0 && d <= kMaxEventNs;
}

// The hand-parsed kinds: exactly what record_from_json() makes of the same line, with the same limits;
// nullopt for a line it must read (another kind, another form) or one that breaks a limit (then the SAX
// reader says so).
enum class Fast { kRecord, kGeneric, kGiveUp };
Fast fast_record(std::string_view s, Record& r) {
  if (CounterSample c; fast_counter_sample(s, c)) {  // "C": as many lines as H and W (raw/counter_lines.hpp)
    r = c;
    return Fast::kRecord;
  }
  std::array<int64_t, 8> f{};
  size_t n = 0;
  if (!int_fields(s, f, n)) return Fast::kGeneric;
  auto need = [&](size_t k) { return n >= k; };
  switch (s[2]) {
    case 'H':
    case 'W':
      if (!need(3)) return Fast::kGiveUp;
      if (!moment_ok(f[1]) || !duration_ok(f[2])) return Fast::kGiveUp;
      if (s[2] == 'H') {
        r = Hold{.tid = f[0], .ts = f[1], .dur = f[2]};
      } else {
        r = Wait{.tid = f[0], .ts = f[1], .dur = f[2]};
      }
      return Fast::kRecord;
    case 'N':
      if (!need(2) || !moment_ok(f[0])) return Fast::kGiveUp;
      r = Waiters{.ts = f[0], .n = static_cast<uint64_t>(f[1])};
      return Fast::kRecord;
    case 'E':
      if (!need(2) || !moment_ok(f[1]) || (n > 2 && !duration_ok(f[2]))) return Fast::kGiveUp;
      r = ThreadEnd{.tid = f[0], .ts = f[1], .state_se_ns = n > 2 ? f[2] : -1};
      return Fast::kRecord;
    case 'S':
      if (!need(6) || !moment_ok(f[0])) return Fast::kGiveUp;
      r = Stats{.ts = f[0],
                .polls = static_cast<uint64_t>(f[1]),
                .late = static_cast<uint64_t>(f[2]),
                .missed = static_cast<uint64_t>(f[3]),
                .handoffs_seen = static_cast<uint64_t>(f[4]),
                .handoffs_total = static_cast<uint64_t>(f[5])};
      return Fast::kRecord;
    case 'P':
      if (!need(2) || !duration_ok(f[1])) return Fast::kGiveUp;
      r = ProcessStopped{.ts = f[0], .dur = f[1]};
      return Fast::kRecord;
    default:
      return Fast::kGeneric;  // T has a string; kinds added later are read as the SAX reader reads them
  }
}

const int64_t* duration_of(const Record& r) {
  if (const auto* h = std::get_if<Hold>(&r)) return &h->dur;
  if (const auto* w = std::get_if<Wait>(&r)) return &w->dur;
  return nullptr;
}

// Each step below reads its part of the file as the Writer writes it (raw_format.hpp), or says it cannot
// vouch for it (nullopt, false).

// {"format":"gilspy-raw","format_version":N,
std::optional<int64_t> fast_head_version(LineReader& lines) {
  bool terminated = false;
  const auto line = lines.next(&terminated);
  constexpr std::string_view kHead = R"({"format":"gilspy-raw","format_version":)";
  if (!line || !terminated || !starts_with(*line, kHead) || !ends_with(*line, ",")) return std::nullopt;
  const std::string_view version_text = line->substr(kHead.size(), line->size() - kHead.size() - 1);
  size_t vi = 0;
  int64_t version = 0;
  if (!parse_int(version_text, vi, version) || vi != version_text.size() || version < 0 ||
      version > kFormatVersion) {
    return std::nullopt;
  }
  return version;
}

// "meta":{...},
std::optional<Meta> fast_meta(LineReader& lines) {
  bool terminated = false;
  const auto line = lines.next(&terminated);
  if (!line || !terminated || !starts_with(*line, "\"meta\":{") || !ends_with(*line, "},"))
    return std::nullopt;
  const auto meta_json = parse_value(line->substr(7, line->size() - 8));
  if (!meta_json) return std::nullopt;
  try {
    return meta_from_json(*meta_json);
  } catch (const Error&) {
    return std::nullopt;  // the SAX reader names what is missing
  }
}

// One event line without its ',': the hand-parsed kinds, else through nlohmann::json.
bool fast_event(std::string_view event, size_t index, const std::string& name, Record& r) {
  const Fast how = fast_record(event, r);
  if (how != Fast::kGeneric) return how == Fast::kRecord;
  const auto a = parse_value(event);
  if (!a) return false;
  std::optional<Record> parsed;
  try {
    parsed = record_from_json(*a, index, name);
  } catch (const Error&) {
    return false;
  }
  if (!parsed) return false;  // an end marker before the end
  r = std::move(*parsed);
  return true;
}

// "events":[, one event a line, then the end marker. `delivered` counts the records handed to on_record.
bool fast_events(LineReader& lines, const std::string& name,
                 const std::function<void(const Record&)>& on_record, size_t& delivered) {
  bool terminated = false;
  auto line = lines.next(&terminated);
  if (!line || !terminated || *line != "\"events\":[") return false;
  int64_t total_duration_ns = 0;
  Record r;
  for (;;) {
    line = lines.next(&terminated);
    if (!line || !terminated) return false;
    if (*line == R"(["F"]],)") return true;
    if (line->empty() || line->back() != ',') return false;
    if (!fast_event(line->substr(0, line->size() - 1), delivered, name, r)) return false;
    if (const int64_t* dur = duration_of(r)) {
      total_duration_ns += *dur;  // each is at most 2^60: no overflow before the check
      if (total_duration_ns > kMaxTotalDurationNs) return false;
    }
    ++delivered;
    on_record(r);
  }
}

// "summary":{...}}   and nothing after it
std::optional<json> fast_summary(LineReader& lines) {
  bool terminated = false;
  const auto line = lines.next(&terminated);
  if (!line || !terminated || !starts_with(*line, "\"summary\":{") || !ends_with(*line, "}}") ||
      !lines.at_end()) {
    return std::nullopt;
  }
  auto summary = parse_value(line->substr(10, line->size() - 11));
  if (!summary || !summary->is_object()) return std::nullopt;
  return summary;
}

}  // namespace

FastRead read_fast(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                   const std::function<void(const Record&)>& on_record) {
  FastRead out;
  const std::streampos start = in.tellg();
  if (start == std::streampos(-1)) return out;  // a pipe: the SAX reader alone
  LineReader lines(in);
  auto give_up = [&]() -> FastRead {
    in.clear();
    in.seekg(start);
    if (in.fail() && (out.meta_delivered || out.records_delivered > 0)) {
      throw Error(ErrorKind::kIo, "cannot read " + name + " again from its start");
    }
    out.result.reset();
    return out;
  };
  const auto version = fast_head_version(lines);
  if (!version) return give_up();
  const auto meta = fast_meta(lines);
  if (!meta) return give_up();
  out.meta_delivered = true;
  on_meta(*meta);
  if (!fast_events(lines, name, on_record, out.records_delivered)) return give_up();
  auto summary = fast_summary(lines);
  if (!summary) return give_up();
  ReadResult result;
  result.format_version = static_cast<int>(*version);
  result.complete = true;
  result.records = out.records_delivered;
  result.summary = std::move(*summary);
  out.result = std::move(result);
  return out;
}

}  // namespace gilspy::raw
