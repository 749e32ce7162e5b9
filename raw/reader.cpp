// raw::read() (raw_format.hpp): the fast path for a file exactly as the Writer writes it, else the SAX reader
// from the start, and what a read that stopped early means.
#include <functional>
#include <istream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "raw/fast_reader.hpp"
#include "raw/raw_format.hpp"
#include "raw/salvage.hpp"
#include "raw/sax_reader.hpp"

namespace gilspy::raw {

namespace {

// Throws Error(kBadInput) when what the SAX reader found is not a gilspy raw file at all.
void refuse_unless_raw_file(const SaxOutcome& sax, const std::string& name) {
  if (!sax.shape_problem.empty()) {
    throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: " + sax.shape_problem);
  }
  if (sax.meta_seen) return;
  if (sax.syntax_error) {
    throw Error(ErrorKind::kBadInput,
                name + " is not a gilspy raw file (JSON error at byte offset " +
                    std::to_string(sax.error_position > 0 ? sax.error_position - 1 : 0) + ": " +
                    sax.error_text + ")");
  }
  throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: it has no \"meta\"");
}

}  // namespace

ReadResult read(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                const std::function<void(const Record&)>& on_record, const ReadOptions& options) {
  // A file exactly as the Writer writes it (every finished recording) is read line by line (fast_reader.hpp).
  // Anything else, or anything that path does not vouch for, is read below from the start, skipping what the
  // fast path delivered already: damage, cuts and salvage are judged in one place.
  const FastRead fast = read_fast(in, name, on_meta, on_record);
  if (fast.result) return *fast.result;
  bool meta_delivered = fast.meta_delivered;
  size_t records_delivered = fast.records_delivered;
  const std::function<void(const Meta&)> meta_once = [&](const Meta& m) {
    if (!std::exchange(meta_delivered, false)) on_meta(m);
  };
  const std::function<void(const Record&)> records_after = [&](const Record& r) {
    if (records_delivered > 0) {
      --records_delivered;
    } else {
      on_record(r);
    }
  };
  ReadResult result;
  ScanningBuffer scanning(in.rdbuf());
  std::istream scanned(&scanning);
  if (scanned.peek() == std::char_traits<char>::eof()) throw Error(ErrorKind::kBadInput, name + " is empty");
  SaxOutcome sax;
  try {
    sax = read_sax(scanned, name, meta_once, records_after, result, options.salvage);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    throw corrupt_event_error(e, scanning);
  }
  refuse_unless_raw_file(sax, name);
  if (sax.parsed && sax.end_seen && result.summary.has_value()) {
    result.complete = true;
    return result;
  }
  return stopped_read(std::move(result), sax, scanning, name, options.salvage);
}

}  // namespace gilspy::raw
