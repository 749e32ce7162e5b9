#include "raw/sax_reader.hpp"

#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "raw/event_line.hpp"

namespace gilspy::raw {

using nlohmann::json;

namespace {

// The parser's text for a syntax error, without its "last read: '...'" (the file's own bytes, which must not
// reach a terminal raw) and without the exception's id.
std::string syntax_error_text(const std::string& what) {
  std::string s = what;
  if (const size_t last = s.find("; last read"); last != std::string::npos) s.resize(last);
  if (const size_t id = s.find("] "); id != std::string::npos && s.rfind("[json.exception", 0) == 0)
    s.erase(0, id + 2);
  if (const size_t colon = s.find(": "); colon != std::string::npos && s.rfind("parse error", 0) == 0)
    s.erase(0, colon + 2);
  return s;
}

// Builds small JSON subtrees (meta, summary, one event) out of SAX calls.
class SubtreeBuilder {
 public:
  void begin() {
    root_ = json();
    stack_.clear();
    started_ = false;
  }
  // Returns true when the value completed the subtree.
  bool value(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return true;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
    } else {
      (*top)[key_] = std::move(v);
    }
    return false;
  }
  void open(json container) {
    if (stack_.empty() && !started_) {
      root_ = std::move(container);
      stack_.push_back(&root_);
    } else {
      json* top = stack_.back();
      if (top->is_array()) {
        top->push_back(std::move(container));
        stack_.push_back(&top->back());
      } else {
        stack_.push_back(&((*top)[key_] = std::move(container)));
      }
    }
    started_ = true;
  }
  bool close() {  // true when the subtree is complete
    stack_.pop_back();
    return stack_.empty();
  }
  void key(const std::string& k) { key_ = k; }
  json& root() { return root_; }

 private:
  json root_;
  std::vector<json*> stack_;
  std::string key_;
  bool started_ = false;
};

class RawSax final : public nlohmann::json_sax<json> {
 public:
  RawSax(const std::string& name, const std::function<void(const Meta&)>& on_meta,
         const std::function<void(const Record&)>& on_record, ReadResult& result, bool salvage)
      : name_(name), on_meta_(on_meta), on_record_(on_record), result_(result), salvage_(salvage) {}

