#include "sampler/exact/exact_tracer.hpp"

#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "base/error.hpp"

namespace gilspy::sampler::exact {

namespace {

// Hits read per drain at most (the rest wait in the rings): 2 ms of 30 million hits a second.
constexpr size_t kPendingHits = size_t{1} << 16;

std::unique_ptr<ProbeRings> place_probes(pid_t pid, const elf::PythonBinary& binary, size_t* points,
                                         int64_t* start_ns) {
  // Opened inside the target's root without following links (as for its symbols); the kernel is handed
  // gilspy's own descriptor of it, never a path in the target's tree.
  const elf::ElfImage image = elf::ElfImage::open_in_process(pid, binary.path);
  const GilProbes probes = find_gil_probes(image);
  if (probes.points.empty()) throw Error(ErrorKind::kUnavailable, probes.problem);
  *points = probes.points.size();
  auto rings = std::make_unique<ProbeRings>(pid, image, probes);
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  *start_ns = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  return rings;
}

}  // namespace

ExactTracer::ExactTracer(pid_t pid, const elf::PythonBinary& binary, size_t max_threads)
    : rings_(place_probes(pid, binary, &points_, &start_ns_)), decoder_(start_ns_, max_threads) {
  pending_.resize(kPendingHits);
}

ExactTracer::~ExactTracer() = default;

void ExactTracer::drain(int64_t now, IntervalSink& out) {
  if (finished_ || now - last_drain_ < kDrainPeriodNs) return;
  last_drain_ = now;
  read_and_decode(now - kSettleNs, out);
}

void ExactTracer::finish(int64_t t_end, IntervalSink& out) {
  if (finished_) return;
  read_and_decode(INT64_MAX, out);
  decoder_.finish(t_end, out);
  finished_ = true;
  publish();
}

void ExactTracer::read_and_decode(int64_t cutoff, IntervalSink& out) {
  // Until the rings are empty or the buffer is full of hits too recent to decode yet.
  while (true) {
    const size_t before = used_;
    used_ = rings_->read(pending_, used_);
    std::sort(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(used_));
    size_t done = 0;
    while (done < used_ && pending_[done].time < start_ns_) ++done;  // while the other threads were probed
    while (done < used_ && pending_[done].time < cutoff) decoder_.add(pending_[done++], out);
    std::move(pending_.begin() + static_cast<ptrdiff_t>(done),
              pending_.begin() + static_cast<ptrdiff_t>(used_), pending_.begin());
    used_ -= done;
    if (used_ == before || done == 0 || used_ < pending_.size() / 2) break;
  }
  publish();
}

void ExactTracer::publish() {
  const RingCounts& r = rings_->counts();
  counters_.hits.store(r.hits, std::memory_order_relaxed);
  counters_.lost.store(r.lost, std::memory_order_relaxed);
  counters_.throttled.store(r.throttled, std::memory_order_relaxed);
  counters_.takes.store(decoder_.takes(), std::memory_order_relaxed);
  counters_.handoffs.store(decoder_.handoffs(), std::memory_order_relaxed);
  counters_.undecoded.store(decoder_.dropped_threads(), std::memory_order_relaxed);
}

}  // namespace gilspy::sampler::exact
