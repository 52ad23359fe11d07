// The analytical cost engine (docs/math.md §3): memory I/O of the residual mechanism, stored depth
// history, prefill memory, pipeline communication of block representations (the paper's
// accounting and the exact per-boundary payloads, pipeline_payload.hpp), depth-attention
// arithmetic, scaling-law arithmetic. Small pure functions, one per formula, each citing its
// source.
//
// Units are in the names: `_elements` are vector elements per token (multiply by B·T·b for
// bytes), `_bytes` are bytes, `_vectors` count d-wide vectors.
//
//   CostInputs in;  in.sublayers = 128;  in.blocks = 8;  in.d_model = 7168;
//   CostReport report = evaluate_costs(resolve_cost_inputs(in));
//   report.io.block_two_phase.total();   // 5.5 * 7168 elements per token per sublayer
//
// Any residual scheme (docs/scheme-costs.md): scheme_cost(parse_scheme_spec("block:gate=sigmoid",
// inputs), inputs) gives its I/O with the formula, stored history, parameters, mixing FLOPs and
// whether the two-phase schedule applies.
//
// Implemented by job (core/cost/src): cost_io.cpp (data types, I/O, history, prefill),
// pipeline_payload.cpp (pipeline_payload.hpp), cost_flops.cpp (source pairs, FLOPs, scaling law),
// scheme_cost.cpp and named_schemes.cpp (every residual scheme), cost.cpp (inputs, evaluate_costs).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnres/enum_names.hpp"
#include "attnres/error.hpp"
#include "attnres/pipeline_payload.hpp"
#include "attnres/residual_scheme.hpp"

