#include "sampler/raw_format.hpp"

#include <cerrno>
#include <cstring>
#include <vector>

#include "elfutils/error.hpp"

namespace gilspy::raw {

using nlohmann::json;

json to_json(const Meta& m) {
  return json{{"gilspy_version", m.gilspy_version},
              {"pid", m.pid},
              {"rank", m.rank},
              {"python_version", m.python_version},
              {"python_binary", m.python_binary},
              {"build", m.build},
              {"free_threaded", m.free_threaded},
              {"command", m.command},
              {"hostname", m.hostname},
              {"clock", {{"monotonic_ns", m.monotonic_ns}, {"realtime_ns", m.realtime_ns}}},
              {"rate_hz", m.rate_hz},
              {"switch_interval_us", m.switch_interval_us},
              {"gil_addr", m.gil_addr}};
}

Meta meta_from_json(const json& j) {
  auto need = [&](const char* key) -> const json& {
    if (!j.is_object() || !j.contains(key)) throw Error(ErrorKind::kBadInput, std::string("meta has no \"") + key + "\"");
    return j.at(key);
  };
  try {
    Meta m;
    m.gilspy_version = need("gilspy_version").get<std::string>();
    m.pid = need("pid").get<int64_t>();
    m.rank = need("rank").get<int64_t>();
    m.python_version = need("python_version").get<std::string>();
    m.python_binary = j.value("python_binary", "");
    m.build = j.value("build", "");
    m.free_threaded = j.value("free_threaded", false);
    m.command = j.value("command", "");
    m.hostname = j.value("hostname", "");
    const json& clock = need("clock");
    m.monotonic_ns = clock.at("monotonic_ns").get<int64_t>();
    m.realtime_ns = clock.at("realtime_ns").get<int64_t>();
    m.rate_hz = need("rate_hz").get<double>();
    m.switch_interval_us = j.value("switch_interval_us", uint64_t{0});
    m.gil_addr = j.value("gil_addr", uint64_t{0});
    return m;
  } catch (const json::exception& e) {
    throw Error(ErrorKind::kBadInput, std::string("meta is malformed: ") + e.what());
  }
}

std::string record_line(const Record& r) {
  const char k = static_cast<char>(r.kind);
  switch (r.kind) {
    case RecordKind::kThread:
      // A thread name comes from the kernel and need not be UTF-8: replace what is not, never throw.
      return json::array({std::string(1, k), r.tid, r.ts, r.name, r.n})
          .dump(-1, ' ', false, json::error_handler_t::replace);
    case RecordKind::kHold:
    case RecordKind::kWait:
      return json::array({std::string(1, k), r.tid, r.ts, r.dur}).dump();
    case RecordKind::kWaiters:
      return json::array({std::string(1, k), r.ts, r.n}).dump();
    case RecordKind::kThreadEnd:
      return json::array({std::string(1, k), r.tid, r.ts}).dump();
    case RecordKind::kStats:
      return json::array({std::string(1, k), r.ts, r.polls, r.late, r.missed, r.seen, r.total}).dump();
    case RecordKind::kEnd:
      return json::array({std::string(1, k)}).dump();
  }
  return "[]";
}

Writer::Writer(std::string final_path, const Meta& meta)
    : final_path_(std::move(final_path)), partial_path_(final_path_ + ".partial") {
  file_ = std::fopen(partial_path_.c_str(), "w");
  if (file_ == nullptr) {
    throw Error(ErrorKind::kIo, "cannot create " + partial_path_ + ": " + std::strerror(errno));
  }
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
  const std::string header = std::string("{\"format\":\"") + kFormatName + "\",\"format_version\":" +
                             std::to_string(kFormatVersion) + ",\n\"meta\":" + to_json(meta).dump(-1, ' ', false, json::error_handler_t::replace) +
                             ",\n\"events\":[";
  std::fputs(header.c_str(), file_);
  flush();
}

Writer::~Writer() {
  if (file_ != nullptr) std::fclose(file_);  // unfinished: the .partial stays for recovery
}

void Writer::write(const Record& r) {
  std::fputs(first_event_ ? "\n" : ",\n", file_);
  first_event_ = false;
  std::fputs(record_line(r).c_str(), file_);
}

void Writer::flush() {
  if (file_ != nullptr) std::fflush(file_);
}

void Writer::finish(const json& summary) {
  Record end;
  end.kind = RecordKind::kEnd;
  write(end);
  const std::string tail =
      "],\n\"summary\":" + summary.dump(-1, ' ', false, json::error_handler_t::replace) + "}\n";
  std::fputs(tail.c_str(), file_);
  const bool ok = std::fflush(file_) == 0 && std::ferror(file_) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok) throw Error(ErrorKind::kIo, "cannot write " + partial_path_ + ": " + std::strerror(errno));
  if (std::rename(partial_path_.c_str(), final_path_.c_str()) != 0) {
    throw Error(ErrorKind::kIo, "cannot rename " + partial_path_ + " to " + final_path_ + ": " + std::strerror(errno));
  }
}

