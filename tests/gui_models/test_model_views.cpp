// What the Depth attention, Magnitudes and Duality views compute, without a window
// (app/gui/models/model_results.hpp, duality_results.hpp): from a snapshot of the lesson model
// and a view's state, checked against the core's builders on an independent forward pass
// (engine_forward), against closed forms (zero queries: every read is a plain mean; the standard
// residual's M has rank 1) and for the errors a bad pick gives.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/model_charts.hpp"
#include "duality_results.hpp"
#include "model_results.hpp"
#include "test_support.hpp"

namespace attnres::gui {
namespace test_model_views {

// The lesson model's random model as the panel makes it by default (4 layers, d = 64, 4 heads,
// 2 KV heads, ffn 172, 256 tokens, seed 1, S = 2), with `query_std` and `block_size`.
ModelSnapshot random_snapshot(double query_std = 0.5, int block_size = 2) {
  ModelSnapshot s;
  s.config.num_hidden_layers = 4;
  s.config.hidden_size = 64;
  s.config.num_attention_heads = 4;
  s.config.num_key_value_heads = 2;
  s.config.intermediate_size = 172;
  s.config.vocab_size = 256;
  s.config.attn_res.mode = ResidualMode::full;
  s.random.seed = 1;
  s.random.query_std = query_std;
  s.block_size = block_size;
  s.tokens = kRandomTokens;
  return s;
}

ForwardTrace independent_pass(const ModelWeights<double>& weights, const std::vector<int>& tokens,
                              bool mixing) {
  ForwardOptions options;
  options.record_mixing = mixing;
  return engine_forward(weights, tokens, options, EngineOptions{}).trace;
}

const TaxonomyRow& row_of(const std::vector<TaxonomyRow>& rows, const std::string& scheme) {
  for (const TaxonomyRow& row : rows)
    if (row.scheme == scheme) return row;
  throw std::runtime_error("no taxonomy row '" + scheme + "'");
}

}  // namespace test_model_views

using test_model_views::independent_pass;
using test_model_views::random_snapshot;

TEST(ModelViews, DepthMapsAreTheCoresAlphaMapsOfAnIndependentPass) {
  const ModelSnapshot snapshot = random_snapshot();
  DepthAttentionState state;
  const DepthAttentionResult result = depth_attention_result(snapshot, state.picks);
  ASSERT_EQ(result.shown.size(), 1u);
  EXPECT_EQ(result.tokens, (std::vector<int>{1, 7, 42, 7, 99, 3}));
  EXPECT_FALSE(result.bytes);
  const auto model = snapshot.build();
  const ForwardTrace trace = independent_pass(*model, result.tokens, false);
  const std::string scheme = model->config.attn_res.describe();
  std::vector<HeatmapSpec> maps = depth_attention_maps(result, state);
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_TRUE(same_heatmap(maps[0], alpha_heatmap(trace, alpha_title(scheme, trace, -1, -1))));
  state.token = 2;
  maps = depth_attention_maps(result, state);
  EXPECT_TRUE(same_heatmap(maps[0], alpha_heatmap(trace, alpha_title(scheme, trace, 2, -1), 2)));
  // The routing page describes the same first scheme.
  EXPECT_EQ(result.routing.sublayers, 8);
  EXPECT_EQ(result.routing.routing.size(), 9u);  // 8 sublayer inputs and the final read
  EXPECT_NE(result.routing.origin.find("random model"), std::string::npos);
}

TEST(ModelViews, ZeroQueriesMakeEveryFullAttnResReadAPlainMean) {
  const DepthAttentionResult result =
      depth_attention_result(random_snapshot(0.0), DepthAttentionState{}.picks);
  const HeatmapSpec map = depth_attention_maps(result, DepthAttentionState{}).front();
  ASSERT_EQ(map.values.size(), 9u);
  for (std::size_t read = 0; read < map.values.size(); ++read) {
    const double n = static_cast<double>(read + 1);  // the embedding and the outputs so far
    for (std::size_t source = 0; source <= read; ++source)
      // exp(0) / n per token, then the mean over 6 tokens: a few roundoffs of 1/n.
      EXPECT_TRUE(test::near_relative(map.values[read][source], 1.0 / n,
                                      test::roundoffs<double>(16), 0.0, "uniform weight"))
          << read << " " << source;
  }
  // A plain mean over n sources has normalised entropy 1 and exp(H) = n.
  for (const ReadRouting& read : result.routing.routing) {
    if (read.sources.size() < 2) continue;
    // H = -Σ α ln α over n <= 9 terms and a token mean, divided by ln n: a few roundoffs per term.
    EXPECT_TRUE(test::near_relative(read.normalised_entropy, 1.0, test::roundoffs<double>(256), 0.0,
                                    "normalised entropy"))
        << read.target;
    EXPECT_TRUE(test::near_relative(read.effective_sources,
                                    static_cast<double>(read.sources.size()),
                                    test::roundoffs<double>(256), 0.0, "effective sources"))
        << read.target;
  }
}

TEST(ModelViews, ComparingAddsASecondSchemeAndABadPickNamesItsPicker) {
  const ModelSnapshot snapshot = random_snapshot();
  SchemePicks picks;
  picks.compare = "standard";
  const DepthAttentionResult result = depth_attention_result(snapshot, picks);
  ASSERT_EQ(result.shown.size(), 2u);
  EXPECT_EQ(result.shown[1].label, "standard residual");
  EXPECT_EQ(depth_attention_maps(result, DepthAttentionState{picks}).size(), 2u);
  picks.compare = "no-such-scheme";
  try {
    depth_attention_result(snapshot, picks);
    FAIL() << "a bad spec must fail";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()).rfind("compare with 'no-such-scheme': ", 0), 0u)
        << error.what();
  }
  picks = {"full:heads=3", kNoScheme};  // 3 heads do not divide d = 64
  EXPECT_THROW(magnitudes_result(snapshot, picks), Error);
}

