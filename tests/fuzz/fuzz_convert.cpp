// A deterministic mutation fuzzer for `convert` (g++ has no libFuzzer): mutations of real raw files (bit
// flips, truncations, deep nesting, huge numbers, invalid UTF-8, control bytes, cut and repeated lines) are
// converted in-process, and each outcome is checked:
//   - only gilspy::Error escapes (kBadInput or kCorrupt), with a message free of control bytes (it reaches a
//     terminal, and the file is not ours to trust);
//   - a refused input leaves nothing in the output folder, a converted one leaves exactly the output, which
//     is JSON with traceEvents;
//   - a file that was finished (it holds the end marker) is never converted as merely "unfinished": it parses
//     completely or it is refused as corrupt (and --salvage then converts what precedes the damage);
//   - no iteration runs longer than --hang-s (a hang), and ASan/UBSan (scripts/test.sh) see no fault.
// Iteration I of seed S is reproducible alone: --seed S --only I. A failing input is saved and its path
// printed. --corpus DIR replays every file of DIR first (the checked-in tests/fuzz/corpus: inputs that once
// reached a distinct outcome), then mutates them beside the RAW seeds; --grow DIR saves there each mutant
// under 16 KB whose outcome (converted, unfinished, or the error with its numbers taken out) no earlier input
// reached.
//
// Usage: gilspy_fuzz_convert [--seconds S] [--iterations N] [--seed S] [--only I] [--hang-s H]
//                            [--corpus DIR] [--grow DIR] RAW...
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "convert/chrome_trace.hpp"
#include "raw/raw_format.hpp"

namespace fs = std::filesystem;
using gilspy::Error;
using gilspy::ErrorKind;

