// `gilspy convert -i RAW [-i RAW ...] [-o OUT]`: raw recordings to one Chrome Trace JSON file, or with
// --format collapsed to folded stacks (convert/collapsed.hpp).
#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/terminal_text.hpp"
#include "cli/commands.hpp"
#include "convert/chrome_trace.hpp"
#include "convert/collapsed.hpp"
#include "convert/merge_trace.hpp"
#include "convert/speedscope.hpp"

namespace gilspy::cli {
namespace {

// `merged`: --merge-into, where the line after each input says which process of the trace took its lanes.
void print_input_lines(const convert::ConvertReport& report, bool merged = false);
void print_input_warnings(const convert::ConvertReport& report);

// "2024-07-15 10:52:38.123 UTC" for ns since the epoch.
std::string utc_text(int64_t ns) {
  const std::time_t secs = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("{}.{:03} UTC", text, (ns / 1'000'000) % 1000);
}

struct ConvertOptions {
  std::vector<std::string> inputs;
  std::string output;
  std::string file_mode = "0600";
  bool salvage = false;
  bool no_stacks = false;            // no frame slices (the GIL slices keep their stacks in args)
  std::string merge_into;            // a framework profiler's trace to add the GIL lanes to
  std::vector<std::string> pid_map;  // GILPID:TRACEPID
  std::string align_at;              // NS or NAME@NS: when the merged trace's ts 0 (or event NAME) was
  std::string pid_namespace;         // "target" | "host" | "" (convert: host; merge: target's, then host's)
  std::string format = "trace";
  std::string weight = "contention";
};

std::optional<convert::PidNamespace> pid_namespace_option(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "target") return convert::PidNamespace::kTarget;
  if (text == "host") return convert::PidNamespace::kHost;
  throw Error(ErrorKind::kUsage, "--pid-namespace takes target or host, not '" + text + "'");
}

int run_merge(const ConvertOptions& o);
int run_collapsed(const ConvertOptions& o, const std::string& output, mode_t mode);
int run_speedscope(const ConvertOptions& o, const std::string& output, mode_t mode);

// Every file convert reads must be a regular file (a FIFO with no writer would block it for ever, a folder is
// not a recording), and the output none of them: writing it would replace a recording by its trace.
void check_paths(const ConvertOptions& o, const std::string& output) {
  namespace fs = std::filesystem;
  std::vector<std::string> read = o.inputs;
  if (!o.merge_into.empty()) read.push_back(o.merge_into);
  std::error_code ec;
  const bool output_exists = fs::exists(output, ec);
  for (const auto& path : read) {
    const fs::file_status st = fs::status(path, ec);
    if (ec || st.type() == fs::file_type::not_found) continue;  // reading it says what is wrong
    if (st.type() == fs::file_type::directory) {
      throw Error(ErrorKind::kBadInput, path + " is a folder, not a recording: give the files in it (-i " +
                                            (fs::path(path) / "GIL_<pid>_rank_<rank>.json").string() + ")");
    }
    if (st.type() != fs::file_type::regular) {
      throw Error(ErrorKind::kBadInput,
                  path + " is not a regular file (a FIFO, socket or device): convert reads files only");
    }
    if (output_exists && fs::equivalent(path, output, ec)) {
      throw Error(ErrorKind::kUsage, "the output " + output + " is also an input: writing it would replace " +
                                         path + "; choose another -o/--output");
    }
  }
}

int run_convert(const ConvertOptions& o) {
  if (!o.merge_into.empty()) return run_merge(o);
  if (!o.pid_map.empty()) throw Error(ErrorKind::kUsage, "--pid-map is for --merge-into");
  if (!o.align_at.empty()) throw Error(ErrorKind::kUsage, "--align-at is for --merge-into");
  if (o.no_stacks && o.format != "trace") {
    throw Error(ErrorKind::kUsage, "--no-stacks leaves the frames out of a trace; --format " + o.format +
                                       " is the stacks alone");
  }
  std::string output = o.output;
  if (output.empty()) {
    if (o.inputs.size() != 1) {
      throw Error(ErrorKind::kUsage, "with several inputs, name the output file with -o/--output");
    }
    output = o.format == "collapsed"    ? convert::default_collapsed_path(o.inputs.front())
             : o.format == "speedscope" ? convert::default_speedscope_path(o.inputs.front())
                                        : convert::default_output_path(o.inputs.front());
  }
  check_paths(o, output);
  const mode_t mode = parse_file_mode_option(o.file_mode);
  if (o.format == "collapsed") return run_collapsed(o, output, mode);
  if (o.format == "speedscope") return run_speedscope(o, output, mode);
  convert::ConvertReport report;
  try {
    report = convert::convert_to_chrome_trace(
        o.inputs, output,
        {.mode = mode,
         .salvage = o.salvage,
         .pid_namespace = pid_namespace_option(o.pid_namespace).value_or(convert::PidNamespace::kHost),
         .frame_slices = !o.no_stacks});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    throw Error(e.kind(), std::string(e.what()) + " with --salvage; nothing was written");
  }
  print_input_lines(report);
  fmt::print("wrote {} ({} events)\n", escape_for_terminal(report.output), report.events_written);
  std::fflush(stdout);
  print_input_warnings(report);
  return 0;
}

void print_input_lines(const convert::ConvertReport& report, bool merged) {
  for (const auto& in : report.inputs) {
    const auto& m = in.meta;
    // The file's text came from a target (or anyone who wrote the file): escaped on the way to the terminal.
    std::string line = fmt::format("{}: pid {} rank {} python {}, {} events", escape_for_terminal(in.path),
                                   m.pid, m.rank, escape_for_terminal(m.python_version), in.records);
    // (Merged, the pid differs because the profiler saw the process under another one: said on the next
    // line.)
    if (in.trace_pid != m.pid && !merged)
      line += fmt::format(" (shown as pid {}: an earlier input has pid {})", in.trace_pid, m.pid);
    if (!in.complete)
      line +=
          fmt::format(" ({}: {})", in.corrupt ? "salvaged" : "recovered", escape_for_terminal(in.problem));
    fmt::print("{}\n", line);
  }
}

void print_input_warnings(const convert::ConvertReport& report) {
  for (const auto& in : report.inputs) {
    if (in.complete) continue;
    if (in.corrupt) {
      fmt::print(stderr,
                 "gilspy: warning: {} is corrupt at byte offset {} of {}; salvaged its {} events before the "
                 "damage{}, about {} lines after it are lost\n",
                 in.path, in.damage_offset, in.bytes, in.records,
                 in.summary_rebuilt ? " (summary rebuilt from them)" : "", in.unread_lines);
      continue;
    }
    fmt::print(
        stderr,
        "gilspy: warning: {} is an unfinished recording; recovered and converted its {} complete events{}\n",
        escape_for_terminal(in.path), in.records,
        in.summary_rebuilt ? " and rebuilt its summary from them" : "");
  }
}

// Per input: which process of the trace took its lanes, or a warning when none did or when the recording
// does not overlap the trace's events. `trace`: the trace's name, escaped.
void print_merge_lines(const convert::MergeReport& report, const std::string& trace) {
  for (size_t i = 0; i < report.merged.size(); ++i) {
    const auto& in = report.convert.inputs[i];
    const auto& mi = report.merged[i];
    if (mi.matched) {
      const std::string process = mi.trace_pid_text.empty()
                                      ? std::to_string(in.trace_pid)
                                      : "\"" + escape_for_terminal(mi.trace_pid_text) + "\"";
      fmt::print("  GIL lanes of pid {} in process {} of {}{}\n", in.meta.pid, process, trace,
                 mi.matched_by == "ns_pid"      ? " (its pid in its own PID namespace)"
                 : mi.matched_by == "--pid-map" ? " (--pid-map)"
                 : mi.matched_by == "legacy"    ? " (the legacy profiler's only process of a program)"
                                                : "");
    } else {
      fmt::print(
          stderr,
          "gilspy: warning: pid {} of {} is no process of {}: added as a process of its own (pid {}); if "
          "the profiler saw it under another pid, name it with --pid-map {}:TRACEPID\n",
          in.meta.pid, escape_for_terminal(in.path), trace, in.trace_pid, in.meta.pid);
    }
    if (!mi.overlaps) {
      fmt::print(
          stderr,
          "gilspy: warning: the recording of pid {} ({:.3f} s from {}) does not overlap the events of {} "
          "({}): its lanes are elsewhere on the timeline\n",
          in.meta.pid, static_cast<double>(mi.end_ns - mi.start_ns) / 1e9, utc_text(mi.start_ns), trace,
          report.trace_start_ns < report.trace_end_ns
              ? fmt::format("{} to {}", utc_text(report.trace_start_ns), utc_text(report.trace_end_ns))
              : std::string("none with a time"));
    }
  }
}

// --merge-into TRACE: the GIL lanes into a profiler's trace (convert/merge_trace.hpp).
int run_merge(const ConvertOptions& o) {
  if (o.format != "trace") {
    throw Error(ErrorKind::kUsage, "--format " + o.format +
                                       " does not go with --merge-into, which writes a trace: convert once "
                                       "with --merge-into and once with --format " +
                                       o.format);
  }
  if (o.output.empty()) {
    throw Error(ErrorKind::kUsage,
                "with --merge-into, name the merged trace with -o/--output (.json or .json.gz)");
  }
  check_paths(o, o.output);
  convert::MergeOptions mo{.trace = o.merge_into,
                           .pid_map = {},
                           .pid_namespace = pid_namespace_option(o.pid_namespace),
                           .mode = parse_file_mode_option(o.file_mode),
                           .salvage = o.salvage,
                           .frame_slices = !o.no_stacks,
                           .align_at = {}};
  if (!o.align_at.empty()) mo.align_at = convert::parse_align_at(o.align_at);
  for (const auto& item : o.pid_map) mo.pid_map.push_back(convert::parse_pid_map(item));
  convert::MergeReport report;
  try {
    report = convert::merge_into_trace(o.inputs, o.output, mo);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    throw Error(e.kind(), std::string(e.what()) + " with --salvage; nothing was written");
  }
  print_input_lines(report.convert, true);
  print_merge_lines(report, escape_for_terminal(o.merge_into));
  fmt::print("wrote {} ({}{} profiler events kept, {} GIL events added; times on {})\n",
             escape_for_terminal(report.convert.output), report.output_gzip ? "gzip, " : "",
             report.trace_events, report.convert.events_written,
             report.aligned_by_option ? "--align-at (ts 0 at " + utc_text(report.convert.base_time_ns) + ")"
             : report.absolute_times  ? "the epoch (the trace has no baseTimeNanoseconds)"
                                      : "its baseTimeNanoseconds");
  std::fflush(stdout);
  print_input_warnings(report.convert);
  return 0;
}

int run_collapsed(const ConvertOptions& o, const std::string& output, mode_t mode) {
  const convert::FoldWeight weight = o.weight == "hold"       ? convert::FoldWeight::kHold
                                     : o.weight == "wait"     ? convert::FoldWeight::kWait
                                     : o.weight == "released" ? convert::FoldWeight::kReleased
                                     : o.weight == "all"      ? convert::FoldWeight::kAll
                                                              : convert::FoldWeight::kContention;
  convert::CollapsedReport report;
  try {
    report = convert::convert_to_collapsed(o.inputs, output,
                                           {.weight = weight, .mode = mode, .salvage = o.salvage});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    throw Error(e.kind(), std::string(e.what()) + " with --salvage; nothing was written");
  }
  fmt::print("wrote {} ({} stacks, {:.3f} s of {} in all{})\n", escape_for_terminal(output), report.lines,
             static_cast<double>(report.total_us) / 1e6,
             weight == convert::FoldWeight::kHold       ? "GIL holding"
             : weight == convert::FoldWeight::kWait     ? "waiting for the GIL"
             : weight == convert::FoldWeight::kReleased ? "time without the GIL"
             : weight == convert::FoldWeight::kAll      ? "threads' time (holding, waiting, without the GIL)"
                                                        : "GIL holding while others waited",
             report.unattributed_us > 0 ? fmt::format(", {:.3f} s without a stack sample",
                                                      static_cast<double>(report.unattributed_us) / 1e6)
                                        : "");
  if (weight == convert::FoldWeight::kReleased && report.total_us == 0 && report.stack_samples > 0) {
    fmt::print(stderr,
               "gilspy: warning: no time without the GIL has a stack: record with --all-threads to read the "
               "stacks of threads that neither hold nor wait\n");
  }
  if (report.stack_samples == 0) {
    fmt::print(stderr,
               "gilspy: warning: the input has no stack samples (recorded with --no-stacks, or by a gilspy "
               "before 0.2): everything is under [no stack sample]\n");
  }
  for (const auto& path : report.incomplete) {
    fmt::print(stderr,
               "gilspy: warning: {} is an unfinished or salvaged recording; folded as far as it goes\n",
               escape_for_terminal(path));
  }
  std::fflush(stdout);
  return 0;
}

// --format speedscope: one profile per view of the GIL (convert/speedscope.hpp).
int run_speedscope(const ConvertOptions& o, const std::string& output, mode_t mode) {
  convert::SpeedscopeReport report;
  try {
    report = convert::convert_to_speedscope(o.inputs, output, {.mode = mode, .salvage = o.salvage});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    throw Error(e.kind(), std::string(e.what()) + " with --salvage; nothing was written");
  }
  std::string profiles;
  for (size_t i = 0; i < report.profiles.size(); ++i) {
    profiles += fmt::format("{}{} {:.3f} s", i == 0 ? "" : ", ", report.profiles[i],
                            static_cast<double>(report.totals_us[i]) / 1e6);
  }
  fmt::print(
      "wrote {} (speedscope: {}; {} frames): open it on speedscope.app or with `npx speedscope FILE`\n",
      escape_for_terminal(output), profiles, report.frames);
  if (report.stack_samples == 0) {
    fmt::print(
        stderr,
        "gilspy: warning: the input has no stack samples (recorded with --no-stacks): every profile is "
        "[no stack sample]\n");
  }
  for (const auto& path : report.incomplete) {
    fmt::print(stderr,
               "gilspy: warning: {} is an unfinished or salvaged recording; converted as far as it goes\n",
               escape_for_terminal(path));
  }
  std::fflush(stdout);
  return 0;
}

// `gilspy convert --help` after the options: examples and what the command does (exit status, files).
constexpr const char* kConvertFooter =
    "Converts raw recordings (GIL_<pid>_rank_<rank>.json, from 'gilspy record') to one Chrome Trace JSON\n"
    "file for Chrome DevTools (Performance, Load profile), Perfetto (ui.perfetto.dev) or MindStudio "
    "Insight.\n"
    "Each input becomes a process (pid, rank, Python version), each Python thread a lane with hold_gil "
    "and\n"
    "take_gil slices and drop_gil marks, plus a gil_waiters counter and the same count as slices on a\n"
    "'GIL waiters' lane. Times are on the Unix epoch (baseTimeNanoseconds + ts, as PyTorch's profiler\n"
    "writes them), so the lanes line up with a profiler trace of the same run. An unfinished recording\n"
    "(.partial, or cut short) is converted as far as it goes, and said so. A corrupt file (finished but "
    "not\n"
    "parsing, or failing to parse before its end) is refused with the byte offset of the damage, unless\n"
    "--salvage converts what precedes it. The output is written unnamed (or under a random OUT.<hex>.tmp)\n"
    "and takes its name when complete; nothing is left on failure, and an existing OUT is replaced only "
    "if\n"
    "it is a regular file of the same user, never through a link. Mode 0600 unless --file-mode.\n"
    "Several ranks come out in rank order. --merge-into TRACE adds the GIL lanes to a PyTorch profiler\n"
    "(Kineto) trace (.json or .json.gz; -o X.gz writes gzip), Ascend's trace_view.json or the legacy\n"
    "profiler's export_chrome_trace instead: the profiler's events and members are kept as they are, the\n"
    "lanes go into the process of the recording's pid ('GIL <tid> (<name>)' on tids of their own), aligned\n"
    "on CLOCK_REALTIME; --pid-map GILPID:TRACEPID when the profiler saw another pid. The legacy profiler\n"
    "(python3-torch without Kineto) writes times after its start, which its file does not hold: give it\n"
    "with --align-at NS (time.time_ns() when the profiler started) or NAME@NS (an event of yours).";

// --merge-into and what goes with it; --pid-namespace (which the merge uses too).
void add_merge_options(CLI::App& cmd, ConvertOptions& opts) {
  cmd.add_option(
         "--merge-into", opts.merge_into,
         "A PyTorch profiler (Kineto) trace, .json or .json.gz, or Ascend's trace_view.json: write it to -o "
         "with the GIL lanes added to the process of each recording's pid (.gz output: gzip)")
      ->type_name("TRACE");
  cmd.add_option(
         "--pid-map", opts.pid_map,
         "With --merge-into: a recording's pid and the trace's pid of the same process when they differ "
         "(a container, another host; a string pid such as 'CPU functions' of PyTorch's legacy profiler); "
         "repeat or comma-separate")
      ->delimiter(',')
      ->type_name("GILPID:TRACEPID");
  cmd.add_option("--align-at", opts.align_at,
                 "With --merge-into: when the trace's ts 0 was, in ns since the epoch (e.g. time.time_ns() "
                 "just before the profiler started), or NAME@NS: when its first event named NAME began. "
                 "Needed for traces whose times are not on the epoch and have no baseTimeNanoseconds "
                 "(PyTorch's legacy profiler); overrides the trace's own")
      ->type_name("NS|NAME@NS");
  cmd.add_option(
         "--pid-namespace", opts.pid_namespace,
         "For a target in a container: show its own pid and tids (target, as the program and a profiler "
         "inside the container see them) or gilspy's (host). Default: host; with --merge-into, whichever "
         "the trace has, the target's first")
      ->type_name("target|host");
}

}  // namespace

