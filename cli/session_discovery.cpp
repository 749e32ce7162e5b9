// Processes a session finds by itself (session_options.hpp's Discover): every Python process, or the targets'
// Python descendants, by /proc scans at the start and every half second while it runs.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/proc_files.hpp"
#include "base/terminal_text.hpp"
#include "cli/process_discovery.hpp"
#include "cli/session_impl.hpp"
#include "cli/version_policy.hpp"
#include "sampler/target/attach.hpp"

namespace gilspy::cli {

namespace {

// A found process whose interpreter is not ready yet (just started) is tried again at each scan for this
// long.
constexpr int64_t kNotReadyPatienceNs = 10'000'000'000;

}  // namespace

// The first scan, before the session runs. Looking for every Python process: none found is an error unless
// later ones are followed, and those found are listed.
void Session::Impl::discover_at_start() {
  discover(true);
  if (options.discover != Discover::kAllPython) return;
  if (targets.empty() && !options.follow) {
    throw Error(ErrorKind::kNotPython, options.accelerator_only
                                           ? "no Python process with an accelerator device open was found"
                                           : "no Python process that gilspy may read was found");
  }
  std::string list;
  for (const auto& t : targets) {
    list += fmt::format("\n  pid {} rank {}: {}", t->info.pid, t->info.rank,
                        escape_for_terminal(t->info.command));
  }
  note(targets.empty()
           ? "no Python process yet; waiting for one (Ctrl+C to stop)"
           : fmt::format("recording {} Python process{}{}{}", targets.size(), targets.size() == 1 ? "" : "es",
                         options.follow ? " (and those that start later)" : "", list));
}

// One found process: attached and made a target, or refused (said once, never tried again), or left for the
// next scan while its interpreter starts.
RunningTarget* Session::Impl::try_found(pid_t pid, const std::string& key, bool first_scan) {
  auto reader = std::make_unique<sampler::RemoteMemoryReader>(pid);
  sampler::Interpreter interp;
  try {
    check_target_owner(pid, options.any_user);
    interp = sampler::attach(pid, *reader, {.timeout_s = first_scan ? 0.5 : 0.0, .retry_interval_s = 0.01});
    apply_version_policy(interp, options.strict_version);
  } catch (const Error& e) {
    const int64_t now = gilspy::monotonic_ns();
    if (e.kind() == ErrorKind::kNoSuchProcess) {
      settled.insert(key);  // gone already
      return nullptr;
    }
    if (e.kind() == ErrorKind::kNotReady) {
      const auto [it, fresh] = not_ready_since.emplace(key, now);
      if (now - it->second < kNotReadyPatienceNs) return nullptr;
    }
    settled.insert(key);
    not_ready_since.erase(key);
    skipped.push_back({pid, escape_for_terminal(e.what()), false});
    note(fmt::format("pid {} ({}) is not recorded: {}", pid, escape_for_terminal(process_command_line(pid)),
                     escape_for_terminal(e.what())));
    return nullptr;
  }
  settled.insert(key);
  not_ready_since.erase(key);
  RunningTarget& t = add_target(pid);
  t.reader = std::move(reader);
  t.interp = std::move(interp);
  prepare_target(t);
  if (!first_scan) t.info.attached_ns = std::max<int64_t>(0, gilspy::monotonic_ns() - anchor_mono);
  return &t;
}

// Processes found by a /proc scan (every Python process, or the targets' Python descendants) that were not
// tried yet. As non-root, processes of other users are not "the user's" and are passed over without a word.
std::vector<RunningTarget*> Session::Impl::discover(bool first_scan) {
  std::vector<RunningTarget*> found;
  if (discovery_full) return found;
  std::vector<pid_t> candidates;
  if (options.discover == Discover::kAllPython) {
    candidates = python_processes(::getpid());
  } else {
    std::vector<pid_t> roots;
    for (const auto& t : targets) roots.push_back(t->info.pid);
    candidates = python_descendants(roots);
  }
  const uid_t me = ::geteuid();
  for (const pid_t pid : candidates) {
    const auto key = process_key(pid);
    if (!key || settled.contains(*key)) continue;
    if (me != 0) {
      struct stat st {};
      if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0 || st.st_uid != me) {
        settled.insert(*key);
        continue;
      }
    }
    if (options.accelerator_only && !holds_accelerator(pid)) continue;  // it may open one later
    if (targets.size() >= options.loop.max_targets) {
      discovery_full = true;
      note(
          fmt::format("{} processes are recorded, the most one session takes; pid {} and any found later are "
                      "not recorded",
                      targets.size(), pid));
      break;
    }
    if (RunningTarget* t = try_found(pid, *key, first_scan)) {
      found.push_back(t);
      if (!first_scan) {
        note(fmt::format("recording pid {} too (Python {}, found {:.2f} s in): {}", pid,
                         escape_for_terminal(t->interp.binary.version.text()),
                         static_cast<double>(gilspy::monotonic_ns() - anchor_mono) / 1e9,
                         escape_for_terminal(t->info.command)));
      }
    }
  }
  return found;
}

}  // namespace gilspy::cli
