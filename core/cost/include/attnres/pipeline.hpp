// Does the AttnRes traffic hide behind compute? One training iteration of a pipelined model,
// simulated twice — with the AttnRes history on the stage boundaries and with the standard
// residual — plus once with free transfers to measure the exposed communication (docs/math.md
// §3.3–3.4).
//
// Chunk forward time: the roofline time (time_model.hpp) of its attention, MLP and
// residual-mechanism work for one micro-batch (B sequences x T tokens); backward = 2 x forward.
// Boundary payload: the exact per-boundary vectors of the cost engine under the cache policy,
// x d x B·T x b bytes (the standard residual sends one hidden state). Memory per chunk: the
// activations of its sublayers (docs/math.md §3.7, rank_memory.hpp) plus the AttnRes history it
// received, from forward start to backward end; compute split over t·c ranks.
#pragma once

#include <optional>

#include "attnres/cost.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline_sim.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/strategy.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

enum class CachePolicy { naive, cached, cached_own };
inline constexpr EnumNames<CachePolicy, 3> kCachePolicyNames{
    {{CachePolicy::naive, "naive"},
     {CachePolicy::cached, "cached"},
     {CachePolicy::cached_own, "cached_own"}}};
std::string to_string(CachePolicy policy);
CachePolicy parse_cache_policy(const std::string& text, const std::string& where);

struct PipelineSettings {
  CostInputs model;  // resolved; batch = sequences per micro-batch, tokens = T, pp = P, vpp = V
  ResidualMode mode = ResidualMode::block;  // the AttnRes variant (block or full)
  int microbatches = 8;                     // m
  PipelineSchedule schedule = PipelineSchedule::interleaved;
  CachePolicy cache = CachePolicy::cached;
  Strategy strategy = Strategy::fused_two_phase;  // its saved tensors count in memory
  Hardware hardware;
  bool intra_node_link = false;  // pipeline transfers over NVLink instead of the scale-out network
  double link_bandwidth = 0;     // bytes/s per direction, overrides the hardware's (0: use it)
  bool overlap = true;
  bool ideal_links = false;
  bool record_timeline = true;
  Progress progress;  // passed to each simulation; false stops with attnres::Cancelled
};

struct PipelineReport {
  PipelineSettings settings;
  PipelineSimResult attnres;       // the AttnRes run
  PipelineSimResult standard;      // the same run with the standard residual
  double ideal_links_seconds = 0;  // the AttnRes run with free transfers
  double link_bandwidth = 0;       // bytes/s per direction actually used
  double iteration_time_s = 0;
  double bubble_fraction = 0;             // of the busiest rank's compute time
  double exposed_comm_s = 0;              // iteration - iteration with free transfers
  double attnres_overhead_fraction = 0;   // iteration / standard iteration - 1
  double peak_memory_bytes_per_rank = 0;  // max over ranks
  double closed_form_bubble = 0;
  std::vector<double> chunk_forward_seconds;  // AttnRes run
  std::vector<double> boundary_bytes;         // AttnRes run, per forward boundary
  // Memory per rank (rank_memory.hpp) with the activations and AttnRes history at the simulated
  // peak, and the device capacity of the hardware.
  std::vector<RankMemory> memory;
};

// Throws attnres::Error on impossible settings (m < 1, 1f1b with V > 1, zero bandwidth without
// ideal links, mode standard).
// The input rules of the pipeline simulation, one place for scenario files, `attnres pipeline`
// and the GUI (docs/math.md §3.4): the first problem, `field` the PipelineSettings member
// ("microbatches", ...), so the caller names its own key, flag or input (the MoE shape and the
// rest of the model are CostInputs, checked by resolve_cost_inputs).
//   Pipeline: mode block or full; 1 <= m <= kMaxMicrobatches; m x P·V <= kMaxPipelinePairs; the
//   1f1b schedule needs V = 1; a link bandwidth override is > 0 (or absent: 0).
inline constexpr int kMaxMicrobatches = 1'000'000;
// The simulation places a forward and a backward of every micro-batch on every chunk (m x C
// pairs, C = P·V) with their transfers and memory steps: about kPipelineBytesPerPair bytes each
// (measured: 1.64 GB peak for 2,000,000 pairs with the timeline of `attnres pipeline --format
// table`, about 810 bytes a pair). The bound keeps one run under about 800 MB.
inline constexpr std::int64_t kMaxPipelinePairs = 1'000'000;
inline constexpr std::int64_t kPipelineBytesPerPair = 800;
std::optional<CostInputProblem> pipeline_settings_problem(const PipelineSettings& settings);
// The schedule a run gets when none is asked for: interleaved when V > 1, else 1f1b.
PipelineSchedule default_pipeline_schedule(std::int64_t vpp);

PipelineReport evaluate_pipeline(const PipelineSettings& settings);

}  // namespace attnres
