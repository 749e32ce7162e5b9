#pragma once
// Everything one poll does for one target process: one batched read of the GIL struct and of one identity
// word per known thread, thread-list upkeep, naming the waiters, and turning what changed into hold / wait
// intervals. Fixed-size tables are allocated at construction; poll() itself never allocates.
#include <sys/types.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raw/records.hpp"
#include "sampler/counters/thread_counters.hpp"
#include "sampler/exact/exact_tracer.hpp"
#include "sampler/gc/gc_tracker.hpp"
#include "sampler/proc/task_cpu.hpp"
#include "sampler/proc/task_syscall.hpp"
#include "sampler/queue/record_queue.hpp"
#include "sampler/schedule/poll_schedule.hpp"
#include "sampler/stacks/stack_options.hpp"
#include "sampler/stacks/stack_sampler.hpp"
#include "sampler/target/interpreter.hpp"
#include "sampler/target/threads.hpp"

namespace gilspy::sampler {

// Where a thread's task state comes from: /proc in real life, a script in tests.
class TaskStateSource {
 public:
  virtual ~TaskStateSource() = default;
  virtual void thread_added(size_t slot, int32_t tid) = 0;
  virtual void thread_removed(size_t slot) = 0;
  virtual TaskState read(size_t slot) = 0;
  virtual int cpu(size_t /*slot*/) { return -1; }  // the CPU the thread last ran on; -1 unknown
};

class ProcTaskStateSource final : public TaskStateSource {
 public:
  ProcTaskStateSource(pid_t pid, uint64_t gil_addr, const layouts::GilLayout& gil);
  void thread_added(size_t slot, int32_t tid) override;
  void thread_removed(size_t slot) override;
  TaskState read(size_t slot) override;
  int cpu(size_t slot) override { return stats_[slot].cpu(); }

 private:
  pid_t pid_;
  uint64_t gil_addr_;
  layouts::GilLayout gil_;
  std::vector<TaskSyscallFile> files_;  // opened on first read
  std::vector<TaskStatFile> stats_;
};

using raw::GilRole;

// Counters another thread may read while the sampler runs (status line).
// Why a target's recording ended before the session did.
enum class TargetEnd : uint8_t {
  kRunning,          // it did not: the session ended first
  kExited,           // the process is gone
  kExeced,           // the process exec()'d another program image: the interpreter we read is gone
  kInterpreterGone,  // the GIL stayed unreadable for a second while the same program lives on (finalized)
};
const char* to_string(TargetEnd e);  // "target exited", "target exec'd another program", ...

struct SamplerCounters {
  std::atomic<uint64_t> polls{0};
  std::atomic<uint64_t> handoffs_seen{0};
  std::atomic<uint64_t> handoffs_total{0};
  std::atomic<uint64_t> task_reads{0};
  std::atomic<uint64_t> unknown_holder_polls{0};
  // switch_number went backwards, or moved faster than one take per kMinTakeNs: not a count of hand-offs (the
  // target's memory is corrupt, or something writes into it), so the move is not counted.
  std::atomic<uint64_t> impossible_switch_moves{0};
  // The longest period of the periodic walk (it grows with the threads): a thread that never touches the GIL
  // is seen to start and end up to this late.
  std::atomic<int64_t> walk_period_ns{0};
};

struct SamplerOptions {
  int64_t walk_period_ns = 20'000'000;  // re-walk the thread list this often (a period per
                                        // kThreadsPerWalkPeriod threads)
  bool read_gc = true;                  // read the GC state at each poll (gc_tracker.hpp); --no-gc: not
  // ...at most this often (GcTracker::wants_read): every poll up to ~5 kHz (whose steps vary by a fifth),
  // every second one of the adaptive schedule's 10 kHz bursts (bench/README.md, "Reading the GC state")
  int64_t gc_read_period_ns = 150'000;
  StackOptions stacks{};  // Python stacks and thread names (stack_sampler.hpp)
};

class ProcessSampler {
 public:
  // No take of the GIL is faster than this (it locks a mutex and writes the struct): a larger move of
  // switch_number between two polls is the target's memory lying and is not counted, so no running sum
  // gilspy writes can overflow (a forged jump of 2^62 a second did: an unreadable file) and a forged burst
  // does not read as hand-offs too short to see (SamplerCounters::impossible_switch_moves).
  static constexpr int64_t kMinTakeNs = 50;
  // The periodic walk reads every thread state: one period (SamplerOptions::walk_period_ns) per this many
  // threads, so that its cost does not grow with them (a new holder is still found at once).
  static constexpr size_t kThreadsPerWalkPeriod = 100;

