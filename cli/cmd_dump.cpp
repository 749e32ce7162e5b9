// `gilspy dump -p PID`: every thread's Python stack now, with its GIL role, the holder first. What people run
// first on a hung service, with what a stack dumper alone cannot say: who holds the GIL, who waits for it,
// and whether it changed hands at all while gilspy watched.
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "base/clock.hpp"
#include "base/terminal_text.hpp"
#include "cli/commands.hpp"
#include "cli/gil_snapshot.hpp"
#include "sampler/native/native_stacks.hpp"
#include "sampler/stacks/thread_dump.hpp"

namespace gilspy::cli {
namespace {

struct DumpOptions : LookOptions {
  double watch_s = 0.1;
  bool native = false;  // also each thread's C stack (a brief ptrace stop per thread)
};

// The GIL read every millisecond for a while: whether it changed hands, and whether one thread held it all
// along (a hung service: a C call that keeps the GIL, or a deadlock).
struct GilWatch {
  double seconds = 0;
  uint64_t handoffs = 0;  // switch_number's moves
  bool held_throughout = false;
};

GilWatch watch_gil(sampler::RemoteMemoryReader& reader, const sampler::Interpreter& in, double seconds) {
  GilWatch w;
  const sampler::GilSample first = read_gil_now(reader, in);
  w.held_throughout = first.locked == 1;
  const int64_t start = monotonic_ns();
  const int64_t end = start + static_cast<int64_t>(seconds * 1e9);
  sampler::GilSample last = first;
  for (int64_t next = start + 1'000'000; next < end; next += 1'000'000) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<int64_t>(0, next - monotonic_ns())));
    last = read_gil_now(reader, in);
    if (last.locked != 1 || last.last_holder != first.last_holder) w.held_throughout = false;
  }
  w.handoffs = last.switch_number - first.switch_number;
  if (end <= start + 1'000'000) w.held_throughout = false;  // watched for less than one read: no "throughout"
  if (w.handoffs != 0) w.held_throughout = false;
  w.seconds = static_cast<double>(monotonic_ns() - start) / 1e9;
  return w;
}

struct DumpedThread {
  ThreadLook look;
  std::string name;  // threading's name; empty when unknown
  sampler::DumpStack stack;
  std::optional<sampler::NativeStack> native = {};  // --native
};

int role_rank(const ThreadLook& t) {
  const std::string_view r = t.role;
  return r == "holding" ? 0 : r == "waiting" ? 1 : 2;
}

std::vector<DumpedThread> dump_threads(const GilSnapshot& snap, sampler::ThreadDump& dump) {
  const auto names = dump.python_names();
  std::vector<DumpedThread> out;
  for (const auto& look : snap.threads) {
    const auto name = names.find(look.ref.pthread_id);
    out.push_back({look, name != names.end() ? name->second : "", dump.stack(look.ref.tstate)});
  }
  std::stable_sort(out.begin(), out.end(), [](const DumpedThread& a, const DumpedThread& b) {
    return role_rank(a.look) < role_rank(b.look);
  });
  return out;
}

// What a thread that neither holds nor waits is doing, from the kernel.
std::string released_detail(const ThreadLook& t) {
  switch (t.task) {
    case sampler::TaskState::kRunning:
      return "running outside Python (C code, or between two calls)";
    case sampler::TaskState::kSwitchWait:
      return "handing the GIL over";
    case sampler::TaskState::kOtherSyscall: {
      const char* name = sampler::syscall_name(t.syscall);
      if (name != nullptr) return fmt::format("blocked in {}", name);
      return t.syscall >= 0 ? fmt::format("blocked in system call {}", t.syscall) : "blocked";
    }
    default:
      return "";
  }
}

