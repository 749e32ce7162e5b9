#include "convert/merge_lanes.hpp"

#include <string>
#include <unordered_map>

namespace gilspy::convert {
namespace {

// Linux tids stay below PID_MAX_LIMIT (2^22): kGilTidBase + tid stays readable and below 2^31 (viewers keep
// tids in 32 bits). A clash moves it by kClashStep, which keeps its last digits.
constexpr int64_t kTidLimit = int64_t{1} << 22;
constexpr int64_t kClashStep = 10'000'000;

class MergeLanes final : public LanePlacement {
 public:
  MergeLanes(std::set<int64_t>& taken, bool namespace_ids) : taken_(taken), namespace_ids_(namespace_ids) {}

  void thread_seen(int64_t tid, int64_t ns_tid) override {
    Thread& t = threads_[tid];
    t.shown = namespace_ids_ && ns_tid != 0 ? ns_tid : tid;
  }

  int64_t lane_tid(int64_t tid) override {
    if (const auto it = lanes_.find(tid); it != lanes_.end()) return it->second;
    const auto t = threads_.find(tid);
    const int64_t shown = t != threads_.end() ? t->second.shown : tid;
    int64_t lane = shown >= 0 && shown <= kTidLimit ? kGilTidBase + shown : kGilTidBase + kTidLimit + 1;
    while (taken_.contains(lane)) lane += kClashStep;
    taken_.insert(lane);
    lanes_.emplace(tid, lane);
    return lane;
  }

  std::string lane_name(int64_t tid, const std::string& given) override {
    const auto t = threads_.find(tid);
    if (t != threads_.end()) {
      // The lane's final name (its Python name once read), else the one of its start.
      std::string full = given;
      // A container's own tid (the lane's number with namespace ids) is not repeated in its name.
      if (const auto at = full.rfind(" [tid ");
          at != std::string::npos && full.ends_with(" in its PID namespace]"))
        full.erase(at);
      const std::string shown_name = short_thread_name(tid, full);
      std::string name = "GIL " + std::to_string(t->second.shown);
      if (!shown_name.empty()) name += " (" + shown_name + ")";
      return name;
    }
    // The recording's own lanes (the process lane, "GIL waiters", ...): "GIL" in front when not there
    // already.
    std::string name = tid == 0 ? "process" : given;
    if (name.rfind("GIL", 0) != 0) name = "GIL " + name;
    return name;
  }

  int64_t lane_sort_index(int64_t tid, int64_t index) override {
    // PyTorch's profiler sorts a thread's lane by its tid: the GIL lane of a thread goes beside it.
    const auto t = threads_.find(tid);
    return t != threads_.end() ? t->second.shown : index;
  }

  bool process_metadata() const override { return false; }

 private:
  struct Thread {
    int64_t shown = 0;  // its tid as the trace knows it
  };
  std::set<int64_t>& taken_;
  bool namespace_ids_;
  std::unordered_map<int64_t, Thread> threads_;
  std::unordered_map<int64_t, int64_t> lanes_;  // recording's lane tid -> tid written
};

}  // namespace

std::unique_ptr<LanePlacement> merge_lanes(std::set<int64_t>& taken, bool namespace_ids) {
  return std::make_unique<MergeLanes>(taken, namespace_ids);
}

std::string short_thread_name(int64_t tid, const std::string& name) {
  const std::string generic = "thread " + std::to_string(tid);
  if (name.rfind(generic, 0) != 0) return name;
  std::string rest = name.substr(generic.size());
  if (rest.size() >= 3 && rest.compare(0, 2, " (") == 0 && rest.back() == ')')
    return rest.substr(2, rest.size() - 3);
  while (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
  return rest;
}

}  // namespace gilspy::convert
