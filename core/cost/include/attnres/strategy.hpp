// Implementation strategies of the depth read (docs/math.md §3.6): how an implementation turns
// the same mathematics into kernels, and what each costs in bytes moved, kernel launches,
// temporary memory and tensors kept for the backward pass. The measured overheads of public
// implementations (+7 % to +46 % step time for eager framework code, a few µs per decode call for
// fused kernels) are far above the read's FLOP share; these counts are where the gap comes from.
//
//   stack            framework ops over a list of tensors: every read stacks its n sources into a
//                    new (n, T, d) tensor, normalises the keys, scores, softmax, weighted sum
//                    (5 launches per read, the history copied n times: O(L²) copies for Full).
//   arena            framework ops over a preallocated history buffer: each new source is copied
//                    (or added) into its slot once, reads take views (4 launches per read).
//   fused_one_shot   one kernel per read: norms, scores, softmax and weighted sum in one pass over
//                    the n sources, the store of the newest source fused in.
//   fused_two_phase  one phase-1 kernel per block (or schedule group) for all its reads against the
//                    sources completed before it, one merge kernel per later read (docs/math.md
//                    §2.4).
//
// Counts are d-wide vectors per token (multiply by d · tokens · b for bytes); the n softmax scores
// per read are scalars and left out. Every strategy reads each source of each read at least once
// and writes each read's output once: the inherent I/O, which fused_one_shot attains.
//
//   StrategyCost cost = strategy_cost(Strategy::stack, uniform_block_layout(4, 2));
//   cost.forward.read_vectors;   // 48 (docs/math.md §3.6 works this example by hand)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnres/block_layout.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/hardware.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

enum class Strategy { stack, arena, fused_one_shot, fused_two_phase };
inline constexpr EnumNames<Strategy, 4> kStrategyNames{
    {{Strategy::stack, "stack"},
     {Strategy::arena, "arena"},
     {Strategy::fused_one_shot, "fused_one_shot"},
     {Strategy::fused_two_phase, "fused_two_phase"}}};
std::string to_string(Strategy strategy);
Strategy parse_strategy(const std::string& text, const std::string& where);
// One line: what the strategy does.
std::string strategy_summary(Strategy strategy);

// `count` kernel launches of one shape: what each reads and writes, in d-wide vectors per token.
struct KernelCall {
  std::string op;          // "stack", "norm", "fused_read", "merge", "norm_backward", ...
  std::int64_t read = -1;  // the read r it serves (for a phase-1 kernel: its group's first read)
  std::int64_t read_vectors = 0;   // per launch
  std::int64_t write_vectors = 0;  // per launch
  std::int64_t count = 1;          // launches (autograd's one add per source: n)
  std::int64_t vectors() const { return read_vectors + write_vectors; }  // per launch
};
// Most sublayers the per-read counts take (each read lists its calls).
inline constexpr std::int64_t kMaxStrategySublayers = 100'000;

struct PassCounts {
  std::int64_t read_vectors = 0;
  std::int64_t write_vectors = 0;
  std::int64_t launches = 0;
  std::int64_t temp_vectors = 0;  // peak transient memory of the pass (one read's temporaries)
  std::int64_t vectors() const { return read_vectors + write_vectors; }
};

struct StrategyCost {
  Strategy strategy = Strategy::fused_one_shot;
  BlockLayout layout;  // sources (Full AttnRes: every block of size 1)
  BlockLayout groups;  // two-phase groups (Block: the blocks; Full: schedule groups)
  std::vector<KernelCall> forward_calls, backward_calls;
  PassCounts forward, backward;
  // History copies per forward: stack copies every source into every read's stacked tensor
  // (sum of n_r); the arena-based strategies store each new source once (L + 1).
  std::int64_t copy_vectors = 0;
  // Tensors kept for the backward beyond the stored history: stack the stacked sources and the
  // normalised keys (2n per read), arena the keys (n), fused_two_phase the phase-1 results (1 per
  // read), fused_one_shot nothing (it recomputes norms and scores from the history).
  std::int64_t saved_vectors = 0;
  std::int64_t history_vectors = 0;        // the stored sources: N + 1 blocks (Full: L + 1)
  std::int64_t inherent_read_vectors = 0;  // sum of n_r: each source of each read read once
  std::int64_t reads = 0;                  // L + 1
};

