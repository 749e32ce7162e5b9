#pragma once
// A file of the target floor that reaches up into the poll: tests/build_checks/layers.py must refuse it.
#include "sampler/gil/process_sampler.hpp"
