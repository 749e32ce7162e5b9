// Processes a session finds by itself (session_options.hpp's Discover): every Python process, or the targets'
// Python descendants: by /proc scans at the start and every half second while it runs, and the descendants
// also as the kernel reports their forks (proc_events.hpp), where gilspy may listen to it.
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
// A /proc scan every this many drains (half a second); with the kernel's process events, a backstop.
constexpr int kScanEveryDrains = 10;
// A forked child is tried this long after its fork was seen: one that execs at once (subprocess, spawn) is
// then attached to as the program it became, not as the copy of its parent it was for a moment.
constexpr int64_t kForkSettleNs = 20'000'000;

// Gone, or exited and not reaped yet (a zombie, or on its way out).
bool has_ended(pid_t pid) {
  const auto state = process_state(pid);
  return !state || *state == 'Z' || *state == 'X';
}

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
      if (!first_scan) note_found(*t, gilspy::monotonic_ns());
    }
  }
  return found;
}

void Session::Impl::note_found(const RunningTarget& t, int64_t now) const {
  note(fmt::format("recording pid {} too (Python {}, found {:.2f} s in): {}", t.info.pid,
                   escape_for_terminal(t.interp.binary.version.text()),
                   static_cast<double>(now - anchor_mono) / 1e9, escape_for_terminal(t.info.command)));
}

// A child seen forking that ended before it could be recorded: counted, unless it was recorded after all (a
// scan got to it first) or refused with its reason said.
void Session::Impl::missed_child(pid_t pid) {
  for (const auto& t : targets) {
    if (t->info.pid == pid) return;
  }
  for (const auto& s : skipped) {
    if (s.pid == pid) return;
  }
  children_missed.push_back(pid);
}

void Session::Impl::note_children_missed() {
  // The events since the last drain, and the candidates never tried (the session ended first).
  bool lost = false;
  take_process_events(&lost);
  for (const auto& [pid, since] : event_candidates) {
    if (has_ended(pid)) missed_child(pid);
  }
  event_candidates.clear();
  const size_t n = children_missed.size();
  if (n == 0) return;
  std::string pids;
  for (size_t i = 0; i < std::min<size_t>(n, 10); ++i) {
    pids += (i == 0 ? "" : ", ") + std::to_string(children_missed[i]);
  }
  if (n > 10) pids += ", ...";
  note(
      fmt::format("{} child process{} of the targets ({}) ended before gilspy could attach to {} (a child is "
                  "tried {} ms after its fork, at the next drain: a shorter life is not recorded)",
                  n, n == 1 ? "" : "es", pids, n == 1 ? "it" : "them", kForkSettleNs / 1'000'000));
}

std::vector<RunningTarget*> Session::Impl::discover_while_running() {
  const int64_t now = gilspy::monotonic_ns();
  bool lost = false;
  take_process_events(&lost);
  std::vector<RunningTarget*> found = try_event_candidates(now);
  if (++drains % kScanEveryDrains == 0 || lost) {
    for (RunningTarget* t : discover(false)) found.push_back(t);
  }
  return found;
}

// The targets' descendants as the kernel reports them: a fork by a target or by one of their descendants
// adds the child; an exec makes a descendant worth trying again (it may be Python now); an exit ends it.
void Session::Impl::take_process_events(bool* lost) {
  if (!proc_events.is_open()) return;
  std::set<pid_t> recorded;
  for (const auto& t : targets) recorded.insert(t->info.pid);
  *lost = !proc_events.read([&](const ProcEvent& e) {
    switch (e.kind) {
      case ProcEvent::Kind::kFork:
        if (recorded.contains(e.parent) || family.contains(e.parent)) {
          family.insert(e.pid);
          event_candidates.emplace(e.pid, e.ts_ns);  // settles from the fork on
        }
        break;
      case ProcEvent::Kind::kExec:
        if (family.contains(e.pid)) event_candidates[e.pid] = e.ts_ns - kForkSettleNs;  // its image is final
        break;
      case ProcEvent::Kind::kExit:
        family.erase(e.pid);
        if (event_candidates.erase(e.pid) > 0) missed_child(e.pid);
        break;
    }
  });
}

// Each candidate once it has settled: a Python process is tried (attached, refused, or left for the next
// drain while its interpreter starts); anything else waits for an exec.
std::vector<RunningTarget*> Session::Impl::try_event_candidates(int64_t now) {
  std::vector<RunningTarget*> found;
  for (auto it = event_candidates.begin(); it != event_candidates.end() && !discovery_full;) {
    const pid_t pid = it->first;
    if (now - it->second < kForkSettleNs) {
      ++it;
      continue;
    }
    const auto key = process_key(pid);
    if (!key || has_ended(pid)) {  // it ended before it could be tried
      missed_child(pid);           // (unless a scan recorded it first)
      it = event_candidates.erase(it);
      continue;
    }
    if (settled.contains(*key)) {  // a scan tried it first: recorded, refused with a reason, or gone by then
      missed_child(pid);
      it = event_candidates.erase(it);
      continue;
    }
    // Not Python (yet: an exec brings it back), or no accelerator open (yet: the /proc scans look again). A
    // process that is exiting has no executable to show any more: left for its exit event.
    const bool python = is_python_process(pid);
    if (!python && !has_executable(pid)) {
      ++it;
      continue;
    }
    if (!python || (options.accelerator_only && !holds_accelerator(pid))) {
      it = event_candidates.erase(it);
      continue;
    }
    if (targets.size() >= options.loop.max_targets) break;  // discover() says so at its next scan
    RunningTarget* t = try_found(pid, *key, false);
    if (settled.contains(*key)) {
      if (t == nullptr) missed_child(pid);  // unless refused with a reason: it ended while being attached to
      it = event_candidates.erase(it);
    } else {
      ++it;
    }
    if (t == nullptr) continue;
    found.push_back(t);
    note_found(*t, now);
  }
  return found;
}

}  // namespace gilspy::cli
