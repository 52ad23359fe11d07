// The schedule simulator against closed forms: bubbles of 1F1B and interleaved 1F1B, uneven
// chunks, Megatron-LM's activation-memory factors, transfers and deadlock detection.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "attnres/cost.hpp"
#include "attnres/error.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/pipeline_sim.hpp"
#include "test_support.hpp"

namespace attnres {
namespace {

// Bounds (docs/testing.md §2). A simulated time is a sum of op durations along a path of at most
// every op of the schedule, a forward and a backward per chunk and micro-batch: n = 2 P V m
// additions, n u relative to the sum. The bubble fraction is that time over the ideal, minus 1:
// its rounding is relative to 1 + the bubble.
double path_bound(int P, int V, int m) {
  return test::roundoffs<double>(2.0 * P * V * m + 2);
}
::testing::AssertionResult near_bubble(double actual, double expected, int P, int V, int m) {
  return test::near_relative(actual, expected, path_bound(P, V, m), 1.0 + expected,
                             "bubble fraction");
}

PipelineSimInputs uniform(int P, int V, int m, PipelineSchedule schedule, double forward = 1.0) {
  PipelineSimInputs in;
  in.ranks = P;
  in.virtual_stages = V;
  in.microbatches = m;
  in.schedule = schedule;
  const auto C = static_cast<std::size_t>(P * V);
  in.forward_seconds.assign(C, forward / V);
  in.backward_seconds.assign(C, 2.0 * forward / V);
  in.boundary_bytes.assign(C - 1, 1000.0);
  in.activation_bytes.assign(C, 1.0);
  in.history_bytes.assign(C, 0.0);
  in.ideal_links = true;
  return in;
}

TEST(PipelineSim, OneFOneBBubbleIsPMinusOneOverM) {
  for (int P : {1, 2, 3, 4, 8}) {
    for (int m : {1, 2, 3, 4, 7, 8, 16, 32}) {  // m < P included
      const auto result = simulate_pipeline(uniform(P, 1, m, PipelineSchedule::one_f_one_b));
      EXPECT_TRUE(near_bubble(result.bubble_fraction,
                              closed_form_bubble(PipelineSchedule::one_f_one_b, P, 1, m), P, 1, m))
          << "P=" << P << " m=" << m;
      EXPECT_TRUE(near_bubble(result.bubble_fraction, static_cast<double>(P - 1) / m, P, 1, m));
    }
  }
}

TEST(PipelineSim, InterleavedBubbleIsPMinusOneOverVM) {
  for (int P : {2, 4, 8}) {
    for (int V : {2, 3, 4}) {
      for (int m : {P, 2 * P, 4 * P}) {
        const auto result = simulate_pipeline(uniform(P, V, m, PipelineSchedule::interleaved));
        EXPECT_TRUE(
            near_bubble(result.bubble_fraction, static_cast<double>(P - 1) / (V * m), P, V, m))
            << "P=" << P << " V=" << V << " m=" << m;
      }
      for (int m = 1; m < P; ++m) {  // fewer micro-batches than ranks
        const auto result = simulate_pipeline(uniform(P, V, m, PipelineSchedule::interleaved));
        EXPECT_TRUE(near_bubble(result.bubble_fraction,
                                closed_form_bubble(PipelineSchedule::interleaved, P, V, m), P, V,
                                m))
            << "P=" << P << " V=" << V << " m=" << m;
      }
    }
  }
}

TEST(PipelineSim, UnevenChunksLieBetweenTheBusiestRankAndThePaddedClosedForm) {
  // L not divisible by P·V: chunks differ by one sublayer. Padding every chunk to the slowest
  // gives equal chunks, where the closed form is exact; shortening ops in a fixed-order schedule
  // never delays completion, so the real schedule lies between its busiest rank's compute and
  // that padded schedule.
  for (int L : {10, 14, 22, 31}) {
    for (auto [P, V, m] : {std::tuple{4, 1, 4}, std::tuple{4, 1, 3}, std::tuple{2, 2, 8},
                           std::tuple{4, 2, 8}, std::tuple{3, 2, 6}}) {
      const auto schedule = V == 1 ? PipelineSchedule::one_f_one_b : PipelineSchedule::interleaved;
      auto in = uniform(P, V, m, schedule);
      const auto last = chunk_last_sublayers(L, P * V);
      double slowest = 0;
      for (std::size_t c = 0; c < last.size(); ++c) {
        const double sublayers = static_cast<double>(last[c] - (c ? last[c - 1] : 0));
        in.forward_seconds[c] = sublayers;
        in.backward_seconds[c] = 2 * sublayers;
        slowest = std::max(slowest, sublayers);
      }
      const auto real = simulate_pipeline(in);
      std::fill(in.forward_seconds.begin(), in.forward_seconds.end(), slowest);
      std::fill(in.backward_seconds.begin(), in.backward_seconds.end(), 2 * slowest);
      const auto padded = simulate_pipeline(in);
      EXPECT_TRUE(
          near_bubble(padded.bubble_fraction, closed_form_bubble(schedule, P, V, m), P, V, m))
          << "L=" << L << " P=" << P << " V=" << V << " m=" << m;
      EXPECT_GE(real.iteration_seconds, real.ideal_seconds);
      // Both are sums along a path of whole sublayer counts (exact), with the rounding slack
      // of such a sum all the same.
      EXPECT_LE(real.iteration_seconds, padded.iteration_seconds * (1 + path_bound(P, V, m)));
    }
  }
}

TEST(PipelineSim, ActivationMemoryMatchesMegatronFactors) {
  // 1F1B: the first stage holds P micro-batches' activations; interleaving multiplies that by
  // 1 + (P - 1)/(P·V) (Narayanan et al. 2021; Korthikanti et al. 2022).
  for (int P : {2, 4, 8}) {
    const auto one = simulate_pipeline(uniform(P, 1, 4 * P, PipelineSchedule::one_f_one_b));
    EXPECT_DOUBLE_EQ(one.peak_activation_bytes[0], P);  // 1 byte per micro-batch per stage
    for (int V : {2, 4}) {
      auto in = uniform(P, V, 4 * P, PipelineSchedule::interleaved);
      in.activation_bytes.assign(static_cast<std::size_t>(P * V), 1.0 / V);  // a stage = V chunks
      const auto result = simulate_pipeline(in);
      // Sums of 1 / V for V = 2, 4: binary fractions, exact (4 ulps).
      EXPECT_DOUBLE_EQ(result.peak_activation_bytes[0], P * (1.0 + (P - 1.0) / (P * V)))
          << "P=" << P << " V=" << V;
    }
  }
}

TEST(PipelineSim, TransfersCostTimeAndAreCounted) {
  auto in = uniform(4, 1, 8, PipelineSchedule::one_f_one_b);
  const double ideal = simulate_pipeline(in).iteration_seconds;
  in.ideal_links = false;
  in.link_bandwidth = 1000.0;  // 1 s per 1000-byte transfer
  in.link_latency = 0.0;
  const auto slow = simulate_pipeline(in);
  EXPECT_GT(slow.iteration_seconds, ideal);
  EXPECT_DOUBLE_EQ(slow.transferred_bytes, 8 * 3 * 2 * 1000.0);  // m x boundaries x both directions
  in.overlap = false;
  EXPECT_GE(simulate_pipeline(in).iteration_seconds, slow.iteration_seconds);
}

TEST(PipelineSim, RejectsImpossibleSchedules) {
  auto in = uniform(4, 2, 8, PipelineSchedule::one_f_one_b);
  EXPECT_THROW(simulate_pipeline(in), Error);  // 1f1b with V = 2
  in = uniform(4, 1, 8, PipelineSchedule::one_f_one_b);
  in.microbatches = 0;
  EXPECT_THROW(simulate_pipeline(in), Error);
  in = uniform(4, 1, 8, PipelineSchedule::one_f_one_b);
  in.ideal_links = false;
  in.link_bandwidth = 0;
  EXPECT_THROW(simulate_pipeline(in), Error);
  EXPECT_THROW(simulate_pipeline(uniform(4, 3, 5, PipelineSchedule::interleaved)),
               Error);  // 5 % 4 != 0
}

TEST(PipelineSim, EveryPermittedInterleavedSettingCompletes) {
  for (int P = 1; P <= 8; ++P) {
    for (int V = 2; V <= 4; ++V) {
      for (int m = 1; m <= 3 * P; ++m) {
        if (m > P && m % P != 0) continue;
        auto in = uniform(P, V, m, PipelineSchedule::interleaved);
        in.record_timeline = false;
        EXPECT_NO_THROW(simulate_pipeline(in)) << "P=" << P << " V=" << V << " m=" << m;
      }
    }
  }
}

}  // namespace
}  // namespace attnres