// What one read does, from the scheme (docs/schemes.md): the paper's read normalises the keys,
// scores them against a query and takes a softmax (or sigmoid) before the weighted sum; the
// zoo's variants drop the key norm, replace the scores by learned scalars (DenseFormer, mixing =
// scalars), window the sources (Full, W outputs), or compute the query from the state (one more
// vector read per read, and no two-phase schedule).
struct ReadOps {
  bool key_norm = true;
  bool scores = true;           // false: learned mixing scalars, no key, score or softmax op
  bool input_query = false;     // the query is a projection of the read's latest source
  std::int64_t window = 0;      // Full: the embedding plus the last W outputs (0: all)
  std::string two_phase_limit;  // why fused_two_phase does not apply ("" when it does)
  // How an implementation splits the fused kernels (finish_call: fused_one_shot and
  // fused_two_phase; separate_store: those and stack; attnres's own fast CPU engine does all
  // three, cpu_engine_read_ops):
  //   finish_call     the read kernels write the unnormalised output o, and one call per read
  //                   reads it and writes h = o / l (two-phase: the read's merges and its finish
  //                   are one call; the group's first read gets one too);
  //   separate_store  the read does not store the newest source: Block adds every v_r into its
  //                   block's slot in a call of its own (2 vectors read, 1 written) and zeroes a
  //                   block's slot when the block starts (1 written); Full's sublayer writes its
  //                   own slot (nothing to store);
  //   final_read_in_last_group  two-phase: the final read joins the last group (merging what
  //                   that group's phase 1 did not read) instead of a phase 1 of its own.
  bool finish_call = false;
  bool separate_store = false;
  bool final_read_in_last_group = false;
};
// The paper's read (key norm, scores) as attnres's fast CPU engine runs it
// (engine/cpu/fast_forward.cpp): finish_call, separate_store and final_read_in_last_group.
ReadOps cpu_engine_read_ops();
// The read of a scheme (Full, Block and their ablations, DenseFormer). Throws attnres::Error for
// schemes without reads over a stored history (standard, rescaled running mean, mHC).
ReadOps read_ops_of(const AttnResConfig& scheme);

// The costs of `strategy` over a source layout; `groups` sets the two-phase grouping (default:
// the layout itself, as Block AttnRes does). Throws attnres::Error on an empty layout, more than
// kMaxStrategySublayers sublayers, groups over a different L, or fused_two_phase for a read it
// does not apply to (ops.two_phase_limit).
StrategyCost strategy_cost(Strategy strategy, const BlockLayout& layout,
                           const std::optional<BlockLayout>& groups = std::nullopt,
                           const ReadOps& ops = {});
// The standard residual as the same kind of calls: per sublayer one add (read h and f(h), write
// h'), forward and backward alike: 2 + 1 vectors and one launch each way.
std::vector<KernelCall> standard_residual_calls(std::int64_t sublayers);
PassCounts standard_residual_counts(std::int64_t sublayers);

// Time of a list of calls: sum over calls of max(floor, bytes / (bw · eff_m)), bytes = vectors ·
// d · tokens · b (docs/math.md §3.6). Launch-bound calls are those at the floor.
struct CallTime {
  double seconds = 0;
  double bytes = 0;
  std::int64_t launches = 0;
  std::int64_t floor_bound = 0;  // launches whose time is the floor
};
CallTime calls_time(const std::vector<KernelCall>& calls, std::int64_t d, double tokens,
                    int bytes_per_element, const Hardware& hardware);
// One call's time.
double call_seconds(double bytes, const Hardware& hardware);
// The number of tokens per call above which a call of `vectors` d-wide vectors per token is
// bandwidth-bound rather than floor-bound: floor · bw · eff / (vectors · d · b).
double crossover_tokens(std::int64_t vectors, std::int64_t d, int bytes_per_element,
                        const Hardware& hardware);

