#include "raw/salvage.hpp"

#include <algorithm>
#include <string_view>

namespace gilspy::raw {

namespace {

// The bytes that end the events of every file the Writer finishes (strings inside are escaped, so this cannot
// occur inside one): a file that has them was finished, whatever happened to it later.
constexpr std::string_view kEndMarker = R"(["F"]])";

// The problem of a damaged file: what is wrong, without the file's name.
std::string damage_text(const SaxOutcome& sax, bool cut_short, const std::string& name) {
  std::string what = sax.damage   ? std::string(sax.damage->what())
                     : sax.parsed ? "it has no \"summary\" after its events"
                     : cut_short  ? "it ends in the middle of its summary"
                                  : sax.error_text;
  if (what.rfind(name + ": ", 0) == 0) what.erase(0, name.size() + 2);
  return what;
}

}  // namespace

uint64_t ScanningBuffer::drain_counting_lines() {
  uint64_t lines = static_cast<uint64_t>(std::count(gptr(), egptr(), '\n'));
  setg(eback(), egptr(), egptr());
  while (underflow() != traits_type::eof()) {
    lines += static_cast<uint64_t>(std::count(gptr(), egptr(), '\n'));
    setg(eback(), egptr(), egptr());
  }
  return lines;
}

ScanningBuffer::int_type ScanningBuffer::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  before_ += static_cast<uint64_t>(egptr() - eback());
  const std::streamsize n = at_end_ ? 0 : source_->sgetn(chunk_, sizeof chunk_);
  if (n <= 0) {
    at_end_ = true;
    setg(chunk_, chunk_, chunk_);
    return traits_type::eof();
  }
  scan(std::string_view(chunk_, static_cast<size_t>(n)));
  setg(chunk_, chunk_, chunk_ + n);
  return traits_type::to_int_type(*gptr());
}

void ScanningBuffer::scan(std::string_view chunk) {
  if (marker_seen_) return;
  // The marker may straddle two chunks: look at the end of the previous one together with this one.
  const std::string joined = tail_ + std::string(chunk.substr(0, std::min(chunk.size(), kEndMarker.size())));
  if (joined.find(kEndMarker) != std::string::npos || chunk.find(kEndMarker) != std::string_view::npos) {
    marker_seen_ = true;
    return;
  }
  const std::string last = tail_ + std::string(chunk);
  tail_ = last.substr(last.size() > kEndMarker.size() ? last.size() - (kEndMarker.size() - 1) : 0);
}

Error corrupt_event_error(const Error& e, ScanningBuffer& scanning) {
  const uint64_t at = scanning.consumed();
  scanning.drain_counting_lines();
  return Error(ErrorKind::kCorrupt,
               std::string(e.what()) + ", at byte offset " + std::to_string(at) + " of " +
                   std::to_string(scanning.total()) +
                   (scanning.marker_seen() ? " (the file was finished: it is corrupt)" : ""));
}

ReadResult stopped_read(ReadResult result, const SaxOutcome& sax, ScanningBuffer& scanning,
                        const std::string& name, bool salvage) {
  // Where reading stopped, and whether the file was ever finished (its end marker is somewhere in it).
  const uint64_t stop = sax.syntax_error ? (sax.error_position > 0 ? sax.error_position - 1 : 0)
                                         : (scanning.consumed() > 0 ? scanning.consumed() - 1 : 0);
  const uint64_t lines_after = sax.parsed ? 0 : scanning.drain_counting_lines();
  const uint64_t size = scanning.total();
  const bool cut_short = sax.syntax_error && !sax.damage && stop >= size;
  const bool finished = scanning.marker_seen() || sax.end_seen;
  result.bytes = size;
  if ((sax.parsed && !finished) || (cut_short && !finished)) {
    // A recording that did not finish: killed, or still being written.
    result.problem = sax.parsed ? "it ends without the summary"
                                : "it is cut short after " + std::to_string(size) + " bytes";
    result.problem += " (the recording did not finish); recovered " + std::to_string(result.records) +
                      " events up to the last complete one";
    return result;
  }
  const std::string what = damage_text(sax, cut_short, name);
  const std::string where = "at byte offset " + std::to_string(stop) + " of " + std::to_string(size);
  const std::string why = finished ? " (it has its end marker: damaged, not merely unfinished)" : "";
  if (!salvage) {
    throw Error(ErrorKind::kCorrupt, name + " is corrupt " + where + ": " + what + why + "; the " +
                                         std::to_string(result.records) +
                                         " events before it can be salvaged");
  }
  result.corrupt = true;
  result.damage_offset = stop;
  result.unread_lines = lines_after;
  result.problem = "it is corrupt " + where + ": " + what + why + "; salvaged the " +
                   std::to_string(result.records) + " events before it, about " +
                   std::to_string(lines_after) + " lines after it were not read";
  return result;
}

}  // namespace gilspy::raw
