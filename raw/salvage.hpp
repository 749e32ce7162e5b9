#pragma once
// Inside raw/: what raw::read() makes of a file the SAX reader (sax_reader.hpp) could not read to its end. A
// file without the end marker was cut short (a killed recording's .partial): what came before the cut is what
// there is. A file with it was finished and damaged later: corrupt, refused unless salvaged.
#include <cstdint>
#include <streambuf>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "raw/raw_format.hpp"
#include "raw/sax_reader.hpp"

namespace gilspy::raw {

// Passes the input through to the JSON parser, counting bytes and looking for the end marker, so that a file
// that stops parsing can be told apart: cut short (no end marker: a killed recording) or corrupt (it has
// one).
class ScanningBuffer final : public std::streambuf {
 public:
  explicit ScanningBuffer(std::streambuf* source) : source_(source) {}
  // Bytes handed to the parser so far.
  uint64_t consumed() const { return before_ + static_cast<uint64_t>(gptr() - eback()); }
  bool marker_seen() const { return marker_seen_; }
  bool at_end() const { return at_end_; }
  // Reads the rest; returns the number of line ends in it.
  uint64_t drain_counting_lines();
  uint64_t total() const { return before_ + static_cast<uint64_t>(egptr() - eback()); }

 protected:
  int_type underflow() override;

 private:
  void scan(std::string_view chunk);

  std::streambuf* source_;
  char chunk_[1 << 16];
  uint64_t before_ = 0;  // bytes in the chunks before the current one
  std::string tail_;
  bool marker_seen_ = false;
  bool at_end_ = false;
};

// An event that is wrong, without salvage: `e` with where it is and whether the file was finished (reads the
// rest of `scanning` to know).
Error corrupt_event_error(const Error& e, ScanningBuffer& scanning);

// The result of a read that stopped before a complete file: `result` (what was delivered) with the problem,
// for a file cut short or, with `salvage`, damaged. Throws Error(kCorrupt) for a damaged file without it.
ReadResult stopped_read(ReadResult result, const SaxOutcome& sax, ScanningBuffer& scanning,
                        const std::string& name, bool salvage);

}  // namespace gilspy::raw
