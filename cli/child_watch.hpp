#pragma once
// Child Python processes of the recorded targets that are not recorded themselves (multiprocessing workers,
// a launcher's ranks): `record` says so once at the end, with what would record them. They are looked
// for while the recording runs, as a child may come and go, or outlive a parent that exits first.
#include <sys/types.h>

#include <set>
#include <string>
#include <vector>

#include "cli/children_note.hpp"
#include "cli/sink.hpp"

namespace gilspy::cli {

class ChildWatchSink final : public Sink {
 public:
  // (A child a scan saw before the session attached to it stays in unrecorded(): the note leaves out every
  // recorded pid.)
  void start(const SessionTarget& target) override { targets_.push_back(target.pid); }
  void record(const SessionTarget&, const raw::Record&) override {}
  void stats(const LiveStats& live) override;  // a scan every 2 s (40 drains)
  void finish(const SessionEnd&) override { scan(); }
  const std::set<pid_t>& unrecorded() const { return unrecorded_; }

 private:
  void scan();
  std::vector<pid_t> targets_;
  std::set<pid_t> unrecorded_;
  int calls_ = 0;
};

}  // namespace gilspy::cli