std::string gil_line(const GilSnapshot& snap, const GilWatch& w, const std::string& holder_name) {
  const std::string holder =
      snap.holder_tid != 0 ? fmt::format("thread {}{}", snap.holder_tid, holder_name) : "an unknown thread";
  if (w.seconds < 0.001) {  // --watch 0: one look, nothing to say about a while
    return snap.gil.locked == 1 ? fmt::format("held by {}, {} thread(s) waiting", holder, snap.gil.waiters)
                                : fmt::format("free, {} thread(s) waiting", snap.gil.waiters);
  }
  if (w.held_throughout) {
    return fmt::format("held by {} throughout the {:.2f} s watched: no hand-off", holder, w.seconds);
  }
  const std::string now = snap.gil.locked == 1 ? "held by " + holder : "free";
  return fmt::format("changed hands {} times in the {:.2f} s watched; now {}, {} thread(s) waiting",
                     w.handoffs, w.seconds, now, snap.gil.waiters);
}

std::string quoted_name(const DumpedThread& t) {
  return t.name.empty() ? "" : fmt::format(" \"{}\"", escape_for_terminal(t.name));
}

void print_stack(const sampler::DumpStack& s) {
  if (!s.read) {
    fmt::print("    (no stack: {})\n", s.why);
    return;
  }
  if (s.frames.empty()) fmt::print("    (no Python frames)\n");
  for (const auto& f : s.frames) {
    fmt::print("    {} ({}:{})\n", escape_for_terminal(f.function), escape_for_terminal(f.file), f.line);
  }
  if (s.truncated) fmt::print("    ... deeper frames not read\n");
}

// --native: after the Python stacks (read without stopping anything), each thread's C stack, the holder
// first, each thread stopped only while its own is read.
void add_native_stacks(int pid, std::vector<DumpedThread>& threads) {
  std::vector<int64_t> tids;
  for (const auto& t : threads) tids.push_back(t.look.ref.tid);
  auto stacks = sampler::read_native_stacks(pid, tids);
  for (size_t i = 0; i < threads.size() && i < stacks.size(); ++i) threads[i].native = std::move(stacks[i]);
}

void print_native(const sampler::NativeStack& s) {
  fmt::print("  native, innermost first (stopped {} us to read):\n", (s.stopped_ns + 500) / 1000);
  if (s.frames.empty()) fmt::print("    (none: {})\n", escape_for_terminal(s.error));
  for (const auto& f : s.frames) {
    const std::string where = f.module.empty() ? "" : " (" + escape_for_terminal(f.module) + ")";
    if (f.function.empty()) {
      fmt::print("    0x{:x}{}\n", f.pc, where);
    } else {
      fmt::print("    {}+0x{:x}{}\n", escape_for_terminal(f.function), f.offset, where);
    }
  }
  if (s.truncated) fmt::print("    ... deeper frames not read\n");
}

void print_dump_text(int pid, const sampler::Interpreter& in, const GilSnapshot& snap, const GilWatch& w,
                     const std::vector<DumpedThread>& threads) {
  fmt::print("Python {} ({}), pid {}\n", in.binary.version.text(), escape_for_terminal(in.binary.path), pid);
  std::string holder_name;
  for (const auto& t : threads) {
    if (t.look.ref.tid == snap.holder_tid && snap.holder_tid != 0) holder_name = quoted_name(t);
  }
  fmt::print("GIL: {}\n", gil_line(snap, w, holder_name));
  if (!snap.consistent)
    fmt::print("(the GIL changed hands while the threads were read: roles may be mixed)\n");
  for (const auto& t : threads) {
    const std::string_view role = t.look.role;
    std::string what = role == "holding"   ? "holds the GIL"
                       : role == "waiting" ? "waits for the GIL"
                                           : "does not hold the GIL";
    if (role == "released") {
      if (const auto detail = released_detail(t.look); !detail.empty()) what += ": " + detail;
    }
    fmt::print("\nThread {}{}{}: {}\n", t.look.ref.tid, quoted_name(t), t.look.main ? " (main thread)" : "",
               what);
    print_stack(t.stack);
    if (t.native) print_native(*t.native);
  }
  if (!threads.empty() && threads.front().native) {
    int64_t longest = 0;
    for (const auto& t : threads) longest = std::max(longest, t.native ? t.native->stopped_ns : 0);
    fmt::print(
        "\nNative stacks: read after the Python ones, each thread stopped with ptrace while its registers "
        "and "
        "stack were read (at most {} us); the Python stacks were read without stopping anything.\n",
        (longest + 500) / 1000);
  }
}

