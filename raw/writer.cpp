// raw::Writer (raw_format.hpp): the header, one event a line, the end marker and the summary, written under
// `.partial` and renamed when complete.
#include <algorithm>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "raw/raw_format.hpp"

namespace gilspy::raw {

using nlohmann::json;

Writer::Writer(std::string final_path, const Meta& meta, WriterOptions options)
    : final_path_(std::move(final_path)),
      partial_path_(final_path_ + ".partial"),
      options_(options),
      file_((OutputFile::check_replaceable(final_path_), OutputFile::named(partial_path_, options.mode))) {
  pending_ = std::string("{\"format\":\"") + kFormatName +
             "\",\"format_version\":" + std::to_string(kFormatVersion) +
             ",\n\"meta\":" + to_json(meta).dump(-1, ' ', false, json::error_handler_t::replace) +
             ",\n\"events\":[";
  head_bytes_ = pending_.size();
  if (auto e = flush()) {
    file_.discard();
    throw *e;
  }
}

Writer::~Writer() = default;  // unfinished: the .partial stays for recovery

void Writer::write(const Record& r) {
  if (const auto line = record_line(r)) write_line(*line);
}

void Writer::write_line(const std::string& line) {
  const size_t size = line.size() + 2;
  if (pending_.size() + size > options_.max_pending_bytes) {
    ++lost_records_;
    return;
  }
  const size_t before = pending_.size();
  pending_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
  pending_ += line;
  line_sizes_.push_back(pending_.size() - before);
  ++events_;
  if (!failing_ && pending_.size() >= (size_t{1} << 16)) flush();
}

void Writer::count_written(size_t bytes) {
  const size_t head = std::min(bytes, head_bytes_);
  head_bytes_ -= head;
  bytes -= head;
  if (head > 0 && head_bytes_ == 0 && head_is_event_) {
    ++events_in_file_;
    head_is_event_ = false;
  }
  while (bytes > 0 && !line_sizes_.empty()) {
    const size_t line = line_sizes_.front();
    line_sizes_.pop_front();
    if (bytes >= line) {
      bytes -= line;
      ++events_in_file_;
    } else {
      head_bytes_ = line - bytes;
      head_is_event_ = true;
      bytes = 0;
    }
  }
}

std::optional<Error> Writer::flush() {
  int error = 0;
  const size_t written = file_.write_some(pending_, &error);
  count_written(written);
  pending_.erase(0, written);
  failing_ = error != 0;
  if (!failing_) return std::nullopt;
  return Error(ErrorKind::kIo, "cannot write " + partial_path_ + ": " + errno_text(error));
}

void Writer::finish(const json& summary) {
  // The end marker and summary go in even past the memory bound: they are what makes the file complete.
  pending_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
  pending_ += R"(["F"])";
  pending_ += "],\n\"summary\":" + summary.dump(-1, ' ', false, json::error_handler_t::replace) + "}\n";
  if (auto e = flush()) throw *e;
  file_.commit(final_path_);
}

void Writer::discard() {
  file_.discard();
}

}  // namespace gilspy::raw
