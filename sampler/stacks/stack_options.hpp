#pragma once
// What the sampler reads besides the GIL: Python stacks and thread names (stack_sampler.hpp).
#include <cstdint>

namespace gilspy::sampler {

struct StackOptions {
  bool enabled = true;  // --no-stacks: neither stacks nor Python thread names
  int max_depth = 64;   // --stack-depth: innermost frames kept; deeper stacks are cut and marked
  int64_t hold_resample_ns = 10'000'000;  // a hold that lasts is sampled again this often
  // --all-threads: also the stacks of threads that neither hold nor wait (in C, in I/O, asleep), each when it
  // lets go of the GIL and again this often while it stays so. They come after the holder's and the waiters'.
  bool all_threads = false;
  int64_t released_resample_ns = 100'000'000;
  // The poll thread's time for stacks and names, as a share of one core (a token bucket refilled at this
  // rate, up to kStackBurstNs): a workload with thousands of hand-offs a second does not get a stack at each.
  double cpu_share = 0.02;
  int64_t max_per_tick_ns = 2'000'000;  // at most this between two polls, however much the bucket holds
};

}  // namespace gilspy::sampler