nlohmann::json native_json(const sampler::NativeStack& s) {
  auto frames = nlohmann::json::array();
  for (const auto& f : s.frames) {
    frames.push_back({{"pc", f.pc}, {"function", f.function}, {"offset", f.offset}, {"module", f.module}});
  }
  nlohmann::json out = {{"frames", frames}, {"truncated", s.truncated}, {"stopped_us", s.stopped_ns / 1000}};
  if (!s.error.empty()) out["error"] = s.error;
  return out;
}

nlohmann::json dump_json(int pid, const sampler::Interpreter& in, const GilSnapshot& snap, const GilWatch& w,
                         const std::vector<DumpedThread>& threads) {
  auto rows = nlohmann::json::array();
  for (const auto& t : threads) {
    auto frames = nlohmann::json::array();
    for (const auto& f : t.stack.frames)
      frames.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
    nlohmann::json row = {{"tid", t.look.ref.tid}, {"name", t.name},
                          {"comm", t.look.comm},   {"main", t.look.main},
                          {"role", t.look.role},   {"kernel", sampler::to_string(t.look.task)},
                          {"stack", frames},       {"stack_truncated", t.stack.truncated}};
    if (const char* sys = sampler::syscall_name(t.look.syscall)) row["syscall"] = sys;
    if (!t.stack.read) row["stack_error"] = t.stack.why;
    if (t.native) row["native"] = native_json(*t.native);
    rows.push_back(std::move(row));
  }
  return {{"pid", pid},
          {"python_version", in.binary.version.text()},
          {"gil",
           {{"locked", snap.gil.locked},
            {"holder_tid", snap.holder_tid},
            {"switch_number", snap.gil.switch_number},
            {"waiters", snap.gil.waiters},
            {"watched_s", w.seconds},
            {"handoffs_while_watched", w.handoffs},
            {"held_throughout", w.held_throughout}}},
          {"consistent_snapshot", snap.consistent},
          {"threads", rows}};
}

int run_dump(const DumpOptions& o) {
  const LookedAt t = look_at(o);
  const GilWatch w = watch_gil(*t.reader, t.in, o.watch_s);
  const GilSnapshot snap = read_gil_snapshot(o.pid, *t.reader, t.in, t.threads);
  sampler::ThreadDump dump(t.in, *t.reader);
  auto threads = dump_threads(snap, dump);
  if (o.native) add_native_stacks(o.pid, threads);
  if (o.json) {
    print_json_line(dump_json(o.pid, t.in, snap, w, threads));
    return 0;
  }
  print_dump_text(o.pid, t.in, snap, w, threads);
  if (t.truncated) fmt::print("\n... more than {} threads; the rest are not shown\n", t.threads.size());
  return 0;
}

}  // namespace

Runner add_dump_command(CLI::App& app) {
  auto opts = std::make_shared<DumpOptions>();
  auto* cmd = app.add_subcommand(
      "dump", "Print every thread's Python stack now, with who holds the GIL and who waits");
  cmd->footer(
      "Watches the GIL for --watch seconds (does it change hands at all, or does one thread hold it all\n"
      "along, as in a hung service?), then prints each thread's Python stack, innermost call first: the\n"
      "holder first, then the threads waiting for the GIL, then the rest with what the kernel says they\n"
      "are blocked in. The target is not stopped: the holder's stack is read while it runs (read again\n"
      "until a read is not torn). --native adds each thread's C stack (where a C extension holds the GIL),\n"
      "which does stop threads: one at a time, with ptrace, while its registers and stack are read (1-20 ms\n"
      "each here; each thread's is printed). --json prints the same as one JSON object.");
  add_look_options(cmd, *opts);
  cmd->add_option("--watch", opts->watch_s, "Seconds to watch the GIL before the stacks are read")
      ->default_val(0.1)
      ->check(non_negative_number());
  cmd->add_flag("--native", opts->native,
                "Also each thread's native (C) stack, symbols from the mapped binaries: stops each thread "
                "briefly (ptrace) to read its registers; needs root or CAP_SYS_PTRACE");
  return [opts] { return run_dump(*opts); };
}

}  // namespace gilspy::cli