namespace {

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

Record record_from_json(const json& a, size_t index, const std::string& name) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kBadInput, name + ": event #" + std::to_string(index + 1) + " " + why);
  };
  if (!a.is_array() || a.empty() || !a[0].is_string() || a[0].get<std::string>().size() != 1) {
    throw bad("is not [\"<kind>\", ...]");
  }
  auto num = [&](size_t i) -> int64_t {
    if (i >= a.size() || !a[i].is_number_integer()) throw bad("has no integer at position " + std::to_string(i));
    return a[i].get<int64_t>();
  };
  Record r;
  r.kind = static_cast<RecordKind>(a[0].get<std::string>()[0]);
  switch (r.kind) {
    case RecordKind::kThread:
      r.tid = num(1);
      r.ts = num(2);
      if (a.size() < 4 || !a[3].is_string()) throw bad("has no thread name");
      r.name = a[3].get<std::string>();
      r.n = a.size() > 4 && a[4].is_number_unsigned() ? a[4].get<uint64_t>() : 0;
      break;
    case RecordKind::kHold:
    case RecordKind::kWait:
      r.tid = num(1);
      r.ts = num(2);
      r.dur = num(3);
      if (r.dur < 0) throw bad("has a negative duration");
      break;
    case RecordKind::kWaiters:
      r.ts = num(1);
      r.n = static_cast<uint64_t>(num(2));
      break;
    case RecordKind::kThreadEnd:
      r.tid = num(1);
      r.ts = num(2);
      break;
    case RecordKind::kStats:
      r.ts = num(1);
      r.polls = static_cast<uint64_t>(num(2));
      r.late = static_cast<uint64_t>(num(3));
      r.missed = static_cast<uint64_t>(num(4));
      r.seen = static_cast<uint64_t>(num(5));
      r.total = static_cast<uint64_t>(num(6));
      break;
    case RecordKind::kEnd:
      break;
    default:
      throw bad("has an unknown kind \"" + a[0].get<std::string>() + "\"");
  }
  return r;
}