  // Records go to `queue` tagged with `target`, the id the session gave this process.
  ProcessSampler(const Interpreter& interp, MemoryReader& reader, TaskStateSource& tasks, RecordQueue& queue,
                 raw::TargetId target, SamplerOptions options = {});

  // One poll at time `t_now` (CLOCK_MONOTONIC ns). Returns false once the process is gone; by then every open
  // interval has been closed. Throws Error(kPermission) (the only error that is not a normal end).
  // `t_from`: where this poll's sample begins to stand for the target (the poll loop's window start,
  // poll_loop.hpp): what changed since the last poll is dated there, clamped between the two polls; -1: at
  // the midpoint between them.
  bool poll(int64_t t_now, int64_t t_from = -1);
  // Closes every open interval at `t_end` (end of the recording).
  void finish(int64_t t_end);
  // A stats tick: this target's counters (with the poll loop's late and missed ticks), then where each live
  // thread stands (ThreadState), so a live view can count the open part of a long hold.
  void emit_stats(int64_t t_now, uint64_t late, uint64_t missed);

  raw::TargetId target() const { return target_; }
  const SamplerCounters& counters() const { return counters_; }
  // What the last poll says about when the GIL's state may change next (for the adaptive schedule).
  const PollActivity& activity() const { return activity_; }
  size_t thread_count() const;
  // The CPU the GIL's holder last ran on (a /proc read); -1 when nobody holds it, it is unknown, or the
  // holder was found less than kPlacementMinAgeNs before `now`: a thread-per-request server's holders mostly
  // end within a millisecond or two, before moving away from them could help, and reading their CPU costs an
  // open of a /proc file that is often gone already.
  int holder_cpu(int64_t now);
  static constexpr int64_t kPlacementMinAgeNs = 20'000'000;
  bool truncated_threads() const { return truncated_; }
  // Why it ended (after the poll thread is done with it).
  TargetEnd end_cause() const { return end_cause_; }
  // The garbage collector's side (why it is not recorded, if it is not).
  const GcTracker& gc() const { return gc_; }

  // Python stacks and thread names (stack_sampler.hpp), read between polls on the poll thread: whether there
  // is something to read now, and reading it until `deadline` (CLOCK_MONOTONIC ns). `spare`: the loop's
  // budget has room beyond what holders and waiters need (--all-threads' other threads are read only then).
  bool wants_stack_work(int64_t now, bool spare) const {
    return stacks_ != nullptr && !gone_ && stacks_->has_work(now, spare);
  }
  void stack_work(int64_t deadline, bool spare);
  // Where the session finds the text of the stack records (nullptr when stacks are off or unknown here).
  const StackTables* stack_tables() const { return stacks_ ? &stacks_->tables() : nullptr; }
  // Scheduler figures and counters per thread and GIL role (thread_counters.hpp), told of every thread and
  // role change and read after each poll. Set before the first poll; null: none.
  void set_counters(ThreadCounters* counters) { thread_counters_ = counters; }
  // --exact: the holds and waits come from `tracer`'s probes instead of the polls (which go on for the
  // threads, stacks and the GC). `shadow` (gilspy check): the polls' holds and waits are written as usual,
  // the probes' only added up per thread (exact_totals()). Set before the first poll.
  void set_exact(std::unique_ptr<exact::ExactTracer> tracer, bool shadow = false);
  const exact::ExactTracer* exact() const { return exact_.get(); }
  bool exact_shadow() const { return exact_ != nullptr && shadow_; }
  struct ExactTotal {
    int32_t tid = 0;
    int64_t hold_ns = 0, wait_ns = 0;
  };
  // Shadow mode: per thread, the probes' hold and wait time (read after the poll thread is done).
  const std::vector<ExactTotal>& exact_totals() const { return exact_sink_.totals(); }

