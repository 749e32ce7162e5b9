#pragma once
// Inside raw/: the fast path of raw::read(). A raw file as the Writer writes it is line-structured (the
// header, the meta, one event a line, the end marker, the summary: raw_format.hpp), so it is read a line at a
// time, the common events (H, W, N, E, S, P) parsed by hand, the others (T, kinds added later) through
// nlohmann::json and the same record_from_json() as the SAX reader. This is what lets `convert` read hundreds
// of MB/s.
//
// It only reads what it can vouch for: a complete file in exactly that layout, every event valid. At the
// first thing that is not (a cut, damage, an edit, a space where the Writer puts none, a stream it cannot
// seek back in), it rewinds the stream and says what it already delivered; raw::read() then reads the file
// with the SAX reader from the start, skipping that much, so that what is wrong and where is judged in one
// place.
#include <cstddef>
#include <functional>
#include <istream>
#include <optional>
#include <string>

#include "raw/raw_format.hpp"

namespace gilspy::raw {

struct FastRead {
  std::optional<ReadResult> result;  // set when the whole file was read
  bool meta_delivered = false;       // otherwise: on_meta was called already
  size_t records_delivered = 0;      // ...and on_record this many times
};

// Reads `in` (from its current position), or gives up with the stream back where it was. Throws what on_meta
// and on_record throw, and Error(kIo) when the stream cannot be rewound after records were delivered.
FastRead read_fast(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                   const std::function<void(const Record&)>& on_record);

}  // namespace gilspy::raw
