#include "convert/namespace_lanes.hpp"

#include <unordered_map>

namespace gilspy::convert {
namespace {

class NamespaceLanes final : public LanePlacement {
 public:
  void thread_seen(int64_t tid, int64_t ns_tid) override {
    if (ns_tid != 0) ns_of_[tid] = ns_tid;
  }
  int64_t lane_tid(int64_t tid) override {
    const auto it = ns_of_.find(tid);
    return it != ns_of_.end() ? it->second : tid;  // 0, the waiters' lane: as they are
  }
  std::string lane_name(int64_t, const std::string& name) override { return name; }
  int64_t lane_sort_index(int64_t, int64_t index) override { return index; }
  bool process_metadata() const override { return true; }

 private:
  std::unordered_map<int64_t, int64_t> ns_of_;  // host tid -> its id in the target's namespace
};

}  // namespace

std::unique_ptr<LanePlacement> namespace_placement() {
  return std::make_unique<NamespaceLanes>();
}

}  // namespace gilspy::convert
