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
#include <optional>
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
// What a device holds beyond the tensors a step needs, and the headroom the user keeps
// (docs/math.md §3.7, "Reserve and capacity"): the runtime's fixed share (CUDA context, cuBLAS and
// attention workspaces, NCCL's communication buffers), the caching allocator's reserve beyond what
// tensors hold (fragmentation, as a fraction of the tensors), and a margin kept free. A fit verdict
// asks tensors + reserve + margin <= capacity.
inline constexpr double kDefaultRuntimeBytes = 1.5 * 1024 * 1024 * 1024;  // 1.5 GiB
inline constexpr double kDefaultFragmentation = 0.05;
struct MemoryAllowance {
  double runtime_bytes = kDefaultRuntimeBytes;
  double fragmentation = kDefaultFragmentation;
  double margin_bytes = 0;
};
// The first problem with an allowance (negative or non-finite figures, fragmentation >= 1), the
// field named as the MemoryAllowance member; nullopt when it is usable.
std::optional<CostInputProblem> memory_allowance_problem(const MemoryAllowance& allowance);

struct MemorySettings {
  Workload workload = Workload::training;
  int microbatches = 8;  // per step, for the in-flight count
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  ResidualMode mode = ResidualMode::block;  // standard: no AttnRes history
  Strategy strategy = Strategy::fused_two_phase;
  CachePolicy cache = CachePolicy::cached;  // the history a rank receives (and so holds)
  MemoryAllowance allowance;
  double capacity_bytes = 0;  // device memory; 0 = unknown
};

struct RankMemory {
  int rank = 0;  // pipeline rank (0 = first stage)
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, attnres_history = 0,
         kv_cache = 0;
  double logits = 0;   // the loss buffers of the last stage (cross_entropy, cost.hpp)
  double reserve = 0;  // runtime + fragmentation x tensors (MemoryAllowance)
  // What the step's tensors hold at the peak.
  double tensors() const {
    return weights + gradients + optimizer + activations + attnres_history + kv_cache + logits;
  }
  double total() const { return tensors() + reserve; }
  double capacity = 0;
  double headroom = 0;  // the margin the user keeps free (MemoryAllowance::margin_bytes)
  bool known_capacity() const { return capacity > 0; }
  bool fits() const { return !known_capacity() || total() + headroom <= capacity; }
  // Spare after the margin; < 0: over by this much.
  double margin() const { return capacity - headroom - total(); }
  // What the rank holds.
  std::int64_t sublayers = 0;                // of the model, over its V chunks
  double parameters = 0;                     // dense ÷ t plus routed experts ÷ e
  double in_flight = 0;                      // micro-batches whose activations it holds at the peak
  double dense_group = 1, expert_group = 1;  // the ZeRO sharding groups
};

// What chunk c (0-based, P·V of them) holds for one micro-batch of training from its forward's
// start to its backward's end: the activations of its sublayers, and the AttnRes history it
// received (sent_vectors under the cache policy) with the tensors the strategy saves for
// backward. The pipeline simulation and memory_per_rank both take their memory from here.
struct ChunkMemory {
  double activations = 0, attnres = 0;
};
std::vector<ChunkMemory> chunk_memory(const CostInputs& resolved, const MemorySettings& settings);
// The loss buffers of one micro-batch on the last stage: B·T/c tokens x v/t rows x the cross
// entropy's bytes per logit (0 without a vocabulary).
double logits_bytes(const CostInputs& resolved);

// The one memory model (docs/math.md §3.7): one entry per pipeline rank, in rank order. Training:
// the model states, the activations and AttnRes history at the peak of the schedule as the
// pipeline simulation places it (chunk_memory over simulate_pipeline: the same peak `attnres
// pipeline` reports), the loss buffers on the last stage and the reserve. Inference: weights, KV
// cache, one layer's prefill activations. Throws attnres::Error for L above kMaxStrategySublayers
// (every sublayer is visited).
std::vector<RankMemory> memory_per_rank(const CostInputs& resolved, const MemorySettings& settings);
// The rank with the largest total of `ranks` (throws attnres::Error when empty).
const RankMemory& largest_rank(const std::vector<RankMemory>& ranks);
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
  std::int64_t nics = 1;  // NICs per node a ring over nodes runs on (group_bandwidth)
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
// How many ranks apart a group's members sit (tp and ep 1, cp and dp t; ep is folded into the
// t·c·D ranks of a stage).
std::int64_t comm_group_stride(const CostInputs& resolved, CommGroup group);
// Members of a group (`ranks`, `stride` apart) that share one node: at least 1, at most `ranks`.
std::int64_t group_ranks_per_node(const Hardware& hardware, std::int64_t ranks,
                                  std::int64_t stride);
// The bandwidth per rank a group's collective runs at (docs/math.md §3.7, "Communication"): NVLink
// when the group fits a node; over nodes, a ring collective (all-reduce, reduce-scatter,
// all-gather: `ring`) runs as parallel rings on the NICs of the group's ranks in each node, so
// min(NVLink, ranks per node x one NIC); an all-to-all or a point-to-point transfer leaves through
// each GPU's own NIC.
double group_bandwidth(const Hardware& hardware, std::int64_t ranks, std::int64_t stride,
                       bool ring);
// The ranks the pipeline's neighbours span (P outermost): the whole t·c·D·P world, so the
// stages share a node only when the world fits in one.
std::int64_t pipeline_group_span(const CostInputs& resolved);
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
