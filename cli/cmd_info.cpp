// `gilspy info -p PID`: one look at a running interpreter: version, where its GIL is, who holds it, who
// waits.
#include <unistd.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "base/terminal_text.hpp"
#include "cli/commands.hpp"
#include "cli/process_discovery.hpp"
#include "cli/version_policy.hpp"
#include "sampler/proc/task_syscall.hpp"
#include "sampler/target/attach.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::cli {
namespace {

struct InfoOptions {
  int pid = 0;
  bool json = false;
  double wait_s = 2.0;
  bool strict_version = false;
  bool any_user = false;
};

std::string hex(uint64_t v) {
  return fmt::format("0x{:x}", v);
}

// A python executable that has not mapped libpython yet is waited for too; anything else is refused at once.
sampler::Interpreter attach_for_info(const InfoOptions& o, sampler::RemoteMemoryReader& reader) {
  char exe[4096] = {};
  const std::string exe_link = "/proc/" + std::to_string(o.pid) + "/exe";
  const ssize_t n = ::readlink(exe_link.c_str(), exe, sizeof exe - 1);
  const std::string exe_name = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  const bool looks_like_python = exe_name.find("/python") != std::string::npos;
  return sampler::attach(
      o.pid, reader, {.timeout_s = o.wait_s, .retry_interval_s = 0.01, .wait_for_python = looks_like_python});
}

// The GIL and who holds it, with every thread's state (rows of the JSON object), read at one moment.
struct InfoSnapshot {
  sampler::GilSample gil;
  nlohmann::json rows;
  int64_t holder_tid = 0;
  bool consistent = false;  // the GIL did not change hands while the threads were read
};

sampler::GilSample read_info_gil(sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in) {
  std::array<uint8_t, 256> gil_bytes{};
  const size_t gil_len = std::min<size_t>(in.layout.gil.size, gil_bytes.size());
  reader.read_exact(in.gil_addr, gil_bytes.data(), gil_len, "the GIL struct");
  const auto decoded = sampler::decode_gil(RemoteBytes(gil_bytes.data(), gil_len), in.layout.gil);
  if (!decoded) throw Error(ErrorKind::kLayoutMismatch, "the GIL layout does not fit the GIL struct's size");
  return *decoded;
}

// The GIL and the kernel's view of each thread are read at different moments. Read the GIL before and after
// the threads and keep a snapshot in which it did not change hands (a few tries), so the holder and the
// waiters shown belong together.
InfoSnapshot read_info_snapshot(int pid, sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in,
                                const sampler::ThreadWalker& walker,
                                const std::vector<sampler::ThreadRef>& threads) {
  InfoSnapshot snap;
  for (int attempt = 0; attempt < 20 && !snap.consistent; ++attempt) {
    snap.gil = read_info_gil(reader, in);
    const sampler::GilSample& g = snap.gil;
    snap.rows = nlohmann::json::array();
    snap.holder_tid = 0;
    for (const auto& t : threads) {
      sampler::TaskSyscallFile file;
      const auto task =
          file.open(pid, t.tid) ? file.read(in.gil_addr, in.layout.gil) : sampler::TaskState::kUnknown;
      const bool holds = g.holder() == t.tstate;
      if (holds) snap.holder_tid = t.tid;
      const char* state = holds ? "holding" : sampler::is_waiting_for_gil(task) ? "waiting" : "released";
      snap.rows.push_back({{"tid", t.tid},
                           {"tstate", hex(t.tstate)},
                           {"main", t.tid == pid},
                           {"state", state},
                           {"task", sampler::to_string(task)},
                           {"comm", thread_comm(pid, t.tid)}});
      if (walker.in_other_pid_namespace()) snap.rows.back()["ns_tid"] = t.ns_tid;  // the container's own id
    }
    const auto after = read_info_gil(reader, in);
    snap.consistent = after.locked == g.locked && after.last_holder == g.last_holder &&
                      after.switch_number == g.switch_number;
  }
  return snap;
}

nlohmann::json info_json(int pid, const sampler::Interpreter& in, const InfoSnapshot& snap, bool truncated,
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
          {"threads", snap.rows}};
}

// The binary's path and the threads' names come from the target: escaped.
void print_info_text(int pid, const sampler::Interpreter& in, const InfoSnapshot& snap, bool truncated) {
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
  for (const auto& r : snap.rows) {
    const std::string comm = escape_for_terminal(r["comm"].get<std::string>());
    fmt::print("  {:>8}  {:<9} {:<14} {}{}\n", r["tid"].get<int64_t>(), r["state"].get<std::string>(),
               r["task"].get<std::string>(), comm, r["main"].get<bool>() ? " (main thread)" : "");
  }
  if (truncated)
    fmt::print("  ... more than {} threads; the rest are not shown\n", sampler::ThreadWalker::kMaxThreads);
}

int run_info(const InfoOptions& o) {
  require_process_id(o.pid);
  check_target_owner(o.pid, o.any_user);
  sampler::RemoteMemoryReader reader(o.pid);
  const auto in = attach_for_info(o, reader);
  apply_version_policy(in, o.strict_version);
  sampler::ThreadWalker walker(o.pid, in.layout, in.interp_addr);
  std::vector<sampler::ThreadRef> threads(sampler::ThreadWalker::kMaxThreads);
  bool truncated = false;
  threads.resize(walker.walk(reader, threads, &truncated));
  const InfoSnapshot snap = read_info_snapshot(o.pid, reader, in, walker, threads);
  if (o.json) {
    const nlohmann::json j = info_json(o.pid, in, snap, truncated, walker.in_other_pid_namespace());
    // A thread's name may be any bytes: invalid UTF-8 is replaced rather than failing the dump.
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
  }
  print_info_text(o.pid, in, snap, truncated);
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
  cmd->add_option("-p,--pid", opts->pid, "Process id of the Python process")
      ->required()
      ->check(positive_number())
      ->type_name("PID");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  cmd->add_flag("--any-user", opts->any_user,
                "Not run as root (file capabilities): also another user's process; without it gilspy reads "
                "only its own user's");
  cmd->add_flag(
      "--strict-version", opts->strict_version,
      "Refuse a Python newer than gilspy knows, even when its _Py_DebugOffsets read as the newest known");
  cmd->add_option("--wait", opts->wait_s,
                  "Seconds to keep retrying while the interpreter is still starting (no GIL yet)")
      ->default_val(2.0)
      ->check(non_negative_number());
  return [opts] { return run_info(*opts); };
}

}  // namespace gilspy::cli
