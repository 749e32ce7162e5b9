#include "raw/raw_format.hpp"

#include <cerrno>
#include <cstring>
#include <variant>
#include <vector>

#include "base/error.hpp"

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

std::optional<std::string> record_line(const Record& r) {
  return std::visit(
      overloaded{
          // A thread name comes from the kernel and need not be UTF-8: replace what is not, never throw.
          [](const ThreadStart& x) -> std::optional<std::string> {
            json a = json::array({"T", x.tid, x.ts, x.name, x.tstate});
            if (x.ns_tid != 0) a.push_back(x.ns_tid);
            return a.dump(-1, ' ', false, json::error_handler_t::replace);
          },
          [](const Hold& x) -> std::optional<std::string> { return json::array({"H", x.tid, x.ts, x.dur}).dump(); },
          [](const Wait& x) -> std::optional<std::string> { return json::array({"W", x.tid, x.ts, x.dur}).dump(); },
          [](const Waiters& x) -> std::optional<std::string> { return json::array({"N", x.ts, x.n}).dump(); },
          [](const ThreadEnd& x) -> std::optional<std::string> { return json::array({"E", x.tid, x.ts}).dump(); },
          [](const Stats& x) -> std::optional<std::string> {
            return json::array({"S", x.ts, x.polls, x.late, x.missed, x.handoffs_seen, x.handoffs_total}).dump();
          },
          [](const ThreadState&) -> std::optional<std::string> { return std::nullopt; },
      },
      r);
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
  if (const auto line = record_line(r)) write_line(*line);
}

void Writer::write_line(const std::string& line) {
  std::fputs(first_event_ ? "\n" : ",\n", file_);
  first_event_ = false;
  std::fputs(line.c_str(), file_);
}

void Writer::flush() {
  if (file_ != nullptr) std::fflush(file_);
}

void Writer::finish(const json& summary) {
  write_line(R"(["F"])");
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

// One event line; nullopt for ["F"], the end of the events.
std::optional<Record> record_from_json(const json& a, size_t index, const std::string& name) {
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
  auto count = [&](size_t i) { return static_cast<uint64_t>(num(i)); };
  auto duration = [&](size_t i) {
    const int64_t d = num(i);
    if (d < 0) throw bad("has a negative duration");
    return d;
  };
  switch (a[0].get<std::string>()[0]) {
    case 'T': {
      ThreadStart r;
      r.tid = num(1);
      r.ts = num(2);
      if (a.size() < 4 || !a[3].is_string()) throw bad("has no thread name");
      r.name = a[3].get<std::string>();
      r.tstate = a.size() > 4 && a[4].is_number_unsigned() ? a[4].get<uint64_t>() : 0;
      r.ns_tid = a.size() > 5 && a[5].is_number_integer() ? a[5].get<int64_t>() : 0;
      return r;
    }
    case 'H': return Hold{.tid = num(1), .ts = num(2), .dur = duration(3)};
    case 'W': return Wait{.tid = num(1), .ts = num(2), .dur = duration(3)};
    case 'N': return Waiters{.ts = num(1), .n = count(2)};
    case 'E': return ThreadEnd{.tid = num(1), .ts = num(2)};
    case 'S':
      return Stats{.ts = num(1), .polls = count(2), .late = count(3), .missed = count(4), .handoffs_seen = count(5),
                   .handoffs_total = count(6)};
    case 'F': return std::nullopt;
    default: throw bad("has an unknown kind \"" + a[0].get<std::string>() + "\"");
  }
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
        result_.format_version = v.get<int>();
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
      const std::optional<Record> r = record_from_json(builder_.root(), result_.records, name_);
      if (!r) {
        end_seen_ = true;
      } else {
        ++result_.records;
        on_record_(*r);
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
