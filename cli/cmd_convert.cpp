// `gilspy convert -i RAW [-i RAW ...] [-o OUT]`: raw recordings to one Chrome Trace JSON file.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "convert/chrome_trace.hpp"
#include "base/error.hpp"
#include "base/terminal_text.hpp"

namespace gilspy::cli {
namespace {

struct ConvertOptions {
  std::vector<std::string> inputs;
  std::string output;
};

int run_convert(const ConvertOptions& o) {
  std::string output = o.output;
  if (output.empty()) {
    if (o.inputs.size() != 1) {
      throw Error(ErrorKind::kUsage, "with several inputs, name the output file with -o/--output");
    }
    output = convert::default_output_path(o.inputs.front());
  }
  const convert::ConvertReport report = convert::convert_to_chrome_trace(o.inputs, output);
  for (const auto& in : report.inputs) {
    const auto& m = in.meta;
    // The file's text came from a target (or anyone who wrote the file): escaped on the way to the terminal.
    std::string line = fmt::format("{}: pid {} rank {} python {}, {} events", escape_for_terminal(in.path), m.pid,
                                   m.rank, escape_for_terminal(m.python_version), in.records);
    if (in.trace_pid != m.pid)
      line += fmt::format(" (shown as pid {}: an earlier input has pid {})", in.trace_pid, m.pid);
    if (!in.complete) line += fmt::format(" (recovered: {})", escape_for_terminal(in.problem));
    fmt::print("{}\n", line);
  }
  fmt::print("wrote {} ({} events)\n", escape_for_terminal(report.output), report.events_written);
  std::fflush(stdout);
  for (const auto& in : report.inputs) {
    if (in.complete) continue;
    fmt::print(
        stderr,
        "gilspy: warning: {} is an unfinished recording; recovered and converted its {} complete events{}\n",
        escape_for_terminal(in.path), in.records, in.summary_rebuilt ? " and rebuilt its summary from them" : "");
  }
  return 0;
}

}  // namespace

Runner add_convert_command(CLI::App& app) {
  auto opts = std::make_shared<ConvertOptions>();
  auto* cmd = app.add_subcommand("convert", "Convert raw recordings to Chrome Trace JSON, several ranks on one timeline");
  cmd->footer(
      "Converts raw recordings (GIL_<pid>_rank_<rank>.json, from 'gilspy record') to one Chrome Trace JSON\n"
      "file for Chrome DevTools (Performance, Load profile), Perfetto (ui.perfetto.dev) or MindStudio Insight.\n"
      "Each input becomes a process (pid, rank, Python version), each Python thread a lane with hold_gil and\n"
      "take_gil slices and drop_gil marks, plus a gil_waiters counter. Times are on the Unix epoch (baseTimeNanoseconds + ts, as PyTorch's profiler\n"
      "writes them), so the lanes line up with a profiler trace of the same run. An unfinished recording\n"
      "(.partial, or cut short) is converted as far as it goes, and said so.");
  cmd->add_option("-i,--input", opts->inputs,
                  "Raw recording to convert; repeat to merge several (e.g. one per rank)")
      ->required()
      ->take_all()
      ->type_name("FILE");
  cmd->add_option("-o,--output", opts->output,
                  "Trace file to write (default with one input X.json: X.trace.json beside it; required with "
                  "several). Written under OUT.tmp and renamed when complete")
      ->type_name("OUT");
  return [opts] { return run_convert(*opts); };
}

}  // namespace gilspy::cli