#include "attnres/pipeline.hpp"

namespace attnres {
namespace {

PipelineSettings kimi_like(std::int64_t P, std::int64_t V, int m, CachePolicy cache) {
  PipelineSettings s;
  CostInputs in;
  in.layers = 27;
  in.block_size = 6;
  in.d_model = 2304;
  in.tokens = 4096;
  in.batch = 1;
  in.pp = P;
  in.vpp = V;
  s.model = resolve_cost_inputs(in);
  s.microbatches = m;
  s.schedule = V == 1 ? PipelineSchedule::one_f_one_b : PipelineSchedule::interleaved;
  s.cache = cache;
  s.hardware = load_hardware("h100");
  return s;
}

TEST(PipelineEvaluate, NaiveAndCachedAreEqualWithOneVirtualStage) {
  const auto naive = evaluate_pipeline(kimi_like(4, 1, 8, CachePolicy::naive));
  const auto cached = evaluate_pipeline(kimi_like(4, 1, 8, CachePolicy::cached));
  EXPECT_EQ(naive.iteration_time_s, cached.iteration_time_s);
  EXPECT_EQ(naive.attnres.transferred_bytes, cached.attnres.transferred_bytes);
  const auto naive2 = evaluate_pipeline(kimi_like(4, 2, 8, CachePolicy::naive));
  const auto cached2 = evaluate_pipeline(kimi_like(4, 2, 8, CachePolicy::cached));
  EXPECT_GT(naive2.attnres.transferred_bytes, cached2.attnres.transferred_bytes);
}

TEST(PipelineEvaluate, TransferVolumeEqualsTheCostEnginesBoundarySums) {
  for (auto cache : {CachePolicy::naive, CachePolicy::cached, CachePolicy::cached_own}) {
    const auto s = kimi_like(4, 2, 8, cache);
    const auto report = evaluate_pipeline(s);
    std::int64_t vectors = 0;
    for (const auto& b : pipeline_boundaries(ResidualMode::block, 54, 6, 4, 2)) {
      vectors += cache == CachePolicy::naive    ? b.naive_vectors
                 : cache == CachePolicy::cached ? b.cached_vectors
                                                : b.cached_own_vectors;
    }
    const double bytes_per_vector = 2304.0 * 4096 * 2;
    // m micro-batches, forward and backward.
    EXPECT_DOUBLE_EQ(report.attnres.transferred_bytes, vectors * bytes_per_vector * 8 * 2);
    EXPECT_DOUBLE_EQ(report.standard.transferred_bytes, 7 * bytes_per_vector * 8 * 2);
  }
}

TEST(PipelineEvaluate, FreeLinksGiveNoExposedCommunicationAndTheClosedFormBubble) {
  auto s = kimi_like(4, 2, 8, CachePolicy::cached);
  s.ideal_links = true;
  const auto report = evaluate_pipeline(s);
  EXPECT_DOUBLE_EQ(report.exposed_comm_s, 0.0);
  EXPECT_GT(report.attnres_overhead_fraction, 0.0);  // the residual work itself still costs time
  // The report's closed form is the interleaved one, (P-1)/(V·m) = 3/16, and with free links the
  // simulated bubble is the schedule's own: positive, and the same in the standard-residual run's
  // schedule up to the residual work's share.
  EXPECT_DOUBLE_EQ(report.closed_form_bubble, 3.0 / 16.0);
  EXPECT_DOUBLE_EQ(report.closed_form_bubble,
                   closed_form_bubble(PipelineSchedule::interleaved, 4, 2, 8));
  EXPECT_GT(report.bubble_fraction, 0.0);
  // 0.05: the residual work's share of a stage moves the schedule, not rounding.
  EXPECT_NEAR(report.bubble_fraction, report.standard.bubble_fraction, 0.05);
  // Unequal stages (54 sublayers over 8 chunks; the embedding and the head on the end ranks): the
  // busiest rank, the denominator of both, waits less than the equal-stage formula (10.2 % here).
  EXPECT_LT(report.bubble_fraction, report.closed_form_bubble);
  s.link_bandwidth = 1e9;  // a slow 1 GB/s link
  s.ideal_links = false;
  const auto slow = evaluate_pipeline(s);
  EXPECT_GT(slow.exposed_comm_s, 0.0);
  EXPECT_GT(slow.attnres_overhead_fraction, report.attnres_overhead_fraction);
}

}  // namespace
}  // namespace attnres

