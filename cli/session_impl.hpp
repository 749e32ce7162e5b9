#pragma once
// What a Session keeps (session.hpp's Impl), shared by the files that do its parts: session.cpp (its life:
// attach, then run the poll thread and the Asio loop), session_attach.cpp (the targets named or launched, and
// what each gets), session_discovery.cpp (processes found by /proc scans), session_drain.cpp (records to the
// sinks), session_end.cpp (the figures and the outcome at the end). Only these include it.
#include <sys/types.h>

#include <utility>  // before asio: boost 1.74 asio uses std::exchange without including it

#include <atomic>
#include <boost/asio.hpp>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/proc_events.hpp"
#include "cli/counter_setup.hpp"
#include "cli/session.hpp"
#include "sampler/exact/probe_cost.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/loop/poll_loop.hpp"
#include "sampler/queue/record_queue.hpp"
#include "sampler/remote/memory_reader.hpp"
#include "sampler/target/interpreter.hpp"

namespace gilspy::cli {

// What the session keeps per target: what the sinks see, and what polls it.
struct RunningTarget {
  SessionTarget info;
  std::unique_ptr<sampler::RemoteMemoryReader> reader;
  sampler::Interpreter interp;
  std::unique_ptr<sampler::ProcTaskStateSource> tasks;
  std::unique_ptr<sampler::ProcessSampler> sampler;
  TargetCounters counters;  // scheduler figures and perf counters per thread (counter_setup.hpp)
};

struct Session::Impl {
  SessionOptions options;
  // Every catchable signal whose default action ends the process is taken over before anything is written,
  // so none can leave a half-written file (closing the terminal or the ssh session sends SIGHUP; `timeout`
  // sends SIGTERM, job schedulers USR1/USR2 or ALRM); they are acted on once run() runs. SIGPIPE is ignored
  // in main(): a closed stdout only ends the printing.
  boost::asio::io_context io;
  boost::asio::signal_set signals{io};
  pid_t child = 0;
  std::optional<int> child_status;
  std::vector<std::unique_ptr<RunningTarget>> targets;
  std::unordered_map<raw::TargetId, RunningTarget*> by_id;
  raw::TargetId next_id = 0;
  std::vector<Sink*> sinks;
  sampler::RecordQueue queue{1 << 18};
  // drain()'s chunk and the index of each thread's last end in it (kept: their capacity is reused).
  std::vector<raw::TargetRecord> drain_batch;
  std::unordered_map<uint64_t, size_t> drain_last_end;
  std::atomic<bool> stop{false};  // read by the poll loop at every tick
  int stop_signal = 0;            // the terminating signal that stopped run(), else 0
  int drains = 0;                 // run()'s drains so far: found processes are looked for every few

  // The session's clock anchors and host, shared by every target, also those found later.
  int64_t anchor_mono = 0, anchor_real = 0;
  std::string hostname;
  // Found processes by process_key(): tried and settled (recorded or refused), never tried again; and those
  // whose interpreter was not ready yet, with when that was first seen.
  std::set<std::string> settled;
  std::map<std::string, int64_t> not_ready_since;
  bool discovery_full = false;  // the poll loop's target table is full: nothing more is added
  // --subprocesses: the kernel's process events where gilspy may read them (proc_events.hpp): the targets'
  // descendants as they fork (Python or not: a shell's children count too), and those to try, with when they
  // were seen (a fork is tried a moment later: one about to exec another image is not attached to first).
  ProcEvents proc_events;
  std::set<pid_t> family;
  std::map<pid_t, int64_t> event_candidates;
  std::vector<pid_t> children_missed;  // candidates that ended before they could be recorded
  std::vector<SkippedTarget> skipped;
  // --exact: what a probe hit costs on this machine, measured once, with the first target's probes.
  std::optional<sampler::exact::ProbeCost> probe_cost;
  // Declared after `targets`, so that its thread is stopped before the targets' perf groups are destroyed.
  SessionCounters counters;

  bool launch_mode() const { return !options.command.empty(); }
  void note(const std::string& line) const {
    if (options.note) {
      options.note(line);
    } else {
      std::fprintf(stderr, "gilspy: %s\n", line.c_str());
    }
  }
  bool discovering() const {
    return options.discover == Discover::kDescendants ||
           (options.discover == Discover::kAllPython && options.follow);
  }
  RunningTarget& add_target(pid_t pid);

  // session.cpp
  void anchor_clocks();
  void start_in_sinks(const RunningTarget& t);  // every sink's start() and the counter setup record
  void wait_for_stop_signal();
  // Every 50 ms until polling has ended: a drain, processes found meanwhile, the sinks' stats.
  void drain_after_period(boost::asio::steady_timer& timer, sampler::PollLoop& loop,
                          const std::atomic<bool>& loop_done);
  // session_attach.cpp
  void attach();  // the program launched, or the pids named
  void launch_and_attach();
  void attach_pids();
  void prepare_target(RunningTarget& t);
  void attach_exact(RunningTarget& t);
  // session_discovery.cpp
  void discover_at_start();
  std::vector<RunningTarget*> discover(bool first_scan);
  // The processes found since the last drain: from the kernel's events at every drain, and by a /proc scan
  // every few (or at once when the kernel dropped events).
  std::vector<RunningTarget*> discover_while_running();
  void take_process_events(bool* lost);
  void note_found(const RunningTarget& t, int64_t now) const;  // "recording pid N too ..."
  void note_children_missed();  // at the end: children that ended before they could be recorded
  void missed_child(pid_t pid);
  std::vector<RunningTarget*> try_event_candidates(int64_t now);
  RunningTarget* try_found(pid_t pid, const std::string& key, bool first_scan);
  // session_drain.cpp
  void drain();
  // session_end.cpp
  SessionEnd session_end(const sampler::LoopCounters& lc, const std::string& stop_reason) const;
  raw::LoopFigures loop_figures(const sampler::LoopCounters& lc, const RunningTarget& t,
                                const std::string& stop_reason) const;
  void finish_sinks(const SessionEnd& end, std::exception_ptr& first_error);
  SessionOutcome outcome(sampler::StopReason reason, const SessionEnd& end);
};

}  // namespace gilspy::cli