TEST(ModelViews, MagnitudesAreTheCoresChartsWithTheStandardReference) {
  const ModelSnapshot snapshot = random_snapshot();
  const auto model = snapshot.build();
  const auto tokens = snapshot.token_ids(model->config);
  const ForwardTrace full = independent_pass(*model, tokens, false);
  const ForwardTrace standard =
      independent_pass(convert_scheme(*model, AttnResConfig{}), tokens, false);
  const std::string scheme = model->config.attn_res.describe();
  const auto expected = magnitude_charts(
      {{scheme, &full, false}, {standard.scheme.describe() + " (reference)", &standard, true}}, "");
  const auto charts = magnitudes_result(snapshot, SchemePicks{});
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(charts[i].title, expected[i].title);
    EXPECT_EQ(chart_csv(charts[i]), chart_csv(expected[i]));
  }
  // A picked standard residual is its own reference: no thin line is added.
  const auto alone = magnitudes_result(snapshot, SchemePicks{"standard", kNoScheme});
  EXPECT_EQ(alone[0].series.size(), 1u);
  EXPECT_EQ(charts[0].series.size(), 2u);
}

TEST(ModelViews, DualityTaxonomyRanksRespectEachSchemesBound) {
  using test_model_views::row_of;
  DualityState state;
  const DualityRun run = duality_run(random_snapshot(0.5, 4), state);
  const std::vector<TaxonomyRow>& rows = run.result.rows;
  ASSERT_EQ(rows.size(), 1u + 7u);  // the picked scheme, then the reference rows
  EXPECT_EQ(rows[0].scheme, "scheme ▸ Full AttnRes");
  // The standard residual and the running mean are one running sum: rank 1 at every cut.
  EXPECT_EQ(row_of(rows, "standard residual").token_rank, 1);
  EXPECT_EQ(row_of(rows, "standard residual").mean_rank, 1);
  EXPECT_EQ(row_of(rows, "rescaled residual (running mean)").token_rank, 1);
  // mHC: at most m streams, reached with drawn coefficients.
  EXPECT_EQ(row_of(rows, "mHC (m = 2)").token_rank, 2);
  EXPECT_LE(row_of(rows, "mHC (m = 4)").token_rank, 4);
  EXPECT_GT(row_of(rows, "mHC (m = 4)").token_rank, 2);
  // Full AttnRes with random queries: dense, up to min(k, L + 1 - k) = 4 at L = 8.
  EXPECT_GT(row_of(rows, "Full AttnRes").token_rank, 1);
  EXPECT_EQ(row_of(rows, "Full AttnRes").bound, 4);
  // Block at S = 4: the embedding and at most two blocks across a cut.
  EXPECT_LE(row_of(rows, "Block AttnRes (S = 4)").token_rank, 3);
  for (const TaxonomyRow& row : rows) EXPECT_TRUE(row.holds) << row.scheme;
  EXPECT_NE(run.result.caption.find("L = 8, T = 6 tokens"), std::string::npos)
      << run.result.caption;
  EXPECT_EQ(run.token_names.size(), 6u);
  EXPECT_EQ(run.token_names[2], "id 42");  // the random model's tokens are ids, not bytes
  // The maps and the rank chart are the core's for an independent pass.
  const auto model = random_snapshot(0.5, 4).build();
  const ForwardTrace mixed = independent_pass(*model, {1, 7, 42, 7, 99, 3}, true);
  ASSERT_FALSE(run.result.mixing.empty());
  EXPECT_TRUE(same_heatmap(run.result.mixing[0], mixing_heatmap(mixed, "Full AttnRes")));
  EXPECT_EQ(chart_csv(run.result.ranks), chart_csv(depth_rank_chart({&mixed})));
}

TEST(ModelViews, DualitySaysWhichLayerOrHeadIsOutsideTheModel) {
  DualityState state;
  state.layer = 4;  // 4 layers: 0 .. 3
  try {
    duality_run(random_snapshot(), state);
    FAIL() << "layer 4 of 4 must fail";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "sequence layer 4 is outside the model (0 .. 3)");
  }
  state.layer = 0;
  state.head = -1;
  EXPECT_THROW(duality_run(random_snapshot(), state), Error);
}

TEST(ModelViews, OnlyASchemeThatTakesTheLessonsSReadsIt) {
  const ModelConfig config = random_snapshot().config;  // L = 8
  EXPECT_TRUE(picks_use_block_size({"block", kNoScheme}, config));
  EXPECT_TRUE(picks_use_block_size({kOwnScheme, "block"}, config));
  EXPECT_FALSE(picks_use_block_size({kOwnScheme, kNoScheme}, config));
  EXPECT_FALSE(picks_use_block_size({"full", "standard"}, config));
  EXPECT_FALSE(picks_use_block_size({"block:block_size=4", kNoScheme}, config));
  EXPECT_FALSE(picks_use_block_size({"no-such-scheme", kNoScheme}, config));
}

}  // namespace attnres::gui