 private:
  // The exact tracer's intervals, as raw records on the queue.
  class ExactSink : public exact::IntervalSink {
   public:
    explicit ExactSink(ProcessSampler& s) : s_(s) {}
    void hold(int32_t tid, int64_t ts, int64_t dur) override;
    void wait(int32_t tid, int64_t ts, int64_t dur) override;
    void add_up() {  // instead of writing records
      totals_.reserve(ThreadWalker::kMaxThreads);
      add_up_ = true;
    }
    const std::vector<ExactTotal>& totals() const { return totals_; }

   private:
    ExactTotal& total(int32_t tid);
    int64_t from_first_poll(int64_t ts, int64_t dur) const;
    ProcessSampler& s_;
    std::vector<ExactTotal> totals_;  // shadow mode only: capacity reserved (more threads: not added)
    ExactTotal overflow_;
    bool add_up_ = false;
  };
  struct Track {
    bool active = false;
    ThreadRef ref;
    uint64_t identity = 0;  // expected value of the identity word
    GilRole role = GilRole::kReleased;
    int64_t since_ns = 0;
    int64_t found_ns = 0;          // when a walk first found it
    int64_t asked_ns = INT64_MIN;  // when the kernel was last asked where it is
    bool changed = false;          // its role changed at this poll
    double var_ns2 = 0;            // the variance of its time in each state so far (note_uncertainty())
  };

  bool poll_once(int64_t t_now, int64_t t_from);  // poll() but for a target that exits under it
  // poll_once's steps, in order (process_sampler.cpp says what each decides)
  struct PollRead {
    enum Outcome { kRead, kTryAgain, kEnded } outcome = kRead;
    size_t nregions = 0, core = 0, got = 0;  // regions asked, of them the GIL's and the watch's, read
    bool gc_now = false, in_span = false, watching = false;
  };
  PollRead read_state(int64_t t_now);
  bool unreadable(int64_t t_now);
  void start_with(const GilSample& g, int64_t t_now);
  bool upkeep_threads(const GilSample& g, const PollRead& r, int64_t t_now, int64_t t_mid, bool* dirty,
                      int* last);
  uint64_t count_handoffs(const GilSample& g, int64_t t_now, uint64_t* seen);
  void assign_roles(int holder, const GilSample& g, uint64_t delta, int64_t t_now, int64_t t_mid);
  void observe_gc(int holder, bool gc_now, bool read_whole, int64_t t_now);
  // The tracks kept in step with the thread list (thread_tracks.cpp): a re-walk (changed: the list is known
  // to differ from the last), whether a followed thread is in it (its entry marked matched), a track ended
  // and one started.
  void rewalk(int64_t t_mid, bool changed = false);
  bool match_in_walk(const Track& t, size_t n);
  void end_track(size_t i, int64_t at);
  void start_track(const ThreadRef& ref, int64_t t_mid);
  // Notes whether the whole process is stopped (SIGSTOP, a debugger). Returns false when the process we
  // attached to has ended, whoever has its pid now.
  bool check_process(int64_t t_mid);
  bool names_active_thread(const ThreadRef& ref) const;  // same tid or identity as a followed thread
  int find_track(uint64_t tstate) const;
  void set_role(Track& t, GilRole role, int64_t at);
  template <class Kind>
  void emit(Kind&& record) {                           // one alternative of raw::Record
    queue_.push(target_, std::forward<Kind>(record));  // a full queue is counted by the queue itself
  }
  void note_activity(const GilSample& g, uint64_t delta, bool dirty, int64_t t_now, int64_t t_mid);
  // After a poll `gap` ns after the last: how far each thread's time in each state may be off for it.
  void note_uncertainty(const GilSample& g, bool unseen_handoffs, int64_t gap);
  raw::ThreadEnd thread_end(const Track& t, int64_t at) const;
  // Step 4 of a poll: every thread but `holder` waiting or released at this poll, from the GIL's switch count
  // (`delta` takes since the last poll), its cond's count and, where those do not decide, the kernel.
  void classify(int holder, const GilSample& g, uint64_t delta, int64_t t_now, int64_t t_mid);
  // classify()'s steps: the threads to ask the kernel about (into asked_; the rest of the waiters are kept,
  // kept_waiters_), asking it (asked_[from, to); asleep_ and running_waiters_ count the answers), and which
  // "running" ones still wait.
  size_t pick_asked(int holder, const GilSample& g, uint64_t free_takes);
  void ask_kernel(size_t from, size_t to, const GilSample& g, int64_t t_now);
  void keep_running_waiters(const GilSample& g, uint64_t free_takes, size_t asked);

