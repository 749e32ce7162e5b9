#pragma once
// `convert --pid-namespace target`: a container's recording shown as the container sees it, its threads under
// their ids in the target's PID namespace (the raw file's T records carry both), so that the trace lines up
// with a profiler that ran inside the container.
#include <memory>

#include "convert/lane_placement.hpp"

namespace gilspy::convert {

std::unique_ptr<LanePlacement> namespace_placement();

}  // namespace gilspy::convert
