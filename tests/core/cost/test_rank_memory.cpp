// Memory per rank, activations, architecture counts and communication (rank_memory.hpp,
// architecture.hpp; docs/math.md §3.7) against published numbers: the ZeRO paper's model-state
// example, Korthikanti et al. 2022 Table 2, the published parameter counts and KV caches of
// Llama-3-70B and DeepSeek-V3, and Megatron-LM's in-flight micro-batches.
#include <gtest/gtest.h>

#include "attnres/architecture.hpp"
#include "attnres/cost.hpp"
#include "attnres/rank_memory.hpp"
#include "published_models.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_rank_memory {

// Rajbhandari et al. 2020 (ZeRO), Figure 1: Ψ = 7.5B, N_d = 64, K = 12, fp16 weights and
// gradients: 120 GB, 31.4 GB, 16.6 GB and 1.9 GB for stages 0..3.
TEST(ModelStates, ZeroPaperExample) {
  const double psi = 7.5e9;
  const double expected[] = {120.0, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    const ModelStates s = model_state_bytes(psi, 2, 12, stage, 64);
    // Printed to one decimal: half a unit of the last digit.
    EXPECT_NEAR(s.total() / 1e9, expected[stage], 0.05) << "stage " << stage;
  }
  EXPECT_DOUBLE_EQ(model_state_bytes(psi, 2, 12, 0, 64).total(), 16 * psi);
  EXPECT_DOUBLE_EQ(model_state_bytes(psi, 2, 12, 3, 64).total(), 16 * psi / 64);
  // Stage 1 shards only the optimizer: 2Ψ + 2Ψ + KΨ/N_d.
  EXPECT_DOUBLE_EQ(model_state_bytes(psi, 2, 12, 1, 64).optimizer, 12 * psi / 64);
  EXPECT_DOUBLE_EQ(model_state_bytes(psi, 2, 12, 1, 64).gradients, 2 * psi);
}

// The GPT layer of Korthikanti et al. 2022 (GeLU MLP F = 4h with dropout, fp16).
CostInputs gpt_layer(std::int64_t tp, bool sp, RecomputePolicy recompute) {
  CostInputs in;
  in.layers = 1;
  in.d_model = 12288;  // 175B: h = 12288, a = 96, s = 2048 (Table 3)
  in.heads = 96;
  in.tokens = 2048;
  in.batch = 1;
  in.blocks = 1;
  in.mlp = MlpKind::gelu;
  in.dtype = DType::fp16;
  in.tp = tp;
  in.sequence_parallel = sp;
  in.recompute = recompute;
  return resolve_cost_inputs(in);
}

double layer_bytes(const CostInputs& in) {
  return sublayer_activation_bytes(in, 1) + sublayer_activation_bytes(in, 2);
}

// Table 2: activation memory per transformer layer.
TEST(Activations, KorthikantiTable2) {
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  const double sbh = s * b * h;
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(1, false, RecomputePolicy::none)),
                   sbh * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, false, RecomputePolicy::none)),
                   sbh * (10 + 24 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, true, RecomputePolicy::none)),
                   sbh * (34 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, false, RecomputePolicy::selective)),
                   sbh * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, true, RecomputePolicy::selective)), sbh * 34 / t);
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, false, RecomputePolicy::full)), 2 * sbh);
  EXPECT_DOUBLE_EQ(layer_bytes(gpt_layer(8, true, RecomputePolicy::full)), 2 * sbh / t);
}

// docs/math.md §3.7: the SwiGLU layer (no dropout, H·d_h = h, H_kv = H, F = 8h/3, bf16) keeps
// s·b·h·(8 + 24/t) bytes with the scores recomputed (selective, as flash attention does).
TEST(Activations, SwigluEquivalent) {
  CostInputs in;
  in.layers = 1;
  in.d_model = 3072;  // F = 8192
  in.heads = 24;
  in.tokens = 4096;
  in.blocks = 1;
  in.tp = 4;
  in.sequence_parallel = false;
  in = resolve_cost_inputs(in);
  const double sbh = 4096.0 * 3072.0;
  EXPECT_DOUBLE_EQ(layer_bytes(in), sbh * (8 + 24.0 / 4));
  in.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(layer_bytes(in), sbh * 32.0 / 4);
}

CostInputs llama3_70b() {
  CostInputs in;
  in.layers = 80;
  in.d_model = 8192;
  in.heads = 64;
  in.kv_heads = 8;
  in.attention = AttentionKind::gqa;
  in.ffn = 28672;
  in.vocab = 128256;
  in.blocks = 8;
  in.tokens = 8192;
  return resolve_cost_inputs(in);
}

