// Does the AttnRes traffic hide behind compute? One training iteration of a pipelined model,
// simulated twice — with the AttnRes history on the stage boundaries and with the standard
// residual — plus once with free transfers to measure the exposed communication (docs/math.md
// §3.3–3.4).
//
// Chunk forward time: the roofline time (time_model.hpp) of its attention and MLP for one
// micro-batch (B sequences x T tokens, ÷ t·c), the implementation strategy's kernels for its depth
// reads (strategy.hpp; the standard residual: one add per sublayer) and its tensor-, context- and
// expert-parallel collectives, exposed or hidden as CommOverlap says; backward = 2 x forward (+ the
// attention scores again under selective recompute, + the whole forward under full recompute).
// Chunks hold whole layers unless listed otherwise (stage_last_sublayers, cost.hpp).
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

// CachePolicy and sent_vectors: pipeline_payload.hpp.
std::string to_string(CachePolicy policy);
CachePolicy parse_cache_policy(const std::string& text, const std::string& where);

// Which parallel groups' collectives hide behind compute (docs/math.md §3.8). A hidden group
// shows only what a chunk's collectives take beyond the chunk's own compute (the gradient
// collectives of dp: beyond the last micro-batch's backward); an exposed group adds all of it.
// Defaults follow Megatron-LM: ring attention overlaps its key and value exchange (cp) and the
// distributed optimizer overlaps the gradient reduce-scatter (dp); the tensor-parallel
// collectives and the MoE all-to-all sit on the critical path.
struct CommOverlap {
  bool tp = false, cp = true, ep = false, dp = true;
  bool& of(CommGroup g) {
    return g == CommGroup::tp ? tp : g == CommGroup::cp ? cp : g == CommGroup::ep ? ep : dp;
  }
  bool of(CommGroup g) const {
    return g == CommGroup::tp ? tp : g == CommGroup::cp ? cp : g == CommGroup::ep ? ep : dp;
  }
};
// "cp,dp" (the groups that overlap), "none" or "all"; and back.
std::string to_string(const CommOverlap& overlap);
CommOverlap parse_comm_overlap(const std::string& text, const std::string& where);

enum class PipelineLink { placed, scale_out, intra_node };
inline constexpr EnumNames<PipelineLink, 3> kPipelineLinkNames{
    {{PipelineLink::placed, "placed"},
     {PipelineLink::scale_out, "scale_out"},
     {PipelineLink::intra_node, "intra_node"}}};

struct PipelineSettings {
  CostInputs model;  // resolved; batch = sequences per micro-batch, tokens = T, pp = P, vpp = V
  ResidualMode mode = ResidualMode::block;  // block, full, or standard (its own comparison)
  int microbatches = 8;                     // m
  PipelineSchedule schedule = PipelineSchedule::interleaved;
  CachePolicy cache = CachePolicy::cached;
  // The implementation of the depth reads: its kernels time the residual mechanism of every
  // chunk, and its saved tensors count in memory (docs/math.md §3.6).
  Strategy strategy = Strategy::fused_two_phase;
  CommOverlap comm_overlap;
  Hardware hardware;
  MemoryAllowance allowance;  // reserve and margin of the fit verdict (rank_memory.hpp)
  // Where the pipeline transfers go: placed = where the stages sit (NVLink when the whole
  // t·c·D·P world fits a node, as the communication table places it; pipeline_link_intra_node),
  // or forced onto the scale-out network or NVLink.
  PipelineLink link = PipelineLink::placed;
  double link_bandwidth = 0;  // bytes/s per direction, overrides the hardware's (0: use it)
  bool overlap = true;
  bool ideal_links = false;
  bool record_timeline = true;
  Progress progress;  // passed to each simulation; false stops with attnres::Cancelled
};