namespace attnres {

// ------------------------------------------------------------------ data types (docs/math.md §1)
enum class DType { bf16, fp16, fp32, fp8 };
inline constexpr EnumNames<DType, 4> kDTypeNames{
    {{DType::bf16, "bf16"}, {DType::fp16, "fp16"}, {DType::fp32, "fp32"}, {DType::fp8, "fp8"}}};
std::string to_string(DType dtype);
DType parse_dtype(const std::string& text, const std::string& where);
int bytes_per_element(DType dtype);

// ------------------------------------------------- architecture and parallelism (docs/math.md
// §3.7) The attention of a layer: multi-head (H_kv = H), grouped-query (1 < H_kv < H), multi-query
// (H_kv = 1), multi-head latent attention (DeepSeek's MLA: a cached latent of d_c + d_r elements
// per token) or linear attention with a fixed-size state per head (Kimi Delta Attention, KDA).
enum class AttentionKind { mha, gqa, mqa, mla, linear };
inline constexpr EnumNames<AttentionKind, 5> kAttentionKindNames{
    {{AttentionKind::mha, "mha"},
     {AttentionKind::gqa, "gqa"},
     {AttentionKind::mqa, "mqa"},
     {AttentionKind::mla, "mla"},
     {AttentionKind::linear, "linear"}}};
// The MLP: SwiGLU (three d x F matrices, Llama) or the GPT-style GeLU MLP (two, F = 4d, with the
// dropout Korthikanti et al. count).
enum class MlpKind { swiglu, gelu };
inline constexpr EnumNames<MlpKind, 2> kMlpKindNames{
    {{MlpKind::swiglu, "swiglu"}, {MlpKind::gelu, "gelu"}}};
// Activation recomputation (Korthikanti et al. 2022): none, selective (the attention scores,
// softmax and dropout are recomputed) or full (only each layer's input is kept).
enum class RecomputePolicy { none, selective, full };
inline constexpr EnumNames<RecomputePolicy, 3> kRecomputePolicyNames{
    {{RecomputePolicy::none, "none"},
     {RecomputePolicy::selective, "selective"},
     {RecomputePolicy::full, "full"}}};
// How the loss is formed from the logits (docs/math.md §3.7, "Logits and loss"): what the last
// stage holds per logit element (B·T/c tokens x v/t vocabulary rows) from the LM head's forward
// to its backward. unfused: PyTorch's cross_entropy on an fp32 copy (torchtitan's default) —
// log-softmax's saved fp32 output, its incoming fp32 gradient and the fp32 gradient it forms,
// 12 bytes; fused: Megatron-LM's vocab-parallel cross entropy, one fp32 buffer updated in place
// plus the b-byte logits, 4 + b bytes; chunked: the logits are formed and consumed a chunk of
// tokens at a time (Liger kernel, cut cross-entropy): no whole-sequence buffer, 0.
enum class CrossEntropy { unfused, fused, chunked };
inline constexpr EnumNames<CrossEntropy, 3> kCrossEntropyNames{
    {{CrossEntropy::unfused, "unfused"},
     {CrossEntropy::fused, "fused"},
     {CrossEntropy::chunked, "chunked"}}};
// On or off (sequence parallelism).
inline constexpr EnumNames<bool, 2> kSwitchNames{{{true, "on"}, {false, "off"}}};

// ------------------------------------------------------------------ memory I/O (docs/math.md §3.1)
// Reads and writes of the residual mechanism per token per sublayer, in elements; the I/O inside
// f_l is excluded (paper Table 1).
struct ResidualIo {
  double reads = 0;
  double writes = 0;
  double total() const { return reads + writes; }
};
ResidualIo io_standard(std::int64_t d);  // 2d + d = 3d
ResidualIo io_block_two_phase(std::int64_t blocks, std::int64_t block_size,
                              std::int64_t d);  // (N/S + 3)d + 2d
ResidualIo io_full_two_phase(std::int64_t blocks, std::int64_t block_size,
                             std::int64_t d);                           // (S + N - 2)d + 2d
ResidualIo io_full_naive_at(std::int64_t sublayer, std::int64_t d);     // 2(l-1)d + d at sublayer l
ResidualIo io_full_naive_mean(std::int64_t sublayers, std::int64_t d);  // mean over l = 1..L
ResidualIo io_mhc(std::int64_t streams, std::int64_t d);                // (8m+2)d + 2m^2 + 4m

// One-shot Block AttnRes: keys and values of every source of every read, mean over the L + 1 reads,
// plus the output write: (2·n̄ + 1)d with n̄ = depth_read_source_pairs(block) / (L + 1). The
// time model's block_one_shot row (docs/math.md §3.4).
ResidualIo io_block_one_shot(std::int64_t sublayers, std::int64_t block_size, std::int64_t d);
// One-shot Full AttnRes with a sliding window of W outputs (docs/scheme-costs.md): the naive row's
// 2(l-1)d with l - 1 capped at W, mean over l = 1..L: (W(2L - W - 1)/L)d reads + d; W >= L - 1
// gives io_full_naive_mean.
ResidualIo io_full_window_mean(std::int64_t sublayers, std::int64_t window, std::int64_t d);

// Schedule block S (integer) minimising Full two-phase I/O (S + ceil(L/S))d; ties go to the
// smaller S. The continuous optimum is S = N = sqrt(L), 2 sqrt(L) d.
struct ScheduleChoice {
  std::int64_t block_size = 0;
  std::int64_t blocks = 0;
  double io_elements = 0;  // total per token per sublayer
};
ScheduleChoice best_full_schedule_block(std::int64_t sublayers, std::int64_t d);

// N = ceil(L / S).
std::int64_t block_count(std::int64_t sublayers, std::int64_t block_size);

// --------------------------------------------------------------- depth history (docs/math.md §3.2)
std::int64_t history_vectors_full(std::int64_t sublayers);  // L + 1
std::int64_t history_vectors_block(std::int64_t blocks);    // N + 1 (+ the running partial)

// Long-context prefill memory of the block history: B·b·N·T·d bytes, divided by the sequence
// shards, with T replaced by the chunk length when prefill is chunked (paper: T = 128K, N = 8,
// d = 7168, bf16 -> 15.0 GB; 8 shards -> 1.88 GB; 16K chunks as well -> 0.235 GB).
struct PrefillMemory {
  std::int64_t total_bytes = 0;
  std::int64_t per_device_bytes = 0;
  std::int64_t per_device_chunked_bytes = 0;
};
PrefillMemory prefill_history_bytes(std::int64_t batch, std::int64_t tokens, std::int64_t blocks,
                                    std::int64_t d, int bytes_per_element, std::int64_t seq_shards,
                                    std::int64_t chunk_tokens);

// ------------------------------------------------------------------ pipeline (docs/math.md §3.3)
// The paper's accounting (pipeline_comm_paper), how L sublayers split into P·V chunks
// (chunk_last_sublayers) and the exact payload of every stage boundary (BoundaryPayload,
// pipeline_boundaries): pipeline_payload.hpp, included above.

// ------------------------------------------------------------------ arithmetic
// Number of (read, source) pairs over all L + 1 reads: sum_r n_r (the closed forms of
// docs/math.md §2.2–2.3).
std::int64_t depth_read_source_pairs(ResidualMode mode, std::int64_t sublayers,
                                     std::int64_t block_size);
// Depth-attention FLOPs per token: per (read, source) pair 2d for the key's RMS, 2d for the
// score against w*g and 2d for the weighted sum (6d); plus 2d per read for w*g and h = o / l.
double depth_attention_flops(ResidualMode mode, std::int64_t sublayers, std::int64_t block_size,
                             std::int64_t d);
// Forward FLOPs per token of the sublayers themselves for the architecture of the inputs:
// model_flops_per_token(resolved) in architecture.hpp (docs/math.md §3.7).

// (read, source) pairs of Full AttnRes with a sliding window of W outputs: read r (0..L) sees the
// embedding and min(r, W) outputs, so (L + 1) + W(W + 1)/2 + (L - W)W for W <= L (W = 0 or
// W >= L: the unwindowed (L + 1)(L + 2)/2).
std::int64_t depth_read_source_pairs_window(std::int64_t sublayers, std::int64_t window);

// ----------------------------------------------------------------- scaling law (docs/math.md §3.5)
// loss = A · C^(-a), C in PFLOP/s-days (paper Fig. 4).
struct ScalingFit {
  const char* name;
  double A;
  double a;
  double loss_at(double compute) const;
  double compute_for(double loss) const;  // (A / loss)^(1/a)
};
const std::array<ScalingFit, 3>& paper_scaling_fits();  // baseline, block, full
struct ScalingAtLoss {
  double target_loss = 0;
  double compute_baseline = 0, compute_block = 0, compute_full = 0;  // PFLOP/s-days
  double multiplier_block = 0, multiplier_full = 0;  // baseline compute / scheme compute
};
ScalingAtLoss scaling_at_loss(double target_loss);

// ------------------------------------------------------------------ everything at once
// The inputs of `attnres cost` and of a scenario. Fill sublayers (or layers), d_model and blocks
// or block_size; resolve_cost_inputs derives the rest and validates.
struct CostInputs {
  std::int64_t sublayers = 0;     // L
  std::int64_t layers = 0;        // transformer layers (L = 2 x layers) when sublayers is 0
  std::int64_t d_model = 0;       // d
  std::int64_t blocks = 0;        // N
  std::int64_t block_size = 0;    // S
  std::int64_t block_layers = 0;  // transformer layers per block K (S = 2K), instead of S or N
  // Uneven blocks: sublayers per block in model order (sum = L), instead of N, S or K. The closed
  // forms that assume equal blocks then use N = the list's length and S = ceil(L/N); the exact
  // counts (strategies, layout, pipeline boundaries) use the list (block_layout.hpp).
  std::vector<std::int64_t> block_sizes;
  std::int64_t streams = 4;    // m of mHC
  std::int64_t ffn = 0;        // F; 0 = round(8d/3)
  std::int64_t tokens = 4096;  // T
  std::int64_t batch = 1;      // B
  DType dtype = DType::bf16;
  std::int64_t seq_shards = 1;
  std::int64_t chunk = 0;  // chunked prefill length; 0 = no chunking
  std::int64_t pp = 1;     // P
  std::int64_t vpp = 1;    // V

