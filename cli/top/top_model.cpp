#include "cli/top/top_model.hpp"

#include <algorithm>

namespace gilspy::top {

void TopModel::Process::note(int64_t ts_ns) {
  if (first_ns < 0 || ts_ns < first_ns) first_ns = ts_ns;
}

TopModel::Thread& TopModel::Process::thread(int64_t tid) {
  auto [it, inserted] = threads.try_emplace(tid);
  if (inserted) {
    it->second.tid = tid;
    order.push_back(tid);
  }
  return it->second;
}

TopModel::TopModel(int64_t start_ns) : window_start_ns_(start_ns), totals_start_ns_(start_ns) {}

TopModel::Process& TopModel::process(uint32_t id) {
  for (Process& p : processes_) {
    if (p.info.id == id) return p;
  }
  if (std::find(dropped_ids_.begin(), dropped_ids_.end(), id) != dropped_ids_.end()) {
    // A late record of a process no longer shown (its last stats tick, a thread's end): it goes nowhere,
    // rather than bringing the process back as a nameless one.
    discarded_ = Process{};
    discarded_.info.id = id;
    return discarded_;
  }
  Process& p = processes_.emplace_back();
  p.info.id = id;
  return p;
}

void TopModel::add_process(ProcessInfo info) {
  Process& p = process(info.id);
  if (info.start_ns >= 0) {
    p.note(info.start_ns);
    p.polls.start(info.start_ns);
  }
  p.info = std::move(info);
}

void TopModel::thread_started(uint32_t id, int64_t tid, std::string name, int64_t ts_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  Thread& t = p.thread(tid);
  if (t.account.is_ended()) {  // the OS reused the id: a new thread, whose figures start afresh
    t.account = ThreadAccount{};
    t.shown_after_end = 0;
    t.cpu = CpuAccount{};
  }
  t.name = std::move(name);
  t.account.seen(ts_ns);
}

void TopModel::thread_named(uint32_t id, int64_t tid, std::string name) {
  process(id).thread(tid).name = std::move(name);
}

void TopModel::thread_function(uint32_t id, int64_t tid, std::string function) {
  if (!function.empty()) process(id).thread(tid).function = std::move(function);
}

void TopModel::thread_ended(uint32_t id, int64_t tid, int64_t ts_ns, int64_t state_se_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  p.thread(tid).account.ended(ts_ns, state_se_ns);
}

void TopModel::completed(uint32_t id, int64_t tid, Role role, int64_t start_ns, int64_t dur_ns) {
  Process& p = process(id);
  p.note(start_ns);
  const Credited c = p.thread(tid).account.completed(role, start_ns, dur_ns, bounds());
  p.busy_window_ns += c.window_ns;
  p.busy_total_ns += c.total_ns;
}

void TopModel::hold(uint32_t id, int64_t tid, int64_t start_ns, int64_t dur_ns) {
  completed(id, tid, Role::kHolding, start_ns, dur_ns);
}

void TopModel::wait(uint32_t id, int64_t tid, int64_t start_ns, int64_t dur_ns) {
  completed(id, tid, Role::kWaiting, start_ns, dur_ns);
}

void TopModel::open_state(uint32_t id, int64_t tid, Role role, int64_t since_ns, int64_t at_ns,
                          double state_var_ns2) {
  Process& p = process(id);
  p.note(since_ns);
  p.thread(tid).account.open(role, since_ns, at_ns, state_var_ns2);
}

void TopModel::waiters(uint32_t id, int64_t ts_ns, int n) {
  Process& p = process(id);
  p.note(ts_ns);
  p.waiters.set(ts_ns, n, bounds());
}

void TopModel::stats(uint32_t id, int64_t ts_ns, const PollCounters& counters, std::vector<Figure> extra) {
  Process& p = process(id);
  p.note(ts_ns);
  p.polls.tick(ts_ns, counters);
  if (!extra.empty()) p.extra = std::move(extra);
}

void TopModel::gc_collection(uint32_t id, int32_t generation, int64_t ts_ns, int64_t dur_ns,
                             int64_t wait_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  p.gc.collection(generation, dur_ns, wait_ns);
}

void TopModel::gc_untimed(uint32_t id, int32_t generation, uint64_t n, int64_t ts_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  p.gc.untimed(generation, n);
}

void TopModel::gc_settings(uint32_t id, bool enabled, int64_t ts_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  p.gc.settings(enabled);
}

void TopModel::process_ended(uint32_t id, int64_t ts_ns) {
  Process& p = process(id);
  p.note(ts_ns);
  if (p.ended_ns < 0) p.ended_ns = ts_ns;
  for (auto& [tid, t] : p.threads) {
    if (!t.account.is_ended()) t.account.ended(ts_ns);
  }
}

void TopModel::cpu(uint32_t id, int64_t tid, Role role, int64_t start_ns, int64_t dur_ns,
                   const CpuPiece& piece) {
  Process& p = process(id);
  const auto it = p.threads.find(tid);
  if (it == p.threads.end()) return;  // a thread the model no longer (or never) showed
  it->second.cpu.add(role, start_ns, dur_ns, piece, bounds());
}

ProcessFigures TopModel::process_figures(const Process& p, int64_t period_start_ns, int64_t now_ns,
                                         int64_t busy_ns) const {
  ProcessFigures f;
  const int64_t start = p.first_ns < 0 ? now_ns : std::max(period_start_ns, p.first_ns);
  const int64_t end = p.ended_ns >= 0 ? std::min(now_ns, p.ended_ns) : now_ns;
  f.duration_ns = std::max<int64_t>(0, end - start);
  if (f.duration_ns > 0) {
    f.gil_busy_share = std::min(1.0, static_cast<double>(busy_ns) / static_cast<double>(f.duration_ns));
  }
  return f;
}

ProcessRow TopModel::close_process(Process& p, int64_t now_ns) {
  const Bounds b = bounds();
  ProcessRow row;
  row.id = p.info.id;
  row.pid = p.info.pid;
  row.command = p.info.command;
  row.python_version = p.info.python_version;
  row.rank = p.info.rank;
  row.exact = p.info.exact;
  row.ended = p.ended_ns >= 0;
  row.extra = p.extra;

  for (const int64_t tid : p.order) {
    Thread& t = p.threads.at(tid);
    ThreadRow tr;
    tr.tid = tid;
    tr.name = t.name;
    tr.function = t.function;
    tr.ended = t.account.is_ended();
    const Credited c = t.account.close_window(now_ns, b, tr.interval, tr.total);
    t.cpu.close_window(tr.cpu_interval, tr.cpu_total);
    p.busy_window_ns += c.window_ns;
    p.busy_total_ns += c.total_ns;
    if (tr.ended) ++t.shown_after_end;
    row.threads.push_back(std::move(tr));
  }
  // Dropped after the snapshot that shows them for the last time.
  std::erase_if(p.order, [&](int64_t tid) {
    if (p.threads.at(tid).shown_after_end < kEndedSnapshotsShown) return false;
    p.threads.erase(tid);
    return true;
  });

  row.interval = process_figures(p, b.window_start_ns, now_ns, p.busy_window_ns);
  row.total = process_figures(p, b.totals_start_ns, now_ns, p.busy_total_ns);
  const int64_t until = row.ended ? std::min(now_ns, p.ended_ns) : now_ns;
  p.waiters.close_window(until, b, row.interval, row.total);
  p.polls.close_window(now_ns, row.ended, row.interval, row.total, row.warning);
  p.gc.close_window(row);
  p.busy_window_ns = 0;
  if (row.ended) ++p.shown_after_end;
  return row;
}

TopSnapshot TopModel::snapshot(int64_t now_ns) {
  now_ns = std::max(now_ns, window_start_ns_);  // a clock step back must not make negative windows
  TopSnapshot s;
  s.now_ns = now_ns;
  s.interval_start_ns = window_start_ns_;
  s.totals_start_ns = totals_start_ns_;
  for (Process& p : processes_) s.processes.push_back(close_process(p, now_ns));
  s.functions = functions_.close_window();
  std::erase_if(processes_, [this](const Process& p) {
    if (p.shown_after_end < kEndedSnapshotsShown) return false;
    dropped_ids_.push_back(p.info.id);
    return true;
  });
  window_start_ns_ = now_ns;
  return s;
}

void TopModel::reset(int64_t now_ns) {
  now_ns = std::max(now_ns, window_start_ns_);
  window_start_ns_ = totals_start_ns_ = now_ns;
  functions_.reset();
  for (Process& p : processes_) {
    p.busy_window_ns = p.busy_total_ns = 0;
    p.waiters.reset_totals();
    p.polls.reset_totals();
    p.gc.reset_totals();
    for (auto& [tid, t] : p.threads) {
      t.account.reset_totals();
      t.cpu.reset_totals();
    }
  }
}

TopSnapshot keep_last_interval(const TopSnapshot& shown, TopSnapshot final) {
  const bool polled = std::any_of(final.processes.begin(), final.processes.end(),
                                  [](const ProcessRow& p) { return p.interval.poll_rate_hz.has_value(); });
  if (polled || shown.processes.empty()) return final;
  final.interval_start_ns = shown.interval_start_ns;
  final.now_ns = std::max(shown.now_ns, final.interval_start_ns);
  for (FunctionRow& f : final.functions) {
    const auto was = std::find_if(shown.functions.begin(), shown.functions.end(),
                                  [&](const FunctionRow& g) { return g.function == f.function; });
    f.interval = was == shown.functions.end() ? FunctionFigures{} : was->interval;
  }
  for (ProcessRow& p : final.processes) {
    const auto before = std::find_if(shown.processes.begin(), shown.processes.end(),
                                     [&](const ProcessRow& q) { return q.id == p.id; });
    if (before == shown.processes.end()) continue;
    p.interval = before->interval;
    for (ThreadRow& t : p.threads) {
      const auto was = std::find_if(before->threads.begin(), before->threads.end(),
                                    [&](const ThreadRow& u) { return u.tid == t.tid; });
      if (was == before->threads.end()) continue;
      t.interval = was->interval;
      t.cpu_interval = was->cpu_interval;
    }
  }
  return final;
}

}  // namespace gilspy::top
