// The pipeline simulation's flags (schedule, cache, links, strategy, overlap of the parallel
// groups, hardware), shared by `attnres pipeline` and `attnres plan`: one definition of each flag
// and of the checks that name it. An internal header of the CLI.
#pragma once

#include <string>

#include "attnres/pipeline.hpp"
#include "cost_input_flags.hpp"
#include "options.hpp"

namespace attnres::cli {

// The flags as typed; those bound to a setting directly write `settings`.
struct PipelineFlags {
  InputFlags model;
  PipelineSettings settings;
  std::string schedule, cache, hardware, overlap, format, mode, link, strategy, overlap_comm;
  double link_gbps = 0;
  AllowanceFlags allowance;
};

// Adds the model flags (pipeline form) and the simulation's flags, --format table|json included.
void add_pipeline_options(po::options_description& options, PipelineFlags& flags);
// --hardware (or a plan's --try-hardware entry): a preset name is a flag value (UsageError when
// unknown); a .toml file is an input file (attnres::Error when it cannot be read or parsed).
Hardware hardware_flag(const std::string& hardware);
// The simulated step's settings from the flags, checked (UsageError naming the flag).
PipelineSettings pipeline_settings(const po::variables_map& values, PipelineFlags& flags);

}  // namespace attnres::cli
