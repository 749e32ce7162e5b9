#pragma once
// What `gilspy record` prints: the live status line and the per-target summary at the end.
#include <span>
#include <string>

#include "sampler/poll_loop.hpp"
#include "sampler/raw_format.hpp"
#include "sampler/summary.hpp"

namespace gilspy::cli {

// "MainThread" for the main thread, "thread <tid>" (+ " (<comm>)" when the OS name says more) otherwise.
std::string thread_display_name(int pid, int64_t tid, const std::string& comm, const std::string& process_comm);

void print_status_line(const sampler::LoopCounters& loop, std::span<sampler::ProcessSampler* const> samplers);
void clear_status_line();

void print_target_summary(const raw::Writer& writer, int pid, int64_t rank, const std::string& python_version,
                          const std::string& raw_path, const std::string& trace_path,
                          const raw::SummaryBuilder& summary, const raw::LoopFigures& loop, double rate_asked,
                          bool quiet);

}  // namespace gilspy::cli
