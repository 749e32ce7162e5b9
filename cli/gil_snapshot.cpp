#include "cli/gil_snapshot.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "cli/commands.hpp"
#include "cli/process_discovery.hpp"
#include "cli/version_policy.hpp"
#include "sampler/target/attach.hpp"

namespace gilspy::cli {

void add_look_options(CLI::App* cmd, LookOptions& o) {
  cmd->add_option("-p,--pid", o.pid, "Process id of the Python process")
      ->required()
      ->check(positive_number())
      ->type_name("PID");
  cmd->add_flag("--json", o.json, "Print one JSON object instead of text");
  cmd->add_flag("--any-user", o.any_user,
                "Not run as root (file capabilities): also another user's process; without it gilspy reads "
                "only its own user's");
  cmd->add_flag(
      "--strict-version", o.strict_version,
      "Refuse a Python newer than gilspy knows, even when its _Py_DebugOffsets read as the newest known");
  cmd->add_option("--wait", o.wait_s,
                  "Seconds to keep retrying while the interpreter is still starting (no GIL yet)")
      ->default_val(2.0)
      ->check(non_negative_number());
}

sampler::Interpreter attach_for_look(int pid, double wait_s, sampler::RemoteMemoryReader& reader) {
  char exe[4096] = {};
  const std::string exe_link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(exe_link.c_str(), exe, sizeof exe - 1);
  const std::string exe_name = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
  const bool looks_like_python = exe_name.find("/python") != std::string::npos;
  return sampler::attach(
      pid, reader, {.timeout_s = wait_s, .retry_interval_s = 0.01, .wait_for_python = looks_like_python});
}

LookedAt look_at(const LookOptions& o) {
  require_process_id(o.pid);
  check_target_owner(o.pid, o.any_user);
  LookedAt l;
  l.reader = std::make_unique<sampler::RemoteMemoryReader>(o.pid);
  l.in = attach_for_look(o.pid, o.wait_s, *l.reader);
  apply_version_policy(l.in, o.strict_version);
  sampler::ThreadWalker walker(o.pid, l.in.layout, l.in.interp_addr);
  l.threads.resize(sampler::ThreadWalker::kMaxThreads);
  l.threads.resize(walker.walk(*l.reader, l.threads, &l.truncated));
  l.other_pid_namespace = walker.in_other_pid_namespace();
  return l;
}

void print_json_line(const nlohmann::json& j) {
  fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

sampler::GilSample read_gil_now(sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in) {
  std::array<uint8_t, 256> gil_bytes{};
  const size_t gil_len = std::min<size_t>(in.layout.gil.size, gil_bytes.size());
  reader.read_exact(in.gil_addr, gil_bytes.data(), gil_len, "the GIL struct");
  const auto decoded = sampler::decode_gil(RemoteBytes(gil_bytes.data(), gil_len), in.layout.gil);
  if (!decoded) throw Error(ErrorKind::kLayoutMismatch, "the GIL layout does not fit the GIL struct's size");
  return *decoded;
}

GilSnapshot read_gil_snapshot(int pid, sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in,
                              const std::vector<sampler::ThreadRef>& threads) {
  GilSnapshot snap;
  for (int attempt = 0; attempt < 20 && !snap.consistent; ++attempt) {
    snap.gil = read_gil_now(reader, in);
    const sampler::GilSample& g = snap.gil;
    snap.threads.clear();
    snap.holder_tid = 0;
    for (const auto& t : threads) {
      ThreadLook look;
      look.ref = t;
      look.main = t.tid == pid;
      sampler::TaskSyscallFile file;
      if (file.open(pid, t.tid)) {
        look.task = file.read(in.gil_addr, in.layout.gil);
        look.syscall = file.last_syscall();
      }
      const bool holds = g.holder() == t.tstate;
      if (holds) snap.holder_tid = t.tid;
      look.role = holds ? "holding" : sampler::is_waiting_for_gil(look.task) ? "waiting" : "released";
      look.comm = thread_comm(pid, t.tid);
      snap.threads.push_back(std::move(look));
    }
    const auto after = read_gil_now(reader, in);
    snap.consistent = after.locked == g.locked && after.last_holder == g.last_holder &&
                      after.switch_number == g.switch_number;
  }
  return snap;
}

}  // namespace gilspy::cli