class RawSax final : public nlohmann::json_sax<json> {
 public:
  RawSax(const std::string& name, const std::function<void(const Meta&)>& on_meta,
         const std::function<void(const Record&)>& on_record, ReadResult& result)
      : name_(name), on_meta_(on_meta), on_record_(on_record), result_(result) {}

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
      top_object_ = true;
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
      if (!meta_seen_) return shape("events before meta");
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
      if (k == "meta" || k == "summary") builder_.begin();
    } else {
      builder_.key(k);
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error_position_ = position;
    error_text_ = ex.what();
    return false;
  }

  size_t error_position_ = 0;
  std::string error_text_;
  std::string shape_problem_;
  bool meta_seen_ = false;
  bool format_ok_ = false;
  bool end_seen_ = false;

 private:
  bool shape(const std::string& what) {
    shape_problem_ = what;
    return false;
  }
  bool scalar(json v) {
    if (depth_ == 0) return shape("a JSON scalar, not an object");
    if (depth_ == 1 && builder_depth_ == 0) {
      if (key_ == "format") {
        if (!v.is_string() || v.get<std::string>() != kFormatName) return shape("\"format\" is not \"gilspy-raw\"");
        format_ok_ = true;
      } else if (key_ == "format_version") {
        if (!v.is_number_integer() || v.get<int>() > kFormatVersion) {
          return shape("format_version " + v.dump() + " is newer than this gilspy understands");
        }
      } else if (key_ == "meta" || key_ == "summary" || key_ == "events") {
        return shape("\"" + key_ + "\" is not an object");
      }
      return true;
    }
    if (builder_depth_ == 0) return shape("events must be arrays");
    builder_.value(std::move(v));
    return true;
  }
  bool open(json container) {
    if (in_events_ && builder_depth_ == 0) {
      if (!container.is_array()) return shape("events must be arrays");
      builder_.begin();
    } else if (depth_ == 1 && builder_depth_ == 0 && key_ != "meta" && key_ != "summary") {
      builder_.begin();  // an unknown top-level member: collected and ignored
    }
    ++builder_depth_;
    builder_.open(std::move(container));
    return true;
  }
  bool close() {
    --builder_depth_;
    if (!builder_.close()) return true;
    if (in_events_) {
      Record r = record_from_json(builder_.root(), result_.records, name_);
      if (r.kind == RecordKind::kEnd) {
        end_seen_ = true;
      } else {
        ++result_.records;
        on_record_(r);
      }
    } else if (key_ == "meta") {
      if (!format_ok_) return shape("no \"format\":\"gilspy-raw\" before meta");
      Meta meta;
      try {
        meta = meta_from_json(builder_.root());
      } catch (const Error& e) {
        throw Error(e.kind(), name_ + ": " + e.what());
      }
      on_meta_(meta);
      meta_seen_ = true;
    } else if (key_ == "summary") {
      result_.summary = std::move(builder_.root());
    }
    return true;
  }

  const std::string& name_;
  const std::function<void(const Meta&)>& on_meta_;
  const std::function<void(const Record&)>& on_record_;
  ReadResult& result_;
  SubtreeBuilder builder_;
  int depth_ = 0;          // 1 inside the top object, 2 inside "events"
  int builder_depth_ = 0;  // nesting inside a subtree being built
  bool top_object_ = false;
  bool in_events_ = false;
  std::string key_;
};

}  // namespace

ReadResult read(std::istream& in, const std::string& name, const std::function<void(const Meta&)>& on_meta,
                const std::function<void(const Record&)>& on_record) {
  ReadResult result;
  RawSax sax(name, on_meta, on_record, result);
  if (in.peek() == std::char_traits<char>::eof()) throw Error(ErrorKind::kBadInput, name + " is empty");
  const bool ok = json::sax_parse(in, &sax, nlohmann::detail::input_format_t::json, true, false);
  if (!sax.shape_problem_.empty()) {
    throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: " + sax.shape_problem_);
  }
  if (!sax.meta_seen_) {
    if (!ok) {
      throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file (JSON error at byte " +
                                            std::to_string(sax.error_position_) + ")");
    }
    throw Error(ErrorKind::kBadInput, name + " is not a gilspy raw file: it has no \"meta\"");
  }
  result.complete = ok && sax.end_seen_ && result.summary.has_value();
  if (!result.complete) {
    result.problem = ok ? "it ends without the summary" : "it is cut short at byte " +
                                                               std::to_string(sax.error_position_);
    result.problem += " (the recording did not finish); recovered " + std::to_string(result.records) +
                      " events up to the last complete one";
  }
  return result;
}

}  // namespace gilspy::raw
