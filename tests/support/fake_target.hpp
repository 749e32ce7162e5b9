#pragma once
// A made-up 3.11 interpreter in fake memory, for the tests that drive the sampler through it
// (test_process_sampler, test_gc): its thread list and GIL are edited between polls, and the kernel's task
// states are scripted.
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cpython_layouts/layout.hpp"
#include "elfutils/python_binary.hpp"
#include "raw/records.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/queue/record_queue.hpp"
#include "support/fake_memory_reader.hpp"

namespace gilspy::sampler::fake {

constexpr uint64_t kRuntime = 0x10000, kInterp = 0x20000, kGil = 0x30000, kTstates = 0x40000;

class ScriptedTasks final : public TaskStateSource {
 public:
  std::map<int32_t, TaskState> state;  // by tid
  std::map<size_t, int32_t> slots;
  int reads = 0;
  void thread_added(size_t slot, int32_t tid) override { slots[slot] = tid; }
  void thread_removed(size_t slot) override { slots.erase(slot); }
  int cpu_reads = 0;
  int cpu(size_t) override {
    ++cpu_reads;
    return 1;
  }
  TaskState read(size_t slot) override {
    ++reads;
    auto it = state.find(slots.at(slot));
    return it == state.end() ? TaskState::kOtherSyscall : it->second;
  }
};

// A fake 3.11 interpreter whose thread list and GIL the test edits between polls.
struct FakeTarget {
  layouts::Layout layout = layouts::layout_for(*elf::parse_version_text("3.11.7"));
  FakeMemoryReader mem;
  Interpreter interp;
  std::vector<int32_t> tids;  // thread i lives at kTstates + i * 0x1000

  FakeTarget() {
    mem.map(kRuntime, 0x1000);
    mem.map(kInterp, 0x1000);
    mem.map(kGil, 0x1000);
    mem.map(kTstates, 0x10000);
    mem.put(kRuntime, layout.runtime.interpreters_head, kInterp);
    interp.pid = 1000;
    interp.layout = layout;
    interp.interp_addr = kInterp;
    interp.gil_addr = kGil;
    mem.put(kGil, layout.gil.interval, 5000);
  }
  // Threads with these tids in slots 0, 1, ... linked into the list, in that order.
  explicit FakeTarget(std::vector<int32_t> live_tids) : FakeTarget() {
    tids = std::move(live_tids);
    std::vector<size_t> slots(tids.size());
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
    set_threads(slots);
  }
  static uint64_t tstate(size_t i) { return kTstates + i * 0x1000; }
  // Links threads `live` (indices) into the interpreter's list, with their TIDs.
  void set_threads(const std::vector<size_t>& live) {
    uint64_t head = 0;
    for (auto it = live.rbegin(); it != live.rend(); ++it) {
      const uint64_t ts = tstate(*it);
      mem.put(ts, layout.tstate.next, head);
      mem.put(ts, layout.tstate.interp, kInterp);
      mem.put(ts, layout.tstate.thread_id, 0x7f0000 + *it);
      mem.put(ts, *layout.tstate.native_thread_id, static_cast<uint64_t>(tids.at(*it)));
      head = ts;
    }
    mem.put(kInterp, layout.interp.threads_head, head);
    uint64_t prev = 0;
    for (const size_t i : live) {
      mem.put(tstate(i), layout.tstate.prev, prev);
      prev = tstate(i);
    }
  }
  void gil(int32_t locked, uint64_t holder, uint64_t switch_number, uint32_t waiters = 0) {
    mem.put(kGil, layout.gil.locked, locked);
    mem.put(kGil, layout.gil.last_holder, holder);
    mem.put(kGil, layout.gil.switch_number, switch_number);
    mem.put<uint32_t>(kGil + layout.gil.cond + layouts::kGlibc.cond_wrefs.off, waiters << 3);
  }
};

// Every record the sampler queued, in order.
inline std::vector<raw::Record> drain(RecordQueue& q) {
  std::vector<raw::Record> out;
  raw::TargetRecord e;
  while (q.pop(&e)) out.push_back(e.record);
  return out;
}

}  // namespace gilspy::sampler::fake