  bool null() override { return scalar(json(nullptr)); }
  bool boolean(bool v) override { return scalar(json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return scalar(json(v)); }
  bool string(string_t& v) override { return scalar(json(v)); }
  bool binary(binary_t&) override { return shape("binary data"); }

  bool start_object(std::size_t) override {
    if (depth_ == 0) {
      ++depth_;
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    if (depth_ == 1 && builder_depth_ == 0) {
      --depth_;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return shape("a JSON array, not an object");
    if (depth_ == 1 && builder_depth_ == 0 && key_ == "events") {
      if (!outcome_.meta_seen) return shape("events before meta");
      ++depth_;
      in_events_ = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (in_events_ && depth_ == 2 && builder_depth_ == 0) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool key(string_t& k) override {
    if (depth_ == 1 && builder_depth_ == 0) {
      key_ = k;
      skipping_ = k != "meta" && k != "summary" && k != "events" && k != "format" && k != "format_version";
      if (!skipping_) builder_.begin();
    } else if (!skipping_) {
      builder_.key(k);
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    outcome_.syntax_error = true;
    outcome_.error_position = position;
    outcome_.error_text = syntax_error_text(ex.what());
    return false;
  }

  SaxOutcome& outcome() { return outcome_; }

 private:
  bool shape(const std::string& what) {
    if (outcome_.meta_seen) return damaged(Error(ErrorKind::kCorrupt, what));
    outcome_.shape_problem = what;
    return false;
  }
  bool damaged(Error e) {
    outcome_.damage = std::move(e);
    return false;
  }
  bool scalar(json v) {
    if (depth_ == 0) return shape("a JSON scalar, not an object");
    if (depth_ == 1 && builder_depth_ == 0) {
      if (key_ == "format") {
        if (!v.is_string() || v.get<std::string>() != kFormatName)
          return shape("\"format\" is not \"gilspy-raw\"");
        format_ok_ = true;
      } else if (key_ == "format_version") {
        if (!v.is_number_integer() || v.get<int64_t>() > kFormatVersion || v.get<int64_t>() < 0) {
          return shape("format_version " + v.dump(-1, ' ', true, json::error_handler_t::replace) +
                       " is not one this gilspy understands");
        }
        result_.format_version = v.get<int>();
      } else if (key_ == "meta" || key_ == "summary" || key_ == "events") {
        return shape("\"" + key_ + "\" is not an object");
      }
      return true;
    }
    if (builder_depth_ == 0) return shape("events must be arrays");
    if (!skipping_) builder_.value(std::move(v));
    return true;
  }
  bool open(json container) {
    if (builder_depth_ >= kMaxNesting) {
      return shape("values nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    if (in_events_ && builder_depth_ == 0) {
      if (!container.is_array()) return shape("events must be arrays");
      builder_.begin();
    }
    ++builder_depth_;
    if (!skipping_) builder_.open(std::move(container));
    return true;
  }
  bool close() {
    --builder_depth_;
    if (skipping_) return true;  // an unknown top-level member: skipped, only its depth counted
    if (!builder_.close()) return true;
    if (in_events_) return event_complete();
    if (key_ == "meta") return meta_complete();
    if (key_ == "summary") result_.summary = std::move(builder_.root());
    return true;
  }
  bool event_complete() {
    std::optional<Record> r;
    try {
      r = record_from_json(builder_.root(), result_.records, name_);
    } catch (const Error& e) {
      if (!salvage_) throw;
      return damaged(e);
    }
    if (!r) {
      outcome_.end_seen = true;
      return true;
    }
    if (const int64_t* dur = duration_of(*r)) {
      total_duration_ns_ += *dur;  // each is at most 2^60: no overflow before the check
      if (total_duration_ns_ > kMaxTotalDurationNs) {
        return damaged(Error(ErrorKind::kCorrupt, name_ + ": event #" + std::to_string(result_.records + 1) +
                                                      ": the durations add up to more than 146 years"));
      }
    }
    ++result_.records;
    on_record_(*r);
    return true;
  }
  bool meta_complete() {
    if (!format_ok_) return shape("no \"format\":\"gilspy-raw\" before meta");
    Meta meta;
    try {
      meta = meta_from_json(builder_.root());
    } catch (const Error& e) {
      throw Error(e.kind(), name_ + ": " + e.what());
    }
    on_meta_(meta);
    outcome_.meta_seen = true;
    return true;
  }
  static const int64_t* duration_of(const Record& r) {
    if (const auto* h = std::get_if<Hold>(&r)) return &h->dur;
    if (const auto* w = std::get_if<Wait>(&r)) return &w->dur;
    if (const auto* g = std::get_if<GcCollection>(&r)) return &g->dur;
    return nullptr;
  }

  const std::string& name_;
  const std::function<void(const Meta&)>& on_meta_;
  const std::function<void(const Record&)>& on_record_;
  ReadResult& result_;
  bool salvage_;
  SubtreeBuilder builder_;
  int depth_ = 0;          // 1 inside the top object, 2 inside "events"
  int builder_depth_ = 0;  // nesting inside a subtree being built (or skipped)
  bool in_events_ = false;
  bool skipping_ = false;  // inside an unknown top-level member
  int64_t total_duration_ns_ = 0;
  std::string key_;
  bool format_ok_ = false;  // "format":"gilspy-raw" came first
  SaxOutcome outcome_;
};

}  // namespace

SaxOutcome read_sax(std::istream& in, const std::string& name,
                    const std::function<void(const Meta&)>& on_meta,
                    const std::function<void(const Record&)>& on_record, ReadResult& result, bool salvage) {
  RawSax sax(name, on_meta, on_record, result, salvage);
  const bool parsed = json::sax_parse(in, &sax, nlohmann::detail::input_format_t::json, true, false);
  SaxOutcome outcome = std::move(sax.outcome());
  outcome.parsed = parsed;
  return outcome;
}

}  // namespace gilspy::raw