CostInputs deepseek_v3() {
  CostInputs in = test::deepseek_v3_shape();
  in.tokens = 4096;
  return resolve_cost_inputs(in);
}

// Published sizes: Llama-3-70B 70.6B parameters (model card); DeepSeek-V3 671B total, 37B
// activated per token (technical report, without the 14B multi-token-prediction module).
TEST(Architecture, PublishedParameterCounts) {
  // Published rounded counts: a unit of 70.6's last digit; the report's 671B and 37B, rounded
  // and counted without some modules, to 1 % and 3 %.
  EXPECT_NEAR(parameter_counts(llama3_70b()).total() / 1e9, 70.6, 0.1);
  const ParameterCounts v3 = parameter_counts(deepseek_v3());
  EXPECT_NEAR(v3.total() / 1e9, 671, 671 * 0.01);
  EXPECT_NEAR((v3.active_per_token + v3.embedding) / 1e9, 37, 37 * 0.03);
}

// KV cache per token: Llama-3-70B 2·8·128 elements x 80 layers x 2 bytes = 320 KiB; DeepSeek-V3
// (d_c + d_r) = 576 elements x 61 layers x 2 bytes = 70,272 bytes (the MLA paper's 70 KB).
TEST(Architecture, KvCachePerToken) {
  const CostInputs llama = llama3_70b();
  EXPECT_DOUBLE_EQ(80 * kv_cache_bytes_per_sequence(llama, AttentionKind::gqa, 1), 327680);
  const CostInputs v3 = deepseek_v3();
  EXPECT_DOUBLE_EQ(61 * kv_cache_bytes_per_sequence(v3, AttentionKind::mla, 1), 70272);
}

// The defaults reproduce the engine's original model: 8d² + 2Td attention, 6dF SwiGLU.
TEST(Architecture, DefaultsAreTheOriginalModel) {
  CostInputs in;
  in.sublayers = 8;
  in.d_model = 1024;
  in.blocks = 2;
  in.tokens = 4096;
  in = resolve_cost_inputs(in);
  const double d = 1024, F = 1024 * 8 / 3, T = 4096;
  EXPECT_DOUBLE_EQ(model_flops_per_token(in), 4 * (8 * d * d + 2 * T * d) + 4 * (6 * d * F));
}

// Hybrid: every fourth layer and the last keep `attention` (Kimi Linear 48B: 27 layers, MLA on
// 4, 8, ..., 24 and 27).
TEST(Architecture, HybridPeriod) {
  CostInputs in;
  in.layers = 27;
  in.d_model = 2304;
  in.heads = 32;
  in.head_dim = 128;
  in.attention = AttentionKind::mla;
  in.hybrid_period = 4;
  in.blocks = 9;
  in = resolve_cost_inputs(in);
  EXPECT_EQ(count_attention_layers(in, AttentionKind::mla), 7);
  EXPECT_EQ(count_attention_layers(in, AttentionKind::linear), 20);
  EXPECT_EQ(layer_attention(in, 27), AttentionKind::mla);
  EXPECT_EQ(layer_attention(in, 26), AttentionKind::linear);
  CostInputs listed = in;
  listed.hybrid_period = 0;
  listed.full_attention_layers = {4, 8, 12, 16, 20, 24, 27};
  listed = resolve_cost_inputs(listed);
  for (std::int64_t layer = 1; layer <= 27; ++layer)
    EXPECT_EQ(layer_attention(listed, layer), layer_attention(in, layer)) << layer;
}

TEST(Architecture, RefusesWhatDoesNotApply) {
  CostInputs in = deepseek_v3();
  in.kv_heads = 8;
  EXPECT_EQ(try_resolve_cost_inputs(in)->field, "kv_heads");
  CostInputs dense;
  dense.layers = 4;
  dense.d_model = 256;
  dense.blocks = 2;
  dense.active = 2;
  EXPECT_EQ(try_resolve_cost_inputs(dense)->field, "active");
  CostInputs ep = deepseek_v3();
  ep.ep = 3;
  EXPECT_EQ(try_resolve_cost_inputs(ep)->field, "ep");
  CostInputs zero = deepseek_v3();
  zero.zero = 1;
  EXPECT_EQ(try_resolve_cost_inputs(zero)->field, "zero");
}

