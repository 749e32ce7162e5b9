#include "raw/stack_summary.hpp"

#include <algorithm>
#include <limits>

namespace gilspy::raw {

void WaiterHistory::add(const Waiters& w) {
  if (!steps_.empty() && w.ts < steps_.back().first)
    return;  // out of order: keep the step function monotonic
  steps_.emplace_back(w.ts, w.n);
  // Keep the step in force at the start of the kept past.
  while (steps_.size() > 2 && steps_[1].first < w.ts - kKeepNs) steps_.pop_front();
}

void WaiterHistory::integrate(int64_t from, int64_t to, int64_t* contended_ns, double* waiter_ns) const {
  *contended_ns = 0;
  *waiter_ns = 0;
  if (to <= from || steps_.empty()) return;
  // The first step that starts after `from`; the one before it is in force at `from`.
  auto it = std::upper_bound(steps_.begin(), steps_.end(), from,
                             [](int64_t t, const std::pair<int64_t, uint64_t>& s) { return t < s.first; });
  uint64_t n = it == steps_.begin() ? 0 : std::prev(it)->second;
  int64_t at = from;
  while (at < to) {
    const int64_t next = it == steps_.end() ? to : std::min(to, it->first);
    if (n > 0) {
      *contended_ns += next - at;
      *waiter_ns += static_cast<double>(n) * static_cast<double>(next - at);
    }
    at = next;
    if (it != steps_.end() && it->first <= at) n = (it++)->second;
  }
}

const FrameDef* StackPieces::innermost(uint32_t stack) const {
  const auto s = stacks_.find(stack);
  if (s == stacks_.end() || s->second.frames.empty()) return nullptr;
  const auto f = frames_.find(s->second.frames.front());
  return f == frames_.end() ? nullptr : &f->second;
}

void StackPieces::add(const Record& r) {
  std::visit(overloaded{
                 [&](const FrameDef& x) { frames_[x.id] = x; },
                 [&](const StackDef& x) { stacks_[x.id] = x; },
                 [&](const StackSample& x) { pending_[x.tid].push_back(x); },
                 [&](const Waiters& x) { waiters_.add(x); },
                 [&](const Hold& x) {
                   close_released(x.tid, x.ts);
                   interval(GilRole::kHolding, x.tid, x.ts, x.dur);
                 },
                 [&](const Wait& x) {
                   close_released(x.tid, x.ts);
                   interval(GilRole::kWaiting, x.tid, x.ts, x.dur);
                 },
                 [&](const ThreadEnd& x) {
                   close_released(x.tid, x.ts);
                   // Samples of an interval that never ended in the file (the recording was cut) go with it.
                   pending_.erase(x.tid);
                   last_end_.erase(x.tid);
                 },
                 [](const auto&) {},
             },
             r);
}

void StackPieces::released_pieces(int64_t tid, const std::vector<StackSample>& samples, int64_t floor,
                                  int64_t to, std::vector<StackPiece>* out) {
  out->clear();
  const StackSample* prev = nullptr;
  for (const StackSample& s : samples) {
    if (s.role != GilRole::kReleased) continue;
    // A sample of the same stretch cuts it where it was read; one of a later stretch (the thread held
    // between two polls and let go again) where that stretch began.
    const int64_t at = prev == nullptr || s.since != prev->since ? s.since : s.ts;
    const int64_t from = std::clamp(at, out->empty() ? floor : out->back().from, std::max(floor, to));
    if (!out->empty()) out->back().to = from;
    out->push_back({.tid = tid, .role = GilRole::kReleased, .from = from, .to = to, .stack = s.stack});
    prev = &s;
  }
  std::erase_if(*out, [](const StackPiece& p) { return p.to <= p.from; });
}

void StackPieces::close_released(int64_t tid, int64_t to) {
  const auto found = pending_.find(tid);
  if (found == pending_.end()) return;
  const auto floor = last_end_.find(tid);
  released_pieces(tid, found->second,
                  floor == last_end_.end() ? std::numeric_limits<int64_t>::min() : floor->second, to,
                  &pieces_);
  std::erase_if(found->second, [](const StackSample& s) { return s.role == GilRole::kReleased; });
  if (!pieces_.empty()) on_interval_(pieces_);
}

void StackPieces::open_released(int64_t end, const OnInterval& on_interval) const {
  std::vector<StackPiece> pieces;
  for (const auto& [tid, samples] : pending_) {
    const auto floor = last_end_.find(tid);
    released_pieces(tid, samples,
                    floor == last_end_.end() ? std::numeric_limits<int64_t>::min() : floor->second, end,
                    &pieces);
    if (!pieces.empty()) on_interval(pieces);
  }
}

void StackPieces::open_intervals(int64_t end, const OnInterval& on_interval) const {
  open_released(end, on_interval);
  std::vector<StackPiece> pieces;
  for (const auto& [tid, samples] : pending_) {
    // The open hold or wait is the latest one sampled: the samples of earlier ones left with their records.
    const StackSample* open = nullptr;
    for (const StackSample& s : samples) {
      if (s.role != GilRole::kReleased && (open == nullptr || s.since > open->since)) open = &s;
    }
    if (open == nullptr) continue;
    pieces.clear();
    for (const StackSample& s : samples) {
      if (s.role != open->role || s.since != open->since) continue;
      const int64_t from =
          pieces.empty() ? s.since : std::clamp(s.ts, pieces.back().from, std::max(end, s.since));
      if (!pieces.empty()) pieces.back().to = from;
      pieces.push_back({.tid = tid, .role = s.role, .from = from, .to = end, .stack = s.stack});
    }
    std::erase_if(pieces, [](const StackPiece& p) { return p.to <= p.from; });
    if (!pieces.empty()) on_interval(pieces);
  }
}

void StackPieces::finish(int64_t end) {
  std::vector<int64_t> tids;
  for (const auto& [tid, samples] : pending_) tids.push_back(tid);
  std::sort(tids.begin(), tids.end());  // in a stable order, whatever the hash map's
  for (const int64_t tid : tids) close_released(tid, end);
}

void StackPieces::interval(GilRole role, int64_t tid, int64_t ts, int64_t dur) {
  pieces_.clear();
  const int64_t end = ts + dur;
  last_end_[tid] = end;
  auto found = pending_.find(tid);
  if (found != pending_.end()) {
    std::vector<StackSample>& samples = found->second;
    // This interval's samples; older ones belong to intervals that are over (a hold split in two).
    size_t keep = 0;
    for (const StackSample& s : samples) {
      // The sampler's own intervals begin where its samples say (`since`). Those of --exact come from the
      // probes and begin elsewhere: a sample of the same role read inside one belongs to it.
      const bool inside = s.since != ts && s.role == role && s.ts >= ts && s.ts < end;
      if (s.since < ts && !inside) continue;
      if ((s.since == ts && s.role == role) || inside) {
        const int64_t from = pieces_.empty() ? ts : std::clamp(s.ts, ts, end);
        if (!pieces_.empty()) pieces_.back().to = from;
        pieces_.push_back({.tid = tid, .role = role, .from = from, .to = end, .stack = s.stack});
        continue;
      }
      samples[keep++] = s;  // a later interval's (cannot happen in order, kept to be safe)
    }
    samples.resize(keep);
  }
  if (pieces_.empty()) pieces_.push_back({.tid = tid, .role = role, .from = ts, .to = end, .stack = 0});
  // A later sample may have had the same time as the one before it: pieces of no length say nothing.
  if (pieces_.size() > 1) std::erase_if(pieces_, [](const StackPiece& p) { return p.to <= p.from; });
  if (role == GilRole::kHolding) {
    for (StackPiece& p : pieces_) waiters_.integrate(p.from, p.to, &p.contended_ns, &p.waiter_ns);
  }
  on_interval_(pieces_);
}

StackSummary::StackSummary() : pieces_([this](const std::vector<StackPiece>& p) { on_interval(p); }) {}

void StackSummary::add(const Record& r) {
  if (const auto* c = std::get_if<StackStats>(&r)) costs_ = *c;
  if (std::holds_alternative<StackSample>(r)) ++samples_;
  pieces_.add(r);
}

void StackSummary::on_interval(const std::vector<StackPiece>& pieces) {
  if (!pieces.empty() && pieces.front().role == GilRole::kReleased) {
    add_released(released_, pieces);  // a stretch's pieces are all released ones
    return;
  }
  // What each function (holds) or call site (waits) got of this interval, summed over its pieces.
  std::vector<std::pair<std::string, int64_t>> shares;
  for (const StackPiece& p : pieces) {
    const FrameDef* f = pieces_.innermost(p.stack);
    const int64_t len = p.to - p.from;
    if (p.role == GilRole::kHolding) {
      const std::string key = f ? f->qualname + '\0' + f->file : std::string(kNoStackSample);
      HolderRow& row = holders_[key];
      if (row.function.empty()) {
        row.function = f ? f->qualname : kNoStackSample;
        row.file = f ? f->file : "";
        row.first_line = f ? f->first_line : 0;
      }
      row.hold_ns += len;
      row.contended_ns += p.contended_ns;
      row.mean_waiters += p.waiter_ns;  // the integral for now; divided in top_holders()
      auto s = std::find_if(shares.begin(), shares.end(), [&](const auto& e) { return e.first == key; });
      if (s == shares.end()) {
        shares.emplace_back(key, len);
      } else {
        s->second += len;
      }
    } else {
      const std::string key =
          f ? f->qualname + '\0' + f->file + '\0' + std::to_string(f->line) : std::string(kNoStackSample);
      WaitSiteRow& row = waits_[key];
      if (row.function.empty()) {
        row.function = f ? f->qualname : kNoStackSample;
        row.file = f ? f->file : "";
        row.line = f ? f->line : 0;
      }
      row.wait_ns += len;
      row.longest_ns = std::max(row.longest_ns, len);
      ++row.waits;
    }
  }
  for (const auto& [key, ns] : shares) {
    HolderRow& row = holders_[key];
    ++row.holds;
    row.longest_ns = std::max(row.longest_ns, ns);
  }
}

std::vector<HolderRow> StackSummary::top_holders(size_t n) const {
  std::vector<HolderRow> rows;
  for (const auto& [key, row] : holders_) {
    HolderRow r = row;
    r.mean_waiters = r.hold_ns > 0 ? r.mean_waiters / static_cast<double>(r.hold_ns) : 0;
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const HolderRow& a, const HolderRow& b) {
    return a.contended_ns != b.contended_ns ? a.contended_ns > b.contended_ns : a.hold_ns > b.hold_ns;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

std::vector<WaitSiteRow> StackSummary::wait_sites(size_t n) const {
  std::vector<WaitSiteRow> rows;
  for (const auto& [key, row] : waits_) rows.push_back(row);
  std::sort(rows.begin(), rows.end(),
            [](const WaitSiteRow& a, const WaitSiteRow& b) { return a.wait_ns > b.wait_ns; });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

void StackSummary::add_released(std::map<std::string, ReleasedSiteRow>& rows,
                                const std::vector<StackPiece>& pieces) const {
  std::vector<std::pair<ReleasedSiteRow*, int64_t>> stretch;  // each site's share of this stretch
  for (const StackPiece& p : pieces) {
    const FrameDef* f = pieces_.innermost(p.stack);
    const std::string key =
        f ? f->qualname + '\0' + f->file + '\0' + std::to_string(f->line) : std::string(kNoStackSample);
    ReleasedSiteRow& row = rows[key];
    if (row.function.empty()) {
      row.function = f ? f->qualname : kNoStackSample;
      row.file = f ? f->file : "";
      row.line = f ? f->line : 0;
    }
    row.released_ns += p.to - p.from;
    auto share = std::find_if(stretch.begin(), stretch.end(), [&](const auto& e) { return e.first == &row; });
    if (share == stretch.end()) {
      stretch.emplace_back(&row, p.to - p.from);
    } else {
      share->second += p.to - p.from;
    }
  }
  for (auto& [row, ns] : stretch) {
    ++row->stretches;
    row->longest_ns = std::max(row->longest_ns, ns);
  }
}

std::vector<ReleasedSiteRow> StackSummary::released_sites(size_t n, int64_t end_ns) const {
  std::map<std::string, ReleasedSiteRow> all = released_;
  pieces_.open_released(end_ns, [&](const std::vector<StackPiece>& pieces) { add_released(all, pieces); });
  std::vector<ReleasedSiteRow> rows;
  for (auto& [key, row] : all) rows.push_back(std::move(row));
  std::sort(rows.begin(), rows.end(), [](const ReleasedSiteRow& a, const ReleasedSiteRow& b) {
    return a.released_ns != b.released_ns ? a.released_ns > b.released_ns : a.function < b.function;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

nlohmann::json StackSummary::to_json(int64_t duration_ns, int64_t end_ns) const {
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  const StackStats& c = costs_;
  nlohmann::json holders = nlohmann::json::array();
  for (const HolderRow& r : top_holders(10)) {
    holders.push_back({{"function", r.function},
                       {"file", r.file},
                       {"first_line", r.first_line},
                       {"hold_ns", r.hold_ns},
                       {"contended_ns", r.contended_ns},
                       {"longest_hold_ns", r.longest_ns},
                       {"holds", r.holds},
                       {"mean_waiters", r.mean_waiters}});
  }
  nlohmann::json sites = nlohmann::json::array();
  for (const WaitSiteRow& r : wait_sites(10)) {
    sites.push_back({{"function", r.function},
                     {"file", r.file},
                     {"line", r.line},
                     {"wait_ns", r.wait_ns},
                     {"longest_wait_ns", r.longest_ns},
                     {"waits", r.waits}});
  }
  nlohmann::json out = {
      {"walks", c.walks},
      {"samples", c.samples},
      {"samples_per_s", seconds > 0 ? static_cast<double>(c.samples) / seconds : 0.0},
      {"torn", c.torn},
      {"invalid", c.invalid},
      {"skipped", c.skipped},
      {"truncated", c.truncated},
      {"frames_read", c.frames},
      {"bytes_read", c.bytes},
      {"bytes_per_stack", c.walks > 0 ? static_cast<double>(c.bytes) / static_cast<double>(c.walks) : 0.0},
      {"read_ns", c.read_ns},
      {"read_share", seconds > 0 ? static_cast<double>(c.read_ns) / 1e9 / seconds : 0.0},
      {"name_reads", c.name_reads},
      {"reused", c.reused},
      {"frames_defined", pieces_.frames().size()},
      {"stacks_defined", pieces_.stacks().size()},
      {"top_holders", holders},
      {"wait_sites", sites}};
  // Only with --all-threads, so that other recordings' summaries stay as they were.
  const std::vector<ReleasedSiteRow> released = released_sites(10, end_ns);
  if (released.empty()) return out;
  nlohmann::json rows = nlohmann::json::array();
  for (const ReleasedSiteRow& r : released) {
    rows.push_back({{"function", r.function},
                    {"file", r.file},
                    {"line", r.line},
                    {"released_ns", r.released_ns},
                    {"longest_ns", r.longest_ns},
                    {"stretches", r.stretches}});
  }
  out["released_sites"] = std::move(rows);
  return out;
}

}  // namespace gilspy::raw