  Interpreter interp_;
  MemoryReader& reader_;
  TaskStateSource& tasks_;
  RecordQueue& queue_;
  raw::TargetId target_;
  SamplerOptions options_;
  ThreadWalker walker_;
  SamplerCounters counters_;

  std::vector<Track> tracks_;                              // kMaxThreads slots
  std::vector<uint16_t> active_;                           // indices of the active slots, in discovery order
  std::vector<ThreadRef> walk_buffer_;                     // kMaxThreads
  std::vector<std::pair<uint64_t, uint16_t>> walk_order_;  // (tstate, index in walk_buffer_), sorted
  std::vector<uint8_t> walk_matched_;                      // walk_buffer_[j] is a known thread's
  std::vector<std::pair<uint16_t, TaskState>> asked_;      // kMaxThreads: one poll's kernel answers
  uint32_t kept_waiters_ = 0, asleep_ = 0, running_waiters_ = 0;  // classify()'s tallies, this poll
  std::array<ReadRegion, 4> regions_;  // the GIL, the last holder's identity word, the GC state (1-2)
  static constexpr int64_t kUnreadableLimitNs = 1'000'000'000;
  int64_t unreadable_since_ns_ = -1;  // first poll of a run of polls that could not read the GIL
  int holder_ = -1;                   // the holder's track at the last poll
  int watched_ = -1;                  // the track whose identity word each poll reads (the last holder)
  uint64_t watched_word_ = 0;
  std::vector<uint8_t> gil_bytes_;
  bool truncated_ = false;
  bool walk_incomplete_ = false;
  bool walked_ = false;  // the first walk is done: threads found from now on began during the recording

  PollActivity activity_;
  int64_t last_handoff_ns_ = 0;    // the last poll that saw the GIL change hands
  int64_t waiters_since_ns_ = -1;  // when the GIL's cond last went from no waiters to some
  int64_t due_delay_ns_ = 0;       // how long after a wait's timeout forced switches are seen, on average
  static constexpr int64_t kDueLearnLimitNs = 3'000'000;
  bool holding_changed_ = false;  // a thread started or stopped holding during this poll

  bool started_ = false;
  bool gone_ = false;
  TargetEnd end_cause_ = TargetEnd::kRunning;
  TaskStatFile process_stat_;      // the thread-group leader's stat: T/t while the whole process is stopped
  int64_t stopped_since_ns_ = -1;  // a stop seen at a re-walk, not yet ended
  std::optional<std::string> image_id_;  // base/proc_files.hpp process_image_id() when attached
  GilSample prev_;
  int64_t t_prev_ = 0;
  int64_t last_walk_ns_ = 0;
  GcTracker gc_;
  // Where the GC state lies in the same struct as the GIL (3.8: _PyRuntime; 3.12+: the interpreter), one
  // region covers both: no extra region (and page pin) per poll. span_bytes_ empty: separate regions.
  static constexpr size_t kMaxSpan = 8192;
  uint64_t span_addr_ = 0;
  std::vector<uint8_t> span_bytes_;
  size_t gil_in_span_ = 0;
  std::unique_ptr<StackSampler> stacks_;  // null with --no-stacks or without a stack layout
  ThreadCounters* thread_counters_ = nullptr;
  std::unique_ptr<exact::ExactTracer> exact_;  // --exact only
  bool shadow_ = false;
  int64_t first_poll_ns_ = 0;
  ExactSink exact_sink_{*this};
};

}  // namespace gilspy::sampler