// One run's step on its busiest rank (the most compute), per training step of m micro-batches;
// the parts sum to the step (docs/math.md §3.8).
struct StepParts {
  int rank = 0;                   // the busiest pipeline rank
  double attention_mlp = 0;       // forward + backward (+ recompute) of attention and MLP, ÷ t·c
  double residual = 0;            // the residual mechanism: the strategy's kernels (standard: adds)
  double tp = 0, cp = 0, ep = 0;  // exposed collectives inside the chunks
  double bubble = 0;              // idle time with free pipeline links
  double pp = 0;                  // exposed pipeline transfers
  double dp = 0;                  // exposed gradient collectives after the last backward
  double compute() const { return attention_mlp + residual + tp + cp + ep; }
  double total() const { return compute() + bubble + pp + dp; }
};
// The three answers to "what does AttnRes add to a step" side by side (docs/math.md §3.8):
//   time_model  forward only, one device, the mechanism as one memory-bound op moving the I/O of
//               docs/math.md §3.1 (attnres cost / stack_time);
//   strategy    forward + backward, one device, the strategy's kernels with their launch floors,
//               no pipeline (attnres strategies / strategy_step);
//   step        the simulated step: per rank (÷ t·c), the strategy's kernels, bubbles and exposed
//               communication — the number that answers the question; its parts below sum to it.
struct StepReconciliation {
  double time_model = 0, strategy = 0, step = 0;
  // The step's overhead split, each a fraction of the standard step: mechanism kernels on the
  // busiest rank, exposed pipeline traffic, the bubble, exposed gradient collectives, the rest
  // (tensor, context and expert collectives and attention/MLP, 0 unless the busiest rank moved).
  double residual = 0, pp = 0, bubble = 0, dp = 0, other = 0;
};

struct PipelineReport {
  PipelineSettings settings;
  PipelineSimResult attnres;              // the AttnRes run
  PipelineSimResult standard;             // the same run with the standard residual
  double ideal_links_seconds = 0;         // the AttnRes run with free transfers
  double link_bandwidth = 0;              // bytes/s per direction actually used
  double iteration_time_s = 0;            // the simulated pipeline (no dp collectives)
  double step_time_s = 0;                 // iteration + exposed dp collectives
  StepParts step_attnres, step_standard;  // the step's parts, each run's busiest rank
  StepReconciliation reconciliation;
  std::string stage_warning;   // stage_split_warning: "" when every chunk holds whole layers
  double bubble_fraction = 0;  // of the busiest rank's compute time
  double exposed_comm_s = 0;   // iteration - iteration with free transfers
  double attnres_overhead_fraction = 0;   // step / standard step - 1
  double peak_memory_bytes_per_rank = 0;  // simulated_peak_bytes: the largest rank's whole memory
  double closed_form_bubble = 0;
  std::vector<double> chunk_forward_seconds;  // AttnRes run
  std::vector<double> boundary_bytes;         // AttnRes run, per forward boundary
  // Memory per rank (rank_memory.hpp) with the activations and AttnRes history at the simulated
  // peak, and the device capacity of the hardware.
  std::vector<RankMemory> memory;
};

// Throws attnres::Error on impossible settings (m < 1, 1f1b with V > 1, zero bandwidth without
// ideal links).
// The input rules of the pipeline simulation, one place for scenario files, `attnres pipeline`
// and the GUI (docs/math.md §3.4): the first problem, `field` the PipelineSettings member
// ("microbatches", ...), so the caller names its own key, flag or input (the MoE shape and the
// rest of the model are CostInputs, checked by resolve_cost_inputs).
//   Pipeline: any mode (standard: the comparison run alone); 1 <= m <= kMaxMicrobatches; m x P·V <=
//   kMaxPipelinePairs; the 1f1b schedule needs V = 1; a link bandwidth override is > 0 (or absent:
//   0); L at most kMaxStrategySublayers (the strategy's kernels are listed per read).
inline constexpr int kMaxMicrobatches = 1'000'000;
// kMaxPipelinePairs and kPipelineBytesPerPair: pipeline_sim.hpp (memory_per_rank simulates too).
std::optional<CostInputProblem> pipeline_settings_problem(const PipelineSettings& settings);
// The schedule a run gets when none is asked for: interleaved when V > 1, else 1f1b.
PipelineSchedule default_pipeline_schedule(std::int64_t vpp);

PipelineReport evaluate_pipeline(const PipelineSettings& settings);

// Whether the pipeline transfers of the settings go over NVLink: the link asked for, or where
// the stages sit (pipeline_group_span, rank_memory.hpp: the t·c·D·P world within one node).
bool pipeline_link_intra_node(const PipelineSettings& settings);

// The memory settings of a simulated run (its m, schedule, mode, strategy, cache, allowance and
// the hardware's capacity): memory_per_rank with these is the report's memory.
MemorySettings memory_settings(const PipelineSettings& settings);

// The largest total of report.memory over the ranks (weights, gradients, optimizer state,
// activations and AttnRes history at the simulated peak): what a fit verdict of a simulated
// schedule compares with the device's capacity (docs/math.md §3.7).
double simulated_peak_bytes(const PipelineReport& report);

}  // namespace attnres