namespace {

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) {
  return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

// A larger recording than the hand-written sample: every kind, several threads, a non-ASCII name.
std::string generated_recording(const fs::path& dir) {
  gilspy::raw::Meta m;
  m.gilspy_version = "0.1.0";
  m.pid = 777;
  m.rank = 1;
  m.python_version = "3.12.3";
  m.command = "python3 -c 'x = \"\\u00e9\"'";
  m.hostname = "fuzz";
  m.monotonic_ns = 1'000'000;
  m.realtime_ns = 1'700'000'000'000'000'000;
  m.rate_hz = 10000;
  const fs::path path = dir / "GIL_777_rank_1.json";
  {
    gilspy::raw::Writer w(path.string(), m);
    for (int t = 0; t < 4; ++t)
      w.write(gilspy::raw::ThreadStart{777 + t, t * 10, 0x1000u + t, t == 2 ? "w\xc3\xa9rk" : "t"});
    int64_t ts = 100;
    for (int i = 0; i < 120; ++i) {
      const int64_t tid = 777 + i % 4;
      w.write(gilspy::raw::Hold{tid, ts, 50 + i});
      w.write(gilspy::raw::Wait{777 + (i + 1) % 4, ts, 40});
      if (i % 7 == 0) w.write(gilspy::raw::Waiters{ts + 1, static_cast<uint64_t>(i % 3)});
      if (i % 30 == 0)
        w.write(gilspy::raw::Stats{
            .ts = ts, .polls = 10u * i, .late = 1, .missed = 0, .handoffs_seen = 5, .handoffs_total = 6});
      ts += 200;
    }
    for (int t = 0; t < 4; ++t) w.write(gilspy::raw::ThreadEnd{777 + t, ts});
    w.finish({{"duration_ns", ts}, {"threads", nlohmann::json::array({{{"tid", 777}, {"hold_ns", 1}}})}});
  }
  std::string text = slurp(path);
  fs::remove(path);
  return text;
}

const std::vector<std::string> kNumbers = {"99999999999999999999999999",
                                           "-9223372036854775809",
                                           "1e400",
                                           "1e308",
                                           "-0",
                                           "18446744073709551615",
                                           "9223372036854775807",
                                           "-1",
                                           "4611686018427387904",
                                           "1152921504606846977",
                                           "0.5",
                                           "-1e-400"};
const std::vector<std::string> kBadUtf8 = {"\xff",     "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                           "\xc0\xaf", "\x80"};
const std::vector<std::string> kControl = {"\x1b[2J", "\x07", "\x1b]0;x\x07", "\r", std::string(1, '\0'),
                                           "\x9b"};
const std::string kStructural = "\"[]{},:\\\n0-e.";

// One mutation of `s`, in place.
void mutate_once(Rng& rng, std::string& s) {
  if (s.empty()) {
    s = "{";
    return;
  }
  const size_t at = pick(rng, s.size());
  switch (pick(rng, 11)) {
    case 0:  // bit flips
      for (size_t n = 1 + pick(rng, 3); n > 0; --n)
        s[pick(rng, s.size())] ^= static_cast<char>(1u << pick(rng, 8));
      break;
    case 1:  // truncation
      s.resize(at);
      break;
    case 2: {  // deep nesting, anywhere or in the summary
      size_t where = at;
      if (pick(rng, 2) == 0) {
        const size_t summary = s.find("\"summary\":");
        if (summary != std::string::npos) where = summary + 10;
      }
      // Mostly shallow (cheap, so that many run), sometimes far past any stack (the crash this guards
      // against).
      const size_t roll = pick(rng, 10);
      const size_t depth = 1 + pick(rng, roll < 5 ? 200 : roll < 9 ? 5000 : 60000);
      std::string deep;
      if (pick(rng, 2) == 0) {
        deep = std::string(depth, '[');
      } else {
        for (size_t i = 0; i < depth; ++i) deep += "{\"a\":";
      }
      if (pick(rng, 3) == 0) deep += std::string(depth, deep[0] == '[' ? ']' : '}');
      s.insert(where, deep);
      break;
    }
    case 3: {  // a number replaced by a huge, negative or fractional one
      size_t b = at;
      while (b < s.size() && !std::isdigit(static_cast<unsigned char>(s[b]))) ++b;
      size_t e = b;
      while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
      s.replace(b, e - b, kNumbers[pick(rng, kNumbers.size())]);
      break;
    }
    case 4:  // invalid UTF-8, preferably inside a string
      s.insert(s.find('"', at) == std::string::npos ? at : s.find('"', at) + 1,
               kBadUtf8[pick(rng, kBadUtf8.size())]);
      break;
    case 5:  // control bytes inside a string (a terminal must never receive them raw)
      s.insert(s.find('"', at) == std::string::npos ? at : s.find('"', at) + 1,
               kControl[pick(rng, kControl.size())]);
      break;
    case 6:  // one structural character replaced
      s[at] = kStructural[pick(rng, kStructural.size())];
      break;
    case 7:  // a range deleted
      s.erase(at, 1 + pick(rng, 64));
      break;
    case 8: {  // a line repeated
      const size_t b = s.rfind('\n', at);
      const size_t start = b == std::string::npos ? 0 : b + 1;
      const size_t e = s.find('\n', at);
      const std::string line = s.substr(start, (e == std::string::npos ? s.size() : e + 1) - start);
      for (size_t n = 1 + pick(rng, 3); n > 0; --n) s.insert(start, line);
      break;
    }
    case 9:  // a byte inserted
      s.insert(at, 1, static_cast<char>(pick(rng, 256)));
      break;
    default:  // an event's kind changed
      if (const size_t k = s.find("[\"", at); k != std::string::npos && k + 2 < s.size())
        s[k + 2] = "THWNESFQ\x1b"[pick(rng, 9)];
      break;
  }
}

struct Failure {
  std::string why;
};

void require(bool cond, const std::string& why) {
  if (!cond) throw Failure{why};
}

bool has_control_bytes(const std::string& s) {
  for (const unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

std::vector<std::string> folder_listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

enum class Outcome { kConverted, kCorrupt, kNotRaw };

// What an outcome looked like, with the file's name, numbers, quoted text from the file and the names of
// control characters taken out: inputs with the same signature took the same path through the reader, as far
// as its messages tell.
std::string signature_of(std::string_view kind, const std::string& text, const fs::path& in) {
  static const std::regex kVaries(R"(\d+|"[^"]*"|'[^']*'|U\+[0-9A-F]+ \([A-Z]+\))");
  std::string rest = text;
  if (const size_t at = rest.find(in.string()); at != std::string::npos) rest.erase(at, in.string().size());
  return std::string(kind) + ':' + std::regex_replace(rest, kVaries, "");
}

// Converts `input` (already in dir/in.json) once and checks the outcome; `signature` (if given) receives it.
Outcome convert_and_check(const fs::path& dir, const std::string& input, bool salvage,
                          std::string* signature = nullptr) {
  const fs::path in = dir / "in.json";
  const fs::path out = dir / "out.trace.json";
  const bool finished = input.find(R"(["F"]])") != std::string::npos;
  gilspy::convert::ConvertReport report;
  try {
    report = gilspy::convert::convert_to_chrome_trace({in.string()}, out.string(), {.salvage = salvage});
  } catch (const Error& e) {
    const std::string what = e.what();
    require(e.kind() == ErrorKind::kBadInput || e.kind() == ErrorKind::kCorrupt,
            "an input problem reported as another kind of error: " + what);
    require(!has_control_bytes(what), "the error message holds control bytes from the file: " + what);
    require(what.find(in.string()) != std::string::npos, "the error message does not name the file: " + what);
    require(!salvage || e.kind() != ErrorKind::kCorrupt, "--salvage still refused a corrupt file: " + what);
    const auto left = folder_listing(dir);
    require(left == std::vector<std::string>{"in.json"}, "a refused input left files behind: " + join(left));
    if (signature) *signature = signature_of(salvage ? "salvage-refused" : "refused", what, in);
    return e.kind() == ErrorKind::kCorrupt ? Outcome::kCorrupt : Outcome::kNotRaw;
  } catch (const std::exception& e) {
    throw Failure{std::string("an exception other than gilspy::Error escaped: ") + e.what()};
  }
  const auto left = folder_listing(dir);
  require(left == std::vector<std::string>{"in.json", "out.trace.json"},
          "a conversion left other files than its output: " + join(left));
  require(report.inputs.size() == 1, "one input, not one report");
  const auto& r = report.inputs[0];
  require(!has_control_bytes(r.problem), "the problem text holds control bytes: " + r.problem);
  if (!salvage) {
    require(!r.corrupt, "corrupt without --salvage, yet converted");
    require(r.complete || !finished,
            "a finished file (it has its end marker) converted as merely unfinished: " + r.problem);
  }
  if (!r.complete) require(!r.problem.empty(), "incomplete without a problem said");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(slurp(out));
  } catch (const std::exception& e) {
    throw Failure{std::string("the output is not JSON: ") + e.what()};
  }
  require(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
          "the output has no traceEvents array");
  fs::remove(out);
  if (signature) *signature = signature_of(r.complete ? "converted" : "unfinished", r.problem, in);
  return Outcome::kConverted;
}

[[noreturn]] void on_alarm(int) {
  static const char msg[] = "gilspy_fuzz_convert: FAIL: an iteration hung (watchdog)\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
  ::_exit(1);
}

struct Options {
  double seconds = 10;
  uint64_t iterations = UINT64_MAX;
  uint64_t seed = 1;
  int64_t only = -1;
  unsigned hang_s = 20;
  fs::path corpus, grow;  // empty: none
  std::vector<fs::path> seeds;
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gilspy_fuzz_convert: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds")
      o.seconds = std::stod(value());
    else if (a == "--iterations")
      o.iterations = std::stoull(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--only")
      o.only = std::stoll(value());
    else if (a == "--hang-s")
      o.hang_s = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--corpus")
      o.corpus = value();
    else if (a == "--grow")
      o.grow = value();
    else
      o.seeds.emplace_back(a);
  }
  if (o.seeds.empty()) {
    std::fprintf(stderr,
                 "usage: %s [--seconds S] [--iterations N] [--seed S] [--only I] [--hang-s H] "
                 "[--corpus DIR] [--grow DIR] RAW...\n",
                 argv[0]);
    std::exit(2);
  }
  return o;
}

std::vector<fs::path> corpus_files(const fs::path& dir) {
  std::vector<fs::path> files;
  if (dir.empty()) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Tally {
  uint64_t done = 0, refused_corrupt = 0, salvaged = 0, converted = 0, grown = 0;
  std::set<std::string> signatures;
};

// One input through convert (and, when refused as corrupt, through convert --salvage); its outcome's
// signature is added to the tally's. Throws Failure.
std::string run_one(const fs::path& dir, const std::string& input, Tally& tally, unsigned hang_s) {
  spit(dir / "in.json", input);
  ::alarm(hang_s);
  std::string signature;
  switch (convert_and_check(dir, input, false, &signature)) {
    case Outcome::kCorrupt: {
      ++tally.refused_corrupt;
      std::string salvage;
      if (convert_and_check(dir, input, true, &salvage) == Outcome::kConverted) ++tally.salvaged;
      signature += " | " + salvage;
      break;
    }
    case Outcome::kConverted:
      ++tally.converted;
      break;
    case Outcome::kNotRaw:
      break;
  }
  ::alarm(0);
  for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
  ++tally.done;
  return signature;
}

// Saves `input` as a failing case and says how to replay it.
int report_failure(const Failure& f, const std::string& input, const std::string& replay,
                   const std::string& tag) {
  const fs::path keep = fs::temp_directory_path() / ("gilspy_fuzz_failure_" + tag + ".raw.json");
  spit(keep, input);
  std::fprintf(stderr, "gilspy_fuzz_convert: FAIL (%s): %s\n  input kept in %s\n", replay.c_str(),
               f.why.c_str(), keep.c_str());
  return 1;
}

constexpr size_t kMaxGrownBytes = 16 * 1024;

void maybe_grow(const Options& o, const std::string& input, const std::string& signature, Tally& tally,
                uint64_t i) {
  if (!tally.signatures.insert(signature).second || o.grow.empty() || input.size() > kMaxGrownBytes) return;
  spit(o.grow / ("seed" + std::to_string(o.seed) + "_" + std::to_string(i) + ".raw.json"), input);
  ++tally.grown;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::string tmpl = (fs::temp_directory_path() / "gilspy_fuzz_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const fs::path dir = tmpl;
  std::vector<std::string> pool;
  for (const auto& p : o.seeds) {
    pool.push_back(slurp(p));
    if (pool.back().empty()) {
      std::fprintf(stderr, "gilspy_fuzz_convert: cannot read %s\n", p.c_str());
      return 2;
    }
  }
  pool.push_back(generated_recording(dir));
  ::signal(SIGALRM, on_alarm);
  Tally tally;

  // The corpus first, every file as it is: each once reached an outcome no other input had.
  const auto replayed = corpus_files(o.corpus);
  for (const auto& p : replayed) {
    const std::string input = slurp(p);
    try {
      tally.signatures.insert(run_one(dir, input, tally, o.hang_s));
    } catch (const Failure& f) {
      fs::remove_all(dir);
      return report_failure(f, input, "corpus file " + p.string(), p.filename().string());
    }
    pool.push_back(input);
  }

  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i = o.only >= 0 ? static_cast<uint64_t>(o.only) : 0; i < o.iterations; ++i) {
    if (o.only < 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= o.seconds)
      break;
    Rng rng(o.seed * 0x9E3779B97F4A7C15ull + i);
    std::string input = pool[pick(rng, pool.size())];
    for (size_t n = 1 + pick(rng, 3); n > 0; --n) mutate_once(rng, input);
    try {
      maybe_grow(o, input, run_one(dir, input, tally, o.hang_s), tally, i);
    } catch (const Failure& f) {
      fs::remove_all(dir);
      const std::string replay = "replay: --seed " + std::to_string(o.seed) + " --only " + std::to_string(i) +
                                 (o.corpus.empty() ? "" : " --corpus " + o.corpus.string());
      return report_failure(f, input, replay, std::to_string(o.seed) + "_" + std::to_string(i));
    }
    if (o.only >= 0) break;
  }
  fs::remove_all(dir);
  std::printf(
      "gilspy_fuzz_convert: %zu corpus files replayed, then %llu inputs in all (seed %llu): %llu "
      "converted, %llu refused as corrupt (%llu of them salvaged with --salvage), the rest refused as not "
      "raw files; %zu distinct outcomes%s; no failure\n",
      replayed.size(), static_cast<unsigned long long>(tally.done), static_cast<unsigned long long>(o.seed),
      static_cast<unsigned long long>(tally.converted),
      static_cast<unsigned long long>(tally.refused_corrupt), static_cast<unsigned long long>(tally.salvaged),
      tally.signatures.size(),
      o.grow.empty()
          ? ""
          : (", " + std::to_string(tally.grown) + " new ones saved to " + o.grow.string()).c_str());
  return tally.done > 0 ? 0 : 1;
}