// ------------------------------------------------------------------ whole-step comparisons
// What a strategy adds to a training step or an inference call of a model (docs/math.md §3.6):
// the mechanism's time against the standard residual's, and both against the model's own time
// (time_model.hpp's roofline of attention + MLP + standard residual, backward = 2 x forward).
struct StrategyStep {
  Strategy strategy = Strategy::fused_one_shot;
  double tokens = 0;  // tokens per call: B·T for training and prefill, B for decode
  CallTime forward, backward;
  CallTime standard_forward, standard_backward;  // the standard residual's adds
  double model_seconds = 0;      // the model's step (training: forward + backward) with standard
  double overhead_seconds = 0;   // mechanism time - standard residual time
  double overhead_fraction = 0;  // overhead_seconds / model_seconds
};
// mode block or full: full uses every sublayer as a block and, for two-phase, the best schedule
// block (best_full_schedule_block). Training: `phase` prefill with backward; decode: one token
// per sequence, forward only.
StrategyStep strategy_step(Strategy strategy, ResidualMode mode, const CostInputs& resolved,
                           Phase phase, bool training, const Hardware& hardware);
// The same for any scheme with reads (read_ops_of): Block's S from scheme.block_size (or the
// inputs' layout when 0), Full-like schemes over every output.
StrategyStep strategy_step(Strategy strategy, const AttnResConfig& scheme,
                           const CostInputs& resolved, Phase phase, bool training,
                           const Hardware& hardware);
// The source layout and two-phase groups of a mode at these inputs.
BlockLayout mode_layout(ResidualMode mode, const CostInputs& resolved);
BlockLayout mode_groups(ResidualMode mode, const CostInputs& resolved);
// ... and of a scheme (DenseFormer reads every output like Full; Block takes scheme.block_size).
BlockLayout scheme_layout(const AttnResConfig& scheme, const CostInputs& resolved);
BlockLayout scheme_groups(const AttnResConfig& scheme, const CostInputs& resolved);
// The costs of a strategy for a scheme at these inputs (layout, groups and read ops together).
StrategyCost scheme_strategy_cost(Strategy strategy, const AttnResConfig& scheme,
                                  const CostInputs& resolved);

// ------------------------------------------------------------------ recompute / checkpointing
// Memory of one micro-batch's activations and AttnRes history on one pipeline rank, and the
// recompute FLOPs, under three checkpointing policies (docs/math.md §3.6):
//   none     every sublayer's activations (docs/math.md §3.7, Korthikanti et al.) plus the
//            history the chunk received and produced, plus the strategy's saved tensors;
//   layers   keep each transformer layer's input only (Megatron-LM full recompute, uniform, one
//            layer per checkpoint): for AttnRes that input is the partial sum, and the block
//            summaries are kept; one forward of every layer is recomputed;
//   chunk    keep only the history the chunk received; everything the chunk produced, block
//            summaries included, is recomputed (one forward of the chunk) when its backward runs.
enum class Checkpointing { none, layers, chunk };
inline constexpr EnumNames<Checkpointing, 3> kCheckpointingNames{{{Checkpointing::none, "none"},
                                                                  {Checkpointing::layers, "layers"},
                                                                  {Checkpointing::chunk, "chunk"}}};
std::string to_string(Checkpointing policy);

struct RecomputeRank {
  std::int64_t rank = 0;
  std::int64_t chunks = 0;     // chunks (virtual stages) it runs
  std::int64_t sublayers = 0;  // over all its chunks
  // Bytes per micro-batch (B·T tokens) held from a chunk's forward to its backward, all chunks of
  // the rank together, and the transient peak while one chunk recomputes.
  double activation_bytes = 0;
  double history_bytes = 0;
  double saved_bytes = 0;      // the strategy's saved tensors
  double transient_bytes = 0;  // recompute working set (one layer or one chunk)
  double recompute_flops = 0;  // per micro-batch, model + depth attention
  double total_bytes() const { return activation_bytes + history_bytes + saved_bytes; }
};
struct RecomputeReport {
  Checkpointing policy = Checkpointing::none;
  ResidualMode mode = ResidualMode::block;
  Strategy strategy = Strategy::fused_one_shot;
  std::vector<RecomputeRank> ranks;  // (P)
  double forward_flops = 0;          // one micro-batch's forward of the whole model
};
RecomputeReport recompute_report(Checkpointing policy, ResidualMode mode, Strategy strategy,
                                 const CostInputs& resolved);

}  // namespace attnres
