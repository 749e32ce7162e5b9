// `gilspy info -p PID`: one look at a running interpreter: version, where its GIL is, who holds it, who
// waits.

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/terminal_text.hpp"
#include "cli/commands.hpp"
#include "cli/gil_snapshot.hpp"
#include "sampler/proc/task_syscall.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::cli {
namespace {

using InfoOptions = LookOptions;

std::string hex(uint64_t v) {
  return fmt::format("0x{:x}", v);
}

nlohmann::json thread_rows(const GilSnapshot& snap, bool other_pid_namespace) {
  auto rows = nlohmann::json::array();
  for (const auto& t : snap.threads) {
    rows.push_back({{"tid", t.ref.tid},
                    {"tstate", hex(t.ref.tstate)},
                    {"main", t.main},
                    {"state", t.role},
                    {"task", sampler::to_string(t.task)},
                    {"comm", t.comm}});
    if (other_pid_namespace) rows.back()["ns_tid"] = t.ref.ns_tid;  // the container's own id
  }
  return rows;
}

nlohmann::json info_json(int pid, const sampler::Interpreter& in, const GilSnapshot& snap, bool truncated,
                         bool other_pid_namespace) {
  const auto& b = in.binary;
  const sampler::GilSample& g = snap.gil;
  return {{"pid", pid},
          {"python_version", b.version.text()},
          {"version_source", b.version_source},
          {"binary", b.path},
          {"build", b.shared_library ? "shared" : "static"},
          {"stripped", b.stripped},
          {"glibc", b.glibc ? b.glibc->text() : "unknown"},
          {"free_threaded", in.layout.free_threaded},
          {"layout_source", in.layout.source},
          {"runtime_addr", hex(b.runtime_addr)},
          {"interp_addr", hex(in.interp_addr)},
          {"gil_addr", hex(in.gil_addr)},
          {"switch_interval_us", g.interval_us},
          {"locked", g.locked},
          {"holder_tid", snap.holder_tid},
          {"switch_number", g.switch_number},
          {"waiters", g.waiters},
          {"threads_truncated", truncated},
          {"other_pid_namespace", other_pid_namespace},
          {"consistent_snapshot", snap.consistent},
          {"threads", thread_rows(snap, other_pid_namespace)}};
}

// The binary's path and the threads' names come from the target: escaped.
void print_info_text(int pid, const sampler::Interpreter& in, const GilSnapshot& snap, bool truncated) {
  const auto& b = in.binary;
  const sampler::GilSample& g = snap.gil;
  fmt::print("Python {} ({} {}{}), pid {}\n", b.version.text(),
             b.shared_library ? "libpython" : "static executable", escape_for_terminal(b.path),
             b.stripped ? ", stripped" : "", pid);
  fmt::print("_PyRuntime {}  interpreter {}  GIL {}  switch interval {} us\n", hex(b.runtime_addr),
             hex(in.interp_addr), hex(in.gil_addr), g.interval_us);
  fmt::print("GIL: {}, switch number {}, {} thread(s) waiting on it\n\n",
             g.locked == 1 ? (snap.holder_tid ? fmt::format("held by thread {}", snap.holder_tid)
                                              : "held by an unknown thread")
                           : "free",
             g.switch_number, g.waiters);
  fmt::print("  {:>8}  {:<9} {:<14} {}\n", "TID", "GIL", "KERNEL", "OS NAME");
  for (const auto& t : snap.threads) {
    fmt::print("  {:>8}  {:<9} {:<14} {}{}\n", t.ref.tid, t.role, sampler::to_string(t.task),
               escape_for_terminal(t.comm), t.main ? " (main thread)" : "");
  }
  if (truncated)
    fmt::print("  ... more than {} threads; the rest are not shown\n", sampler::ThreadWalker::kMaxThreads);
}

int run_info(const InfoOptions& o) {
  const LookedAt t = look_at(o);
  const GilSnapshot snap = read_gil_snapshot(o.pid, *t.reader, t.in, t.threads);
  if (o.json) {
    print_json_line(info_json(o.pid, t.in, snap, t.truncated, t.other_pid_namespace));
  } else {
    print_info_text(o.pid, t.in, snap, t.truncated);
  }
  return 0;
}

}  // namespace

Runner add_info_command(CLI::App& app) {
  auto opts = std::make_shared<InfoOptions>();
  auto* cmd = app.add_subcommand(
      "info", "Show a running interpreter's GIL and threads once: who holds it, who waits");
  cmd->footer(
      "Prints the Python version and build, where the runtime and the GIL are, the switch interval, and per\n"
      "thread (OS thread id) whether it holds the GIL, waits for it, or neither, with what the kernel says\n"
      "the thread is doing. --json prints the same as one JSON object.");
  add_look_options(cmd, *opts);
  return [opts] { return run_info(*opts); };
}

}  // namespace gilspy::cli
