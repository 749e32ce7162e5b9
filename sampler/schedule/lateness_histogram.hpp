#pragma once
// How late the poll loop's wake-ups came, as a fixed-size histogram: the poll loop may not allocate, and a
// count of late polls alone says neither how late (a microsecond past a 100 µs step, or 10 ms) nor whether a
// few outliers or the whole run were late. Log-linear buckets (8 per power of two) keep every quantile
// within 12.5 % of the true value from 1 ns to 2^40 ns (18 minutes); anything longer lands in the last one.
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace gilspy::sampler {

class LatenessHistogram {
 public:
  static constexpr int kSubBits = 3;  // 8 sub-buckets per power of two
  static constexpr int kMaxLog2 = 40;
  static constexpr int kBuckets = (kMaxLog2 + 1) << kSubBits;

  // Poll thread only (one writer): a relaxed load and store, no locked instruction.
  void add(int64_t lateness_ns) {
    auto& b = buckets_[bucket_of(lateness_ns)];
    b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  uint64_t count() const {
    uint64_t n = 0;
    for (const auto& b : buckets_) n += b.load(std::memory_order_relaxed);
    return n;
  }

  // The smallest bucket bound that at least `q` (0..1) of the values do not exceed; 0 when empty. An upper
  // bound: the true quantile is at most this and more than the bucket's lower bound.
  int64_t quantile_ns(double q) const {
    const uint64_t n = count();
    if (n == 0) return 0;
    auto rank = static_cast<uint64_t>(q * static_cast<double>(n) + 0.999999);  // ceil, without <cmath>
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += buckets_[i].load(std::memory_order_relaxed);
      if (seen >= rank) return upper_bound_of(i);
    }
    return upper_bound_of(kBuckets - 1);
  }

  static int bucket_of(int64_t ns) {
    if (ns <= 0) return 0;
    const auto v = static_cast<uint64_t>(ns);
    const int log2 = static_cast<int>(std::bit_width(v)) - 1;
    if (log2 < kSubBits) return static_cast<int>(v);  // 1..7 exactly
    if (log2 > kMaxLog2) return kBuckets - 1;
    const auto sub = static_cast<int>((v >> (log2 - kSubBits)) & ((1u << kSubBits) - 1));
    return (log2 << kSubBits) + sub;
  }
  // The largest value in bucket i.
  static int64_t upper_bound_of(int i) {
    const int log2 = i >> kSubBits;
    if (log2 < kSubBits) return i;  // the exact buckets 0..7 (8..23 stay empty)
    const int sub = i & ((1 << kSubBits) - 1);
    const uint64_t lower = (uint64_t{1} << log2) + (static_cast<uint64_t>(sub) << (log2 - kSubBits));
    return static_cast<int64_t>(lower + (uint64_t{1} << (log2 - kSubBits)) - 1);
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
};

}  // namespace gilspy::sampler
