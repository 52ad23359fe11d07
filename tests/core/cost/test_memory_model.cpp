// The one memory model (docs/math.md §3.7): `memory`, `pipeline` and `plan` take their memory per
// rank from memory_per_rank, whose activations and AttnRes history are the pipeline simulation's
// peak; the loss buffers, the reserve and the capacity in GiB, each against a hand-worked case.
#include <gtest/gtest.h>

#include "attnres/hardware.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/rank_memory.hpp"
#include "published_models.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_memory_model {

PipelineSettings llama_like(std::int64_t pp, std::int64_t vpp, int m, ResidualMode mode) {
  CostInputs in;
  in.layers = 16;
  in.d_model = 1024;
  in.heads = 8;
  in.kv_heads = 2;
  in.attention = AttentionKind::gqa;
  in.vocab = 32000;
  in.tokens = 2048;
  in.blocks = 4;
  in.pp = pp;
  in.vpp = vpp;
  in.tp = 2;
  PipelineSettings s;
  s.model = resolve_cost_inputs(in);
  s.mode = mode;
  s.microbatches = m;
  s.schedule = default_pipeline_schedule(vpp);
  s.hardware = load_hardware("h100");
  s.record_timeline = false;
  return s;
}

// The same settings give the same memory whether `memory` or `pipeline` asks: every rank's every
// term, bit for bit (one function), and the pipeline's headline is the largest rank's total.
TEST(MemoryModel, MemoryAndPipelineAgreeOnEveryRank) {
  for (const ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
    for (const auto& [P, V, m] : {std::tuple{4, 1, 8}, std::tuple{4, 2, 8}, std::tuple{2, 4, 6}}) {
      const PipelineSettings s = llama_like(P, V, m, mode);
      const PipelineReport report = evaluate_pipeline(s);
      const std::vector<RankMemory> alone = memory_per_rank(s.model, memory_settings(s));
      ASSERT_EQ(alone.size(), report.memory.size());
      double largest = 0;
      for (std::size_t r = 0; r < alone.size(); ++r) {
        EXPECT_EQ(alone[r].activations, report.memory[r].activations) << r;
        EXPECT_EQ(alone[r].attnres_history, report.memory[r].attnres_history) << r;
        EXPECT_EQ(alone[r].total(), report.memory[r].total()) << r;
        largest = std::max(largest, alone[r].total());
        // The simulation with the run's own chunk times places the same peak as the memory
        // model's unit times: a rank runs its ops one at a time in the schedule's order.
        EXPECT_TRUE(test::near_relative(report.attnres.peak_memory_bytes[r],
                                        alone[r].activations + alone[r].attnres_history,
                                        test::roundoffs<double>(64), 0.0, "simulated peak"))
            << "P " << P << " V " << V << " rank " << r;
      }
      EXPECT_EQ(report.peak_memory_bytes_per_rank, largest);
      EXPECT_EQ(simulated_peak_bytes(report), largest);
    }
  }
}

// 1F1B: rank r holds min(m, P - r) micro-batches (Narayanan et al. 2021), so the simulated peak
// of a rank with equal chunks is that many micro-batches' activations.
TEST(MemoryModel, OneFOneBHoldsPMinusRMicrobatches) {
  const PipelineSettings s = llama_like(4, 1, 8, ResidualMode::standard);
  const auto ranks = memory_per_rank(s.model, memory_settings(s));
  for (const RankMemory& m : ranks) {
    EXPECT_TRUE(test::near_relative(m.in_flight, 4.0 - m.rank, test::roundoffs<double>(8), 0.0,
                                    "in flight"));
    EXPECT_EQ(m.attnres_history, 0.0);  // the standard residual keeps no history
  }
}

// The loss buffers, worked by hand: B·T/c = 2048 tokens, v/t = 16000 rows; fused (Megatron):
// 4 + 2 bytes a logit = 196.6 MB; unfused 12 bytes; chunked none; only on the last stage.
TEST(MemoryModel, LossBuffersSitOnTheLastStage) {
  PipelineSettings s = llama_like(4, 1, 8, ResidualMode::block);
  EXPECT_EQ(logits_bytes(s.model), 2048.0 * 16000.0 * 6.0);
  s.model.cross_entropy = CrossEntropy::unfused;
  EXPECT_EQ(logits_bytes(s.model), 2048.0 * 16000.0 * 12.0);
  const auto ranks = memory_per_rank(s.model, memory_settings(s));
  for (const RankMemory& m : ranks)
    EXPECT_EQ(m.logits, m.rank == 3 ? 2048.0 * 16000.0 * 12.0 : 0.0) << m.rank;
  s.model.cross_entropy = CrossEntropy::chunked;
  EXPECT_EQ(logits_bytes(s.model), 0.0);
  s.model.vocab = 0;
  s.model.cross_entropy = CrossEntropy::unfused;
  EXPECT_EQ(logits_bytes(s.model), 0.0);  // no vocabulary counted, no loss buffers
}

// The reserve and the margin: total = tensors + runtime + fragmentation x tensors; the verdict
// keeps the margin free; the capacity is the GiB the device holds.
TEST(MemoryModel, ReserveAndMarginDecideTheVerdict) {
  PipelineSettings s = llama_like(2, 1, 4, ResidualMode::block);
  s.allowance.runtime_bytes = 2e9;
  s.allowance.fragmentation = 0.1;
  MemorySettings settings = memory_settings(s);
  const RankMemory m = memory_per_rank(s.model, settings).front();
  EXPECT_TRUE(test::near_relative(m.reserve, 2e9 + 0.1 * m.tensors(), test::roundoffs<double>(4),
                                  0.0, "reserve"));
  EXPECT_EQ(m.capacity, load_hardware("h100").memory_bytes);
  EXPECT_TRUE(m.fits());
  // A margin larger than the spare turns the verdict, and the verdict says what it kept.
  settings.allowance.margin_bytes = m.capacity - m.total() + 1e6;
  const RankMemory kept = memory_per_rank(s.model, settings).front();
  EXPECT_FALSE(kept.fits());
  EXPECT_NE(fit_verdict(kept).find("keeping"), std::string::npos) << fit_verdict(kept);
  EXPECT_NE(fit_verdict(kept).find("79.19 GiB"), std::string::npos) << fit_verdict(kept);
  settings.allowance.fragmentation = 1.0;
  EXPECT_THROW(memory_per_rank(s.model, settings), Error);
  EXPECT_EQ(memory_allowance_problem(settings.allowance)->field, "fragmentation");
}

// The pipeline link follows where the stages sit unless asked: a world of 8 on an 8-GPU node
// sends over NVLink, 16 over the scale-out network, as the communication table places the group.
TEST(MemoryModel, PipelineLinkIsPlacedWhereTheStagesSit) {
  PipelineSettings s = llama_like(4, 1, 8, ResidualMode::block);  // t 2 x P 4 = 8
  EXPECT_TRUE(pipeline_link_intra_node(s));
  EXPECT_EQ(evaluate_pipeline(s).link_bandwidth, s.hardware.intra_node_bandwidth);
  s.model.dp = 2;
  EXPECT_FALSE(pipeline_link_intra_node(s));
  for (const CommTerm& term : step_communication(s.model, s.hardware, 8, s.mode))
    if (term.group == "pp") EXPECT_FALSE(term.intra_node);
  s.link = PipelineLink::intra_node;
  EXPECT_TRUE(pipeline_link_intra_node(s));
}

}  // namespace test_memory_model
}  // namespace attnres
