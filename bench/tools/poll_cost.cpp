// What one poll costs, with and without reading the garbage collector's state (issue 9), measured on a live
// target without the poll loop's schedule: two ProcessSamplers on the same process (SamplerOptions::read_gc
// true / false), polled back to back in alternating batches; per batch the thread CPU time and the wall time
// per poll. Back-to-back polls are the sustained rate's ceiling: 1 / (CPU time per poll) polls per second of
// one core. CPU time leaves out the time the machine gave to others (this machine is shared), so the medians
// of many short alternating batches compare the two variants fairly.
//
// usage: gilspy_poll_cost PID [BATCHES [POLLS_PER_BATCH [GC_READ_PERIOD_NS]]]   (root or CAP_SYS_PTRACE)
// GC_READ_PERIOD_NS: SamplerOptions::gc_read_period_ns (default gilspy's, 150 us; 0: read it at every poll,
// what polls at up to 10 kHz do).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "base/error.hpp"
#include "sampler/gil/process_sampler.hpp"
#include "sampler/target/attach.hpp"

namespace {

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gilspy;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PID [BATCHES [POLLS_PER_BATCH]]\n", argv[0]);
    return 2;
  }
  const pid_t pid = static_cast<pid_t>(std::atoi(argv[1]));
  const int batches = argc > 2 ? std::atoi(argv[2]) : 200;
  const int polls = argc > 3 ? std::atoi(argv[3]) : 500;
  const int64_t period = argc > 4 ? std::atoll(argv[4]) : sampler::SamplerOptions{}.gc_read_period_ns;
  try {
    sampler::RemoteMemoryReader reader(pid);
    const sampler::Interpreter in = sampler::attach(pid, reader, {});
    struct Variant {
      const char* name;
      sampler::ProcTaskStateSource tasks;
      sampler::RecordQueue queue{1 << 16};
      sampler::ProcessSampler sampler;
      std::vector<double> cpu, wall;
      Variant(const char* n, const sampler::Interpreter& in, sampler::MemoryReader& r, bool gc,
              int64_t period)
          : name(n),
            tasks(in.pid, in.gil_addr, in.layout.gil),
            sampler(in, r, tasks, queue, 0,
                    sampler::SamplerOptions{.read_gc = gc, .gc_read_period_ns = period}) {}
    };
    Variant with("with GC", in, reader, true, period),
        without("without (--no-gc)", in, reader, false, period);
    raw::TargetRecord sink;
    for (int b = 0; b < batches; ++b) {
      for (Variant* v :
           (b % 2 == 0 ? std::vector<Variant*>{&with, &without} : std::vector<Variant*>{&without, &with})) {
        const int64_t c0 = thread_cpu_ns(), w0 = gilspy::monotonic_ns();
        for (int i = 0; i < polls; ++i) {
          if (!v->sampler.poll(gilspy::monotonic_ns()))
            throw Error(ErrorKind::kNoSuchProcess, "the target is gone");
        }
        v->cpu.push_back(static_cast<double>(thread_cpu_ns() - c0) / polls);
        v->wall.push_back(static_cast<double>(gilspy::monotonic_ns() - w0) / polls);
        while (v->queue.pop(&sink)) {
        }
      }
    }
    std::printf("GIL at 0x%llx, GC state at 0x%llx\n", static_cast<unsigned long long>(in.gil_addr),
                static_cast<unsigned long long>(in.gc_addr));
    std::printf(
        "Python %s, pid %d, %d alternating batches of %d back-to-back polls; GC state %s, at most every %lld "
        "ns\n",
        in.binary.version.text().c_str(), pid, batches, polls,
        with.sampler.gc().why_off().empty() ? "read" : with.sampler.gc().why_off().c_str(),
        static_cast<long long>(period));
    std::printf("  %-20s %12s %12s %16s\n", "", "CPU ns/poll", "wall ns/poll", "polls/s of a core");
    for (Variant* v : {&with, &without}) {
      std::printf("  %-20s %12.0f %12.0f %16.0f\n", v->name, median(v->cpu), median(v->wall),
                  1e9 / median(v->cpu));
    }
    std::vector<double> ratio;  // per batch pair: with / without, CPU per poll
    for (size_t i = 0; i < with.cpu.size(); ++i) ratio.push_back(with.cpu[i] / without.cpu[i]);
    std::sort(ratio.begin(), ratio.end());
    std::printf(
        "  CPU per poll, with / without: median %+.2f %% (quartiles %+.2f .. %+.2f %%): the sustained rate's "
        "ceiling changes by %+.2f %%\n",
        100 * (median(ratio) - 1), 100 * (ratio[ratio.size() / 4] - 1),
        100 * (ratio[3 * ratio.size() / 4] - 1), 100 * (1 / median(ratio) - 1));
  } catch (const Error& e) {
    std::fprintf(stderr, "gilspy_poll_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
