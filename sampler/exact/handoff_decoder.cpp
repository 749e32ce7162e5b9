#include "sampler/exact/handoff_decoder.hpp"

#include <algorithm>
#include <bit>

namespace gilspy::sampler::exact {

HandoffDecoder::HandoffDecoder(int64_t start_ns, size_t max_threads)
    : start_ns_(start_ns),
      slots_(std::bit_ceil(std::max<size_t>(16, 2 * max_threads))),
      spare_(slots_.size()) {}

HandoffDecoder::Slot* HandoffDecoder::find_or_add(int32_t tid) {
  const size_t mask = slots_.size() - 1;
  for (int attempt = 0; attempt < 2; ++attempt) {
    size_t i = static_cast<size_t>(static_cast<uint32_t>(tid) * 2654435761u) & mask;
    for (size_t probes = 0; probes < slots_.size(); ++probes, i = (i + 1) & mask) {
      if (slots_[i].tid == 0) {
        if (2 * (used_ + 1) > slots_.size()) break;  // past half full: make room first
        ++used_;
        slots_[i] = {tid, State::kNew, start_ns_};
        return &slots_[i];
      }
      if (slots_[i].tid == tid) return &slots_[i];
    }
    compact();
  }
  return nullptr;
}

void HandoffDecoder::compact() {
  compacted_ = true;
  std::swap(slots_, spare_);
  std::fill(slots_.begin(), slots_.end(), Slot{});
  used_ = 0;
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : spare_) {
    if (s.tid == 0 || s.state == State::kReleased) continue;  // only what is open or yet to be seen
    size_t i = static_cast<size_t>(static_cast<uint32_t>(s.tid) * 2654435761u) & mask;
    while (slots_[i].tid != 0) i = (i + 1) & mask;
    slots_[i] = s;
    ++used_;
  }
}

void HandoffDecoder::add(const ProbeHit& hit, IntervalSink& out) {
  if (hit.tid <= 0) return;
  Slot* t = find_or_add(hit.tid);
  if (t == nullptr) {
    ++full_;
    return;
  }
  // Only a thread there when the probes began can start with a return or a drop (a new thread's first hit is
  // its entry into take_gil): it was inside take_gil, or held the GIL, when they came.
  const bool first = t->state == State::kNew && !compacted_;
  switch (hit.kind) {
    case ProbeKind::kTakeEntry:
      if (t->state == State::kHolding) out.hold(hit.tid, t->since, hit.time - t->since);  // its drop was lost
      if (t->state != State::kWaiting) *t = {hit.tid, State::kWaiting, hit.time};
      break;
    case ProbeKind::kTakeReturn:
      if (t->state == State::kHolding) break;
      if (t->state == State::kWaiting || first) {
        if (hit.time > t->since) out.wait(hit.tid, t->since, hit.time - t->since);
      }
      *t = {hit.tid, State::kHolding, hit.time};
      ++takes_;
      if (hit.tid != last_taker_) ++handoffs_;
      last_taker_ = hit.tid;
      break;
    case ProbeKind::kDropEntry:
      if (first) {
        // Its take was not seen: it was inside take_gil when the probes came, and a uretprobe only sees the
        // returns of calls that entered after it. It took the GIL when the last holder before it let go (or
        // held it from the start): it waited until then.
        const int64_t took =
            std::max(t->since, last_drop_tid_ != 0 && last_drop_tid_ != hit.tid ? last_drop_ : t->since);
        if (took > t->since) out.wait(hit.tid, t->since, took - t->since);
        if (hit.time > took) out.hold(hit.tid, took, hit.time - took);
      } else if (t->state == State::kHolding && hit.time > t->since) {
        out.hold(hit.tid, t->since, hit.time - t->since);
      }
      *t = {hit.tid, State::kReleased, hit.time};
      last_drop_ = hit.time;
      last_drop_tid_ = hit.tid;
      break;
  }
}

void HandoffDecoder::finish(int64_t t_end, IntervalSink& out) {
  for (Slot& s : slots_) {
    if (s.state == State::kHolding && t_end > s.since) out.hold(s.tid, s.since, t_end - s.since);
    if (s.state == State::kWaiting && t_end > s.since) out.wait(s.tid, s.since, t_end - s.since);
    if (s.state == State::kHolding || s.state == State::kWaiting) s = {s.tid, State::kReleased, t_end};
  }
}

}  // namespace gilspy::sampler::exact