  // Architecture (docs/math.md §3.7). Defaults reproduce the engine's original model: MHA with
  // H·d_h = d and H_kv = H, a dense SwiGLU, no embedding counted.
  AttentionKind attention = AttentionKind::mha;
  std::int64_t heads = 0;          // H; 0 = max(1, d / 128)
  std::int64_t kv_heads = 0;       // H_kv; 0 = H (mha), 1 (mqa); gqa needs it
  std::int64_t head_dim = 0;       // d_h; 0 = d / H (must divide)
  std::int64_t kv_latent = 0;      // MLA d_c; 0 = 512
  std::int64_t rope_dim = 0;       // MLA decoupled RoPE dimensions d_r; 0 = 64
  std::int64_t q_latent = 0;       // MLA query compression rank; 0 = none
  std::int64_t hybrid_period = 0;  // > 0: linear attention except every k-th layer and the last
  // Hybrid by list: the 1-based layers that use `attention`, the others linear (instead of a
  // period).
  std::vector<std::int64_t> full_attention_layers;
  MlpKind mlp = MlpKind::swiglu;
  std::int64_t vocab = 0;  // embedding and LM head rows; 0 = not counted
  // Mixture of experts: experts = 0 is a dense MLP of width ffn.
  std::int64_t experts = 0;       // routed experts
  std::int64_t active = 0;        // routed experts per token (top-k)
  std::int64_t shared = 0;        // always-on experts
  std::int64_t expert_ffn = 0;    // width of one expert
  std::int64_t dense_layers = 0;  // first layers with a dense MLP of width ffn
  // Parallelism (docs/math.md §3.7): world = tp · cp · pp · dp ranks.
  std::int64_t tp = 1;  // tensor parallel
  bool sequence_parallel = true;
  std::int64_t cp = 1;                // context parallel
  std::int64_t ep = 1;                // expert parallel (folded into tp · cp · dp)
  std::int64_t dp = 1;                // data parallel
  std::int64_t zero = 0;              // ZeRO stage 0..3 (3: FSDP-style weight sharding)
  std::int64_t optimizer_bytes = 12;  // K: optimizer bytes per parameter (Adam, mixed precision)
  RecomputePolicy recompute = RecomputePolicy::selective;  // what flash attention does
  CrossEntropy cross_entropy = CrossEntropy::fused;        // the loss buffers (vocab > 0)
  // Pipeline stage layout (docs/math.md §3.3): transformer layers per chunk, in chunk order
  // (P·V entries, sum = the layers), e.g. 7,8,8,8,8,8,8,6; empty = whole layers split as
  // evenly as possible (stage_last_sublayers in pipeline_payload.hpp).
  std::vector<std::int64_t> stage_layers;
};

// An invalid input: `field` is the CostInputs member name, so the CLI can name its flag and a
// scenario its file:line:column.
class CostInputError : public Error {
 public:
  CostInputError(std::string field_name, const std::string& message)
      : Error(message), field(std::move(field_name)) {}
  std::string field;
};
// What is wrong with a setting: the CostInputs field and a message.
struct CostInputProblem {
  std::string field;
  std::string message;
};
// The most sublayers L the cost engine takes (transformer layers: half of it). The closed forms
// stay O(P·V) for any L (a billion one-sublayer blocks evaluate at once); past this bound the
// count of (read, source) pairs (L+1)(L+2)/2 no longer fits 64 bits, so L is refused first, with
// the bound, before N = ceil(L/S) and the other counts are formed. Commands that list every read
// (layout, recompute) have the lower kMaxStrategySublayers (strategy.hpp).
inline constexpr std::int64_t kMaxSublayers = 3'000'000'000;

// Derives sublayers / blocks / block_size / ffn in place and returns the first problem, if any
// (no exception: sweeps reject many settings and stay fast).
std::optional<CostInputProblem> try_resolve_cost_inputs(CostInputs& inputs);
// As try_resolve_cost_inputs, throwing CostInputError. Derives and validates: sizes >= 1,
// L <= kMaxSublayers, N <= L, S
// <= L, consistent N and S when both are given, P·V <= L, chunk <= T, products that fit 64 bits.
// block_layers K becomes S = 2K (and is then cleared); a block_sizes list must sum to L and fixes
// N and S (a given N, S or K must agree with it); a stage_layers list has P·V entries >= 1 that
// sum to the layers ceil(L/2).
CostInputs resolve_cost_inputs(CostInputs inputs);

// ------------------------------------------------------------------ the stage layout
// The chunks of resolved inputs (docs/math.md §3.3), as the last sublayer of each of the P·V
// chunks: the stage_layers list when given, else whole layers split evenly
// (layer_aligned_chunks, pipeline_payload.hpp).
std::vector<std::int64_t> stage_last_sublayers(const CostInputs& resolved);
// Where a stage boundary cuts a layer (its attention on one chunk, its MLP on the next), in words
// for a warning: "the stage boundaries split layers 3 and 5 ...; give more layers than P·V = 8
// chunks"; "" when every chunk holds whole layers.
std::string stage_split_warning(const CostInputs& resolved);
// The exact payload of every stage boundary of the inputs: their block layout (block_sizes, or
// blocks of S; Full: S = 1; standard: the hidden state) over their stage layout.
std::vector<BoundaryPayload> pipeline_boundaries(const CostInputs& resolved, ResidualMode mode);

// ------------------------------------------------------------------ every residual scheme
// The costs of any scheme described by an AttnResConfig (docs/scheme-costs.md, the contract for
// every choice below; docs/schemes.md for the schemes themselves). Sizes: L, d, b and the
// schedule block of Full two-phase (N, S) from CostInputs; Block's S from scheme.block_size (or
// CostInputs::block_size when it is 0); mHC's m from scheme.streams.
struct SchemeCost {
  AttnResConfig scheme;     // as costed (block_size filled in for Block)
  std::string spec;         // canonical spec string, e.g. "block:block_size=16,gate=sigmoid"
  std::string description;  // scheme.describe()
  // Residual memory I/O per token per sublayer, elements (paper Table 1 style), under
  // `io_schedule`.
  ResidualIo io;
  std::string io_formula;   // "(N/S + 5)d"
  std::string io_schedule;  // "two-phase", "one-shot", "running sum", ...
  // The one-shot schedule of the same scheme (every read reads its sources); equals `io` for the
  // schemes without reads over a history (standard, rescaled, mHC).
  ResidualIo io_one_shot;
  std::string io_one_shot_formula;
  // Stored depth history per token: d-wide vectors kept for later reads, and their bytes.
  std::int64_t history_vectors = 0;
  double history_bytes = 0;  // history_vectors · d · b
  std::string history_formula;
  // Parameters the scheme adds to the whole model (every read, or every mHC sublayer).
  double params = 0;
  std::string params_formula;
  // FLOPs of the mixing per token: the whole forward (L sublayers and the final read) and that
  // divided by L. Only terms that scale with d are counted, plus mHC's Sinkhorn (docs/math.md §3).
  double mixing_flops = 0;
  double mixing_flops_per_sublayer = 0;
  std::string flops_formula;
  // Whether the two-phase schedule (docs/math.md §2.4) applies, and why
  // (AttnResConfig::two_phase_limit()).
  bool two_phase = false;
  std::string two_phase_reason;
};

// What is wrong with `scheme` for these sizes (a key that does not apply to its mode, a heads that
// does not divide d, a block size outside 1..L, ...): `field` is the attn_res key.
std::optional<CostInputProblem> scheme_problem(const AttnResConfig& scheme,
                                               const CostInputs& resolved);
// Every cost of `scheme`; throws CostInputError (field = the attn_res key) on a scheme_problem.
SchemeCost scheme_cost(const AttnResConfig& scheme, const CostInputs& resolved);
// The I/O rows only (no text): what evaluate_costs and sweeps use. `one_shot` picks io_one_shot.
ResidualIo scheme_io(const AttnResConfig& scheme, const CostInputs& resolved,
                     bool one_shot = false);

// The named schemes: the modes and the paper's Table 4 ablations, in table order —
//   standard full block denseformer rescaled mhc mhc_static
//   full_sigmoid full_sigmoid_normalized full_no_key_norm full_window full_multihead
//   full_input_query full_scalars block_sigmoid block_sigmoid_normalized block_no_key_norm
//   block_multihead block_input_query block_scalars
// (full_window: W = 8, the paper's "1 + 8"; *_multihead: H = 16 when 16 divides d, else the largest
// divisor of d below 16).
const std::vector<std::string>& scheme_names();
// One line per name: what the ablation changes.
std::string scheme_summary(const std::string& name);
// The scheme a name stands for at these sizes (Block: S = resolved.block_size; mHC: m =
// resolved.streams). Throws CostInputError(field "scheme") for an unknown name.
AttnResConfig named_scheme(const std::string& name, const CostInputs& resolved);
// "NAME[:key=value[,key=value...]]": a named scheme refined by attn_res keys (block_size, gate,
// key_norm, window, heads, query_source, mixing, streams, dynamic, sinkhorn_iterations; booleans
// true/false or on/off), e.g. "block:block_size=4,gate=sigmoid". Throws CostInputError(field
// "scheme" or the key) naming what was expected. The result still needs scheme_problem.
AttnResConfig parse_scheme_spec(const std::string& spec, const CostInputs& resolved);
// The canonical spec of a scheme: the mode and every non-default key.
std::string scheme_spec(const AttnResConfig& scheme);

// The I/O rows a CostReport carries beside its five paper rows: (metric name, named scheme,
// one-shot schedule). Every named scheme except standard, full, block and mhc, whose rows are
// standard, full_two_phase / full_naive, block_two_phase and mhc; plus the one-shot rows of
// DenseFormer and Block AttnRes.
struct SchemeIoKey {
  const char* key;
  const char* scheme;
  bool one_shot;
};
inline constexpr SchemeIoKey kSchemeIoKeys[] = {
    {"denseformer", "denseformer", false},
    {"denseformer_one_shot", "denseformer", true},
    {"rescaled", "rescaled", false},
    {"mhc_static", "mhc_static", false},
    {"block_one_shot", "block", true},
    {"full_sigmoid", "full_sigmoid", false},
    {"full_sigmoid_normalized", "full_sigmoid_normalized", false},
    {"full_no_key_norm", "full_no_key_norm", false},
    {"full_window", "full_window", false},
    {"full_multihead", "full_multihead", false},
    {"full_input_query", "full_input_query", false},
    {"full_scalars", "full_scalars", false},
    {"block_sigmoid", "block_sigmoid", false},
    {"block_sigmoid_normalized", "block_sigmoid_normalized", false},
    {"block_no_key_norm", "block_no_key_norm", false},
    {"block_multihead", "block_multihead", false},
    {"block_input_query", "block_input_query", false},
    {"block_scalars", "block_scalars", false},
};
inline constexpr std::size_t kSchemeIoKeyCount = sizeof(kSchemeIoKeys) / sizeof(kSchemeIoKeys[0]);

struct CostReport {
  CostInputs inputs;  // resolved
  struct {
    ResidualIo standard, block_two_phase, full_two_phase, full_naive, mhc;
  } io;  // elements per token per sublayer
  // One row per entry of kSchemeIoKeys, in that order: elements per token per sublayer.
  std::array<ResidualIo, kSchemeIoKeyCount> scheme_io{};
  ScheduleChoice full_best_schedule;
  std::int64_t history_full_vectors = 0, history_block_vectors = 0;
  PrefillMemory prefill;
  PipelineCommPaper pipeline_paper;
  std::vector<BoundaryPayload> boundaries;  // block layout
  std::int64_t boundary_naive_elements = 0, boundary_cached_elements = 0,
               boundary_cached_own_elements = 0;  // sums over boundaries x d
  std::int64_t boundary_peak_naive_elements = 0, boundary_peak_cached_elements = 0;
  double depth_flops_full = 0, depth_flops_block = 0, model_flops = 0;
};
CostReport evaluate_costs(const CostInputs& resolved);

}  // namespace attnres
