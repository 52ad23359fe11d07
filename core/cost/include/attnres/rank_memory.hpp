// Memory per rank and communication per step of a parallel training (or inference) run
// (docs/math.md §3.7): weights, gradients and optimizer states under tensor, expert, pipeline
// and data parallelism with ZeRO; activations of every layer kind per micro-batch (Korthikanti
// et al. 2022, term by term, with tensor and sequence parallelism, context parallelism and
// selective or full recompute) times the micro-batches the schedule keeps in flight; the AttnRes
// history and the tensors the implementation strategy saves for backward; the KV cache of
// inference; and the bytes each parallel group moves per step.
//
//   CostInputs in = resolve_cost_inputs(model_and_parallel_degrees);
//   MemorySettings s;  s.capacity_bytes = load_hardware("h100").memory_bytes;
//   RankMemory worst = peak_rank_memory(in, s);
//   worst.total(); worst.fits();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/hardware.hpp"
#include "attnres/pipeline_sim.hpp"
#include "attnres/strategy.hpp"

namespace attnres {

enum class Workload { training, inference };
inline constexpr EnumNames<Workload, 2> kWorkloadNames{
    {{Workload::training, "training"}, {Workload::inference, "inference"}}};

// ------------------------------------------------------------------ model states (ZeRO)
// Bytes per rank of weights, gradients and optimizer states for Ψ parameters replicated over a
// data-parallel group of `group` ranks: b·Ψ + b·Ψ + K·Ψ, with stage 1 sharding the optimizer, 2
// also the gradients, 3 also the weights over the group (Rajbhandari et al. 2020, Figure 1: 7.5B
// parameters, N_d = 64, K = 12: 120, 31.4, 16.6 and 1.9 GB).
struct ModelStates {
  double weights = 0, gradients = 0, optimizer = 0;
  double total() const { return weights + gradients + optimizer; }
};
ModelStates model_state_bytes(double parameters, int bytes_per_element, double optimizer_bytes,
                              int zero_stage, double group);

// ------------------------------------------------------------------ activations
// Bytes one sublayer (1-based; odd: attention, even: MLP) keeps for backward for one micro-batch
// of B sequences on one rank, under the inputs' t, sequence parallelism, c and recompute policy
// (recompute full: see layer_input_bytes). GeLU with dropout reproduces Korthikanti et al.'s
// Table 2 exactly: per layer s·b·h·(34 + 5as/h) without parallelism, (10 + 24/t + 5as/(ht)) with
// tensor parallelism, 34/t + 5as/(ht) with sequence parallelism too, and without the 5as/h
// terms under selective recompute.
double sublayer_activation_bytes(const CostInputs& resolved, std::int64_t sublayer);
// Full recompute keeps each layer's input only: B·(T/c)·d·b bytes per layer (÷ t with sequence
// parallelism), plus one layer's activations while it is recomputed.
double layer_input_bytes(const CostInputs& resolved);
// Tokens one rank holds per micro-batch of one sequence-parallel shard: B·T/c (÷ t when the
// residual stream is split by sequence).
double local_tokens(const CostInputs& resolved, bool split_by_tp);

// ------------------------------------------------------------------ memory per rank
struct MemorySettings {
  Workload workload = Workload::training;
  int microbatches = 8;  // per step, for the in-flight count
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  ResidualMode mode = ResidualMode::block;  // standard: no AttnRes history
  Strategy strategy = Strategy::fused_two_phase;
  double capacity_bytes = 0;  // device memory; 0 = unknown
};

struct RankMemory {
  int rank = 0;  // pipeline rank (0 = first stage)
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, attnres_history = 0,
         kv_cache = 0;
  double total() const {
    return weights + gradients + optimizer + activations + attnres_history + kv_cache;
  }
  double capacity = 0;
  bool known_capacity() const { return capacity > 0; }
  bool fits() const { return !known_capacity() || total() <= capacity; }
  double margin() const { return capacity - total(); }  // < 0: over by this much
  // What the rank holds.
  std::int64_t sublayers = 0;                // of the model, over its V chunks
  double parameters = 0;                     // dense ÷ t plus routed experts ÷ e
  double in_flight = 0;                      // micro-batches whose activations it holds at the peak
  double dense_group = 1, expert_group = 1;  // the ZeRO sharding groups
};

// One entry per pipeline rank, in rank order. Throws attnres::Error for L above
// kMaxStrategySublayers (every sublayer is visited).
std::vector<RankMemory> memory_per_rank(const CostInputs& resolved, const MemorySettings& settings);
// The rank with the largest total.
RankMemory peak_rank_memory(const CostInputs& resolved, const MemorySettings& settings);
// Micro-batches rank r holds at its peak: 1F1B min(m, P - r); interleaved Megatron-LM's warm-up
// (min(m·V, 2(P - r - 1) + (V - 1)P) + 1 chunk passes) divided by V.
double in_flight_microbatches(PipelineSchedule schedule, std::int64_t pp, std::int64_t vpp,
                              int microbatches, std::int64_t rank);
// The assumptions behind the numbers, one line each, for reports.
std::vector<std::string> memory_assumptions(const CostInputs& resolved,
                                            const MemorySettings& settings);
// "fits: 61.2 GB of 80 GB, 18.8 GB spare" / "does not fit: 2999 GB of 80 GB, over by 2919 GB".
std::string fit_verdict(const RankMemory& memory);

// ------------------------------------------------------------------ communication per step
// Bytes one rank sends per training step in each parallel group (ring collectives: all-reduce
// 2(n-1)/n, reduce-scatter or all-gather (n-1)/n of the buffer, all-to-all (n-1)/n), and the time
// at the group's link bandwidth if none of it overlaps compute.
struct CommTerm {
  std::string group;  // "tp", "cp", "ep", "dp", "pp", "pp_attnres"
  std::string what;   // "all-reduce of attention and MLP outputs (forward and backward)"
  double bytes = 0;   // per rank per step
  std::int64_t ranks = 1;
  bool intra_node = true;
  double seconds = 0;
};
std::vector<CommTerm> step_communication(const CostInputs& resolved, const Hardware& hardware,
                                         int microbatches, ResidualMode mode);

// The parallel groups whose collectives run inside a step (pipeline transfers are simulated).
enum class CommGroup { tp, cp, ep, dp };
inline constexpr EnumNames<CommGroup, 4> kCommGroupNames{
    {{CommGroup::tp, "tp"}, {CommGroup::cp, "cp"}, {CommGroup::ep, "ep"}, {CommGroup::dp, "dp"}}};
// Ranks in one group (dp: the data- and context-parallel ranks that share weights), and the
// consecutive ranks it spans (tp innermost, then cp, then dp): NVLink when the span fits a node.
std::int64_t comm_group_ranks(const CostInputs& resolved, CommGroup group);
std::int64_t comm_group_span(const CostInputs& resolved, CommGroup group);
// Time of `bytes` per rank over the group's link, none of it overlapped.
double collective_seconds(const CostInputs& resolved, const Hardware& hardware, CommGroup group,
                          double bytes);
// Bytes one rank sends for one sublayer (1-based) and one micro-batch, forward and backward (the
// recomputed forward of full recompute counts in the backward): tp the all-reduce of attention
// and dense-MLP outputs, cp the ring exchange of keys and values, ep the all-to-all of the routed
// tokens. step_communication sums these over the busiest rank.
struct PassBytes {
  double forward = 0, backward = 0;
  double total() const { return forward + backward; }
};
struct SublayerComm {
  PassBytes tp, cp, ep;
  PassBytes& of(CommGroup g) { return g == CommGroup::tp ? tp : g == CommGroup::cp ? cp : ep; }
  const PassBytes& of(CommGroup g) const {
    return g == CommGroup::tp ? tp : g == CommGroup::cp ? cp : ep;
  }
};
SublayerComm sublayer_communication(const CostInputs& resolved, std::int64_t sublayer);

}  // namespace attnres