namespace attnres {
namespace {

TEST(PipelineRules, MoeAndPipelineSettingsNameTheFieldTheyAreAbout) {
  // The MoE shape is part of the cost inputs (architecture.hpp): resolve names its field.
  CostInputs moe;
  moe.layers = 4;
  moe.d_model = 256;
  moe.blocks = 2;
  EXPECT_FALSE(try_resolve_cost_inputs(moe));  // dense
  moe.experts = 8;
  moe.active = 2;
  moe.shared = 1;
  moe.expert_ffn = 512;
  CostInputs probe = moe;
  EXPECT_FALSE(try_resolve_cost_inputs(probe));
  auto field_of = [](const std::optional<CostInputProblem>& problem) {
    return problem ? problem->field : "none";
  };
  CostInputs bad = moe;
  bad.active = 9;
  EXPECT_EQ(field_of(try_resolve_cost_inputs(bad)), "active");
  bad = moe;
  bad.active = 9;
  EXPECT_NE(try_resolve_cost_inputs(bad)->message.find("between 1 and the 8 experts, got 9"),
            std::string::npos);
  bad = moe;
  bad.active = 0;
  EXPECT_EQ(field_of(try_resolve_cost_inputs(bad)), "active");
  bad = moe;
  bad.shared = -1;
  EXPECT_EQ(field_of(try_resolve_cost_inputs(bad)), "shared");
  bad = moe;
  bad.expert_ffn = 0;
  EXPECT_EQ(field_of(try_resolve_cost_inputs(bad)), "expert_ffn");
  bad = moe;
  bad.experts = -2;
  EXPECT_EQ(field_of(try_resolve_cost_inputs(bad)), "experts");

  PipelineSettings s;
  s.model.vpp = 2;
  s.schedule = default_pipeline_schedule(s.model.vpp);
  EXPECT_EQ(s.schedule, PipelineSchedule::interleaved);
  EXPECT_EQ(default_pipeline_schedule(1), PipelineSchedule::one_f_one_b);
  EXPECT_FALSE(pipeline_settings_problem(s));
  PipelineSettings t = s;
  t.schedule = PipelineSchedule::one_f_one_b;
  EXPECT_EQ(field_of(pipeline_settings_problem(t)), "schedule");
  t = s;
  t.microbatches = 0;
  EXPECT_EQ(field_of(pipeline_settings_problem(t)), "microbatches");
  t.microbatches = kMaxMicrobatches + 1;
  EXPECT_EQ(field_of(pipeline_settings_problem(t)), "microbatches");
  t = s;
  // The standard residual is a run of its own (pipeline --mode standard), not a problem.
  t.mode = ResidualMode::standard;
  EXPECT_FALSE(pipeline_settings_problem(t).has_value());
  t = s;
  t.link_bandwidth = -1;
  EXPECT_EQ(field_of(pipeline_settings_problem(t)), "link_bandwidth");
  // m x P·V is bounded (a million micro-batches on 32 chunks took more than 12 GB), with the
  // estimate in the message; the largest m on one chunk is still accepted.
  t = s;
  t.model.pp = 16;
  t.model.vpp = 2;
  t.microbatches = kMaxMicrobatches;
  const auto pairs = pipeline_settings_problem(t);
  EXPECT_EQ(field_of(pairs), "microbatches");
  ASSERT_TRUE(pairs);
  EXPECT_NE(pairs->message.find("m x P·V = 1000000 x 32 = 32000000 (micro-batch, chunk) pairs "
                                "would take about 25600 MB to simulate; at most " +
                                std::to_string(kMaxPipelinePairs)),
            std::string::npos)
      << pairs->message;
  t.microbatches = static_cast<int>(kMaxPipelinePairs / 32);
  EXPECT_FALSE(pipeline_settings_problem(t));
  t.microbatches += 1;
  EXPECT_EQ(field_of(pipeline_settings_problem(t)), "microbatches");
  t.model.pp = 1;
  t.model.vpp = 1;
  t.schedule = PipelineSchedule::one_f_one_b;
  t.microbatches = kMaxMicrobatches;
  EXPECT_FALSE(pipeline_settings_problem(t));
  // evaluate_pipeline applies the same rules
  t = s;
  t.microbatches = 0;
  EXPECT_THROW(evaluate_pipeline(t), Error);
}

}  // namespace
}  // namespace attnres
