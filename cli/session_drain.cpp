// Records from the poll thread's queue to every sink, on the session's timeline, threads named.
#include <variant>

#include "base/proc_files.hpp"
#include "cli/session_impl.hpp"

namespace gilspy::cli {

namespace {

// "MainThread" for the main thread, "thread <tid>" (+ " (<comm>)" when the OS name says more) otherwise.
std::string thread_display_name(int pid, int64_t tid, const std::string& comm,
                                const std::string& process_comm) {
  if (tid == pid) return "MainThread";
  std::string name = "thread " + std::to_string(tid);
  if (!comm.empty() && comm != process_comm) name += " (" + comm + ")";
  return name;
}

}  // namespace

void Session::Impl::drain() {
  // Taken in chunks, so that a thread whose end comes later in the same chunk is known to be gone: its
  // /proc comm is not there to read (a thread-per-request server's threads live a few ms, a drain comes every
  // 50 ms: 99 % of those opens failed), or it names a later thread that reuses the TID.
  constexpr size_t kChunk = 4096;
  auto key = [](raw::TargetId target, int64_t tid) {
    return static_cast<uint64_t>(target) << 32 ^ static_cast<uint32_t>(tid);
  };
  while (true) {
    drain_batch.clear();
    raw::TargetRecord tr;
    while (drain_batch.size() < kChunk && queue.pop(&tr)) drain_batch.push_back(std::move(tr));
    queue.prefault_ahead();  // the poll loop's next slots mapped here, not faulted in there
    drain_last_end.clear();
    for (size_t i = 0; i < drain_batch.size(); ++i) {
      if (const auto* end = std::get_if<raw::ThreadEnd>(&drain_batch[i].record)) {
        drain_last_end[key(drain_batch[i].target, end->tid)] = i;
      }
    }
    auto ends_later = [&](size_t i, int64_t tid) {
      const auto it = drain_last_end.find(key(drain_batch[i].target, tid));
      return it != drain_last_end.end() && it->second > i;
    };
    for (size_t i = 0; i < drain_batch.size(); ++i) {
      raw::TargetRecord& r = drain_batch[i];
      RunningTarget& t = *by_id.at(r.target);
      shift_time(r.record, -t.info.monotonic_ns);
      // The stack records' text (names, frames) is in the sampler's tables, published with the record.
      if (const auto* tables = t.sampler->stack_tables()) tables->fill(r.record);
      if (auto* named = std::get_if<raw::ThreadName>(&r.record);
          named != nullptr && !ends_later(i, named->tid)) {
        // A name the thread gave itself with prctl, which its Python name does not already say, is kept
        // beside it (3.14+ sets the OS name from the Python one, cut to 15 bytes: nothing new then).
        const std::string comm = thread_comm(t.info.pid, named->tid);
        if (!comm.empty() && comm != t.info.process_comm && named->name.rfind(comm, 0) != 0)
          named->os_name = comm;
      }
      if (auto* start = std::get_if<raw::ThreadStart>(&r.record)) {
        const std::string comm =
            ends_later(i, start->tid) ? std::string() : thread_comm(t.info.pid, start->tid);
        start->name = thread_display_name(t.info.pid, start->tid, comm, t.info.process_comm);
      }
      for (Sink* s : sinks) s->record(t.info, r.record);
    }
    if (drain_batch.size() < kChunk) return;
  }
}

}  // namespace gilspy::cli