Runner add_convert_command(CLI::App& app) {
  auto opts = std::make_shared<ConvertOptions>();
  auto* cmd = app.add_subcommand(
      "convert", "Convert raw recordings to Chrome Trace JSON, several ranks on one timeline");
  cmd->footer(kConvertFooter);
  cmd->add_option("-i,--input", opts->inputs,
                  "Raw recording to convert; repeat to merge several (e.g. one per rank)")
      ->required()
      ->take_all()
      ->type_name("FILE");
  cmd->add_option("-o,--output", opts->output,
                  "Trace file to write (default with one input X.json: X.trace.json beside it; required with "
                  "several)")
      ->type_name("OUT");
  cmd->add_flag(
      "--salvage", opts->salvage,
      "Convert a corrupt input up to its damage (and say how much was lost) instead of refusing it");
  cmd->add_flag(
      "--no-stacks", opts->no_stacks,
      "No frame slices under the hold_gil / take_gil slices (each keeps its stack in its args): lanes "
      "a viewer shows one slice deep (DevTools fills its screen with nested frames)");
  cmd->add_option("--file-mode", opts->file_mode, "Permissions of the output, octal (default 0600)")
      ->type_name("MODE");
  cmd->add_option("--format", opts->format,
                  "trace (Chrome Trace JSON, the default); collapsed: folded stacks ('a;b;c N', N in "
                  "microseconds) for flamegraph.pl, inferno or speedscope, default output X.folded; "
                  "speedscope: speedscope's own format, one profile per view (held while others waited, "
                  "held, waited, without the GIL), default output X.speedscope.json")
      ->check(CLI::IsMember({"trace", "collapsed", "speedscope"}))
      ->type_name("trace|collapsed|speedscope");
  cmd->add_option(
         "--weight", opts->weight,
         "collapsed: weigh each stack by its GIL hold time (hold), its hold time while other threads "
         "waited (contention, the default), the time threads waited at it (wait), the time threads spent "
         "there without the GIL (released: in C, I/O, asleep; recorded with --all-threads), or all of "
         "these (all: where the threads' time went)")
      ->check(CLI::IsMember({"hold", "contention", "wait", "released", "all"}))
      ->type_name("hold|contention|wait|released|all");
  add_merge_options(*cmd, *opts);
  return [opts] { return run_convert(*opts); };
}

}  // namespace gilspy::cli