// Megatron-LM: 1F1B keeps min(m, P - r) micro-batches on rank r; interleaving keeps
// P + (P - 1)/V on the first rank (Narayanan et al. 2021, §2.2).
TEST(RankMemory, InFlightMicrobatches) {
  EXPECT_DOUBLE_EQ(in_flight_microbatches(PipelineSchedule::one_f_one_b, 8, 1, 16, 0), 8);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(PipelineSchedule::one_f_one_b, 8, 1, 16, 7), 1);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(PipelineSchedule::one_f_one_b, 8, 1, 3, 0), 3);
  EXPECT_DOUBLE_EQ(in_flight_microbatches(PipelineSchedule::interleaved, 8, 2, 16, 0), 8 + 7.0 / 2);
}

// The 61-layer MoE question: PP 8 x V 2 at 128k context does not fit an 80 GB H100 as
// given, and fits with TP 8, CP 8, EP 64, DP 8 under ZeRO-1 and full recompute.
TEST(RankMemory, SixtyOneLayerMoeFitsOnceParallelised) {
  CostInputs in = deepseek_v3();
  in.pp = 8;
  in.vpp = 2;
  in.tokens = 131072;
  MemorySettings s;
  s.schedule = PipelineSchedule::interleaved;
  s.capacity_bytes = 80e9;
  const RankMemory as_given = peak_rank_memory(resolve_cost_inputs(in), s);
  EXPECT_FALSE(as_given.fits());
  EXPECT_GT(as_given.weights, 80e9);  // the weights alone do not fit
  in.tp = 8;
  in.cp = 8;
  in.ep = 64;
  in.dp = 8;
  in.zero = 1;
  in.recompute = RecomputePolicy::full;
  const RankMemory parallel = peak_rank_memory(resolve_cost_inputs(in), s);
  EXPECT_TRUE(parallel.fits()) << fit_verdict(parallel);
  // The parts add up, and the weights are the rank's parameters in bf16.
  EXPECT_DOUBLE_EQ(parallel.tensors(), parallel.weights + parallel.gradients + parallel.optimizer +
                                           parallel.activations + parallel.attnres_history +
                                           parallel.kv_cache + parallel.logits);
  // The reserve: the runtime's share plus the allocator's fraction of the tensors.
  EXPECT_DOUBLE_EQ(parallel.total(), parallel.tensors() + kDefaultRuntimeBytes +
                                         kDefaultFragmentation * parallel.tensors());
  EXPECT_DOUBLE_EQ(parallel.weights, 2 * parallel.parameters);
}

// The ranks' parameters add up to the model: dense parts x t, routed experts x e.
TEST(RankMemory, ParametersAddUpOverRanks) {
  CostInputs in = deepseek_v3();
  in.pp = 4;
  in = resolve_cost_inputs(in);
  double sum = 0;
  for (const RankMemory& m : memory_per_rank(in, {})) sum += m.parameters;
  // Parameter counts (integers below 2^53) summed per rank and over the model in another order,
  // ~70 per-layer terms each: 256 u.
  EXPECT_TRUE(test::near_relative(sum, parameter_counts(in).total(), test::roundoffs<double>(256),
                                  0.0, "parameters over ranks"));
}

// Inference holds the weights and the KV cache: Llama-3-70B, B = 1, T = 8192: 80 x 8192 x 4096
// bytes, split over t = 8 (8 KV heads, one per rank).
TEST(RankMemory, InferenceKvCache) {
  CostInputs in = llama3_70b();
  in.tp = 8;
  in = resolve_cost_inputs(in);
  MemorySettings s;
  s.workload = Workload::inference;
  const RankMemory m = peak_rank_memory(in, s);
  EXPECT_DOUBLE_EQ(m.kv_cache, 80.0 * 8192 * 4096 / 8);
  EXPECT_DOUBLE_EQ(m.gradients + m.optimizer, 0);
}

// DP gradient all-reduce: 2(D-1)/D of the rank's gradient bytes.
TEST(Communication, DataParallelAllReduce) {
  CostInputs in = llama3_70b();
  in.dp = 4;
  in = resolve_cost_inputs(in);
  Hardware hw;
  hw.intra_node_bandwidth = 450e9;
  hw.scale_out_bandwidth = 50e9;
  const auto terms = step_communication(in, hw, 1, ResidualMode::block);
  ASSERT_EQ(terms.size(), 1U);
  EXPECT_EQ(terms[0].group, "dp");
  EXPECT_DOUBLE_EQ(terms[0].bytes, 2.0 * 3 / 4 * 2 * parameter_counts(in).total());
}

}  // namespace test_rank_memory
}  // namespace attnres
