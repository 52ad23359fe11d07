// The figures of the views on a model (core/model_charts.hpp) against the trace they come from,
// token-id parsing (token_ids.hpp), and the caveat of the paper's Fig. 6 overlay on sweeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/sweep.hpp"
#include "attnres/token_ids.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_model_charts {

// The message of the Error `parse` throws ("" when it throws none).
template <typename F>
std::string error_of(F parse) {
  try {
    parse();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(TokenIds, SpacesCommasTabsAndNewlinesSeparateIds) {
  EXPECT_EQ(parse_token_ids("1 7 42", "--tokens"), (std::vector<int>{1, 7, 42}));
  EXPECT_EQ(parse_token_ids("1,7,42", "--tokens"), (std::vector<int>{1, 7, 42}));
  EXPECT_EQ(parse_token_ids(" 1, 7,\t42\n0 ", "--tokens"), (std::vector<int>{1, 7, 42, 0}));
  EXPECT_EQ(parse_token_ids("0 39", "tokens", 40), (std::vector<int>{0, 39}));
}

TEST(TokenIds, BadListsAreErrorsNamingTheField) {
  const auto starts = [](const std::string& message, const std::string& field) {
    return message.rfind(field + ": ", 0) == 0;
  };
  const std::string empty = error_of([] { parse_token_ids("", "--tokens"); });
  EXPECT_TRUE(starts(empty, "--tokens")) << empty;
  EXPECT_NE(empty.find("no token ids given"), std::string::npos) << empty;
  EXPECT_NE(error_of([] { parse_token_ids(" \t ", "--tokens"); }).find("no token ids"),
            std::string::npos);
  const std::string doubled = error_of([] { parse_token_ids("1,,2", "--tokens"); });
  EXPECT_TRUE(starts(doubled, "--tokens")) << doubled;
  EXPECT_NE(doubled.find("empty token id (token 1)"), std::string::npos) << doubled;
  EXPECT_NE(error_of([] { parse_token_ids("1,2,", "--tokens"); }).find("ends with a comma"),
            std::string::npos);
  const std::string garbage = error_of([] { parse_token_ids("1 x 3", "tokens"); });
  EXPECT_TRUE(starts(garbage, "tokens")) << garbage;
  EXPECT_NE(garbage.find("'x' (token 1) is not a token id"), std::string::npos) << garbage;
  EXPECT_NE(
      error_of([] { parse_token_ids("-3", "--tokens"); }).find("'-3' (token 0) is not a token id"),
      std::string::npos);
  EXPECT_NE(error_of([] { parse_token_ids("1.5", "--tokens"); }).find("'1.5'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_token_ids("99999999999", "--tokens"); }).find("is not a token id"),
            std::string::npos);
  const std::string outside = error_of([] { parse_token_ids("1 40", "tokens", 40); });
  EXPECT_EQ(outside,
            "tokens: '40' (token 1) is not a token id in 0 .. 39 (the model's vocabulary)");
  EXPECT_TRUE(
      error_of([] { parse_token_ids("1 40", "tokens"); }).empty());  // no vocabulary: any id
}

ModelWeights<double> model_with(ResidualMode mode, int block_size = 0, int layers = 3) {
  ModelConfig config = test::model_config(layers, 16, 4, 2, 24, 40);
  config.attn_res.mode = mode;
  config.attn_res.block_size = block_size;
  return random_model(config, {.seed = 7, .weight_std = 0.3, .query_std = 1.0});
}

const std::vector<int> kTokens = {3, 1, 4, 1, 5};

// A row of weights sums to 1: n <= 7 weights exp(s - m) / l, each within ~4 u of its value (an
// exp, a merge's scale, a division), means over T = 5 tokens (5 u) and the row's n-term sum (7 u):
// 4 x 7 + 5 + 7 = 40 u; 64 u.
constexpr double kRowSum = test::roundoffs<double>(64);

// Column of a source label in a heatmap.
std::size_t column_of(const HeatmapSpec& map, const std::string& label) {
  const auto it = std::find(map.column_labels.begin(), map.column_labels.end(), label);
  EXPECT_NE(it, map.column_labels.end()) << label;
  return static_cast<std::size_t>(it - map.column_labels.begin());
}

TEST(ModelCharts, AlphaHeatmapIsTheTracesAlphaAndEveryRowSumsToOne) {
  for (const auto& [mode, block_size] :
       {std::pair{ResidualMode::full, 0}, std::pair{ResidualMode::block, 2}}) {
    const ForwardTrace trace = forward(model_with(mode, block_size), kTokens).trace;
    ASSERT_FALSE(trace.reads.empty());
    for (int token : {-1, 0, 4}) {
      const HeatmapSpec map = alpha_heatmap(trace, "t", token);
      EXPECT_EQ(map.id, "depth_attention");
      ASSERT_EQ(map.values.size(), trace.reads.size());
      ASSERT_EQ(map.row_labels.size(), trace.reads.size());
      EXPECT_EQ(map.row_labels.back(), "final");
      EXPECT_EQ(map.row_labels.front(), "1 attn");
      for (std::size_t r = 0; r < trace.reads.size(); ++r) {
        const ReadTrace& read = trace.reads[r];
        double sum = 0.0;
        int sources = 0;
        for (std::size_t j = 0; j < read.sources.size(); ++j) {
          const auto e = static_cast<Eigen::Index>(j);
          const double expected = token < 0 ? read.alpha_mean(e) : read.alpha(token, e);
          EXPECT_EQ(map.values[r][column_of(map, read.sources[j].label())], expected);
        }
        for (double v : map.values[r]) {
          if (std::isnan(v)) continue;
          sum += v;
          ++sources;
        }
        EXPECT_EQ(sources,
                  static_cast<int>(read.sources.size()));  // every other cell: not a source
        EXPECT_TRUE(test::near_relative(sum, 1.0, kRowSum, 0.0,
                                        "row " + std::to_string(r) + " of " + to_string(mode)));
      }
    }
    if (mode == ResidualMode::block) {
      EXPECT_EQ(alpha_heatmap(trace, "t").column_labels.back(), "partial");
    }
  }
}

TEST(ModelCharts, StandardResidualWeighsEveryEarlierOutputByOne) {
  const ForwardTrace trace = forward(model_with(ResidualMode::standard, 0, 2), kTokens).trace;
  const HeatmapSpec map = alpha_heatmap(trace, "standard");
  ASSERT_EQ(map.values.size(), 5u);  // reads 0 .. L = 4
  EXPECT_EQ(map.column_labels, (std::vector<std::string>{"emb", "v1", "v2", "v3", "v4"}));
  for (std::size_t r = 0; r < 5; ++r) {
    for (std::size_t c = 0; c < 5; ++c) {
      if (c <= r) {
        EXPECT_EQ(map.values[r][c], 1.0);
      } else {
        EXPECT_TRUE(std::isnan(map.values[r][c]));
      }
    }
  }
}

TEST(ModelCharts, AlphaTitleNamesTokenAndHead) {
  const ForwardTrace trace = forward(model_with(ResidualMode::full), kTokens).trace;
  EXPECT_EQ(alpha_title("Full AttnRes", trace, -1, -1), "Full AttnRes: alpha (mean over tokens)");
  EXPECT_EQ(alpha_title("Full AttnRes", trace, 2, -1), "Full AttnRes: alpha (token 2)");
}

TEST(ModelCharts, MagnitudeSeriesAreTheTracesNorms) {
  const ForwardTrace full = forward(model_with(ResidualMode::full), kTokens).trace;
  const ForwardTrace standard = forward(model_with(ResidualMode::standard), kTokens).trace;
  const auto [inputs, outputs] =
      magnitude_charts({{"full", &full, false}, {"standard", &standard, true}}, "");
  EXPECT_EQ(inputs.id, "magnitudes_input");
  EXPECT_EQ(outputs.id, "magnitudes_output");
  EXPECT_TRUE(inputs.log_y);
  ASSERT_EQ(inputs.series.size(), 2u);
  EXPECT_EQ(inputs.series[1].style, ChartSeries::Style::line);  // the reference is a thin line
  EXPECT_EQ(inputs.series[0].style, ChartSeries::Style::line_and_points);
  for (std::size_t m = 0; m < 2; ++m) {
    const ForwardTrace& trace = m == 0 ? full : standard;
    ASSERT_EQ(inputs.series[m].points.size(), 6u);  // L = 6 sublayers
    for (std::size_t l = 0; l < 6; ++l) {
      EXPECT_EQ(inputs.series[m].points[l],
                std::make_pair(double(l + 1), trace.sublayer_input_rms[l]));
      EXPECT_EQ(outputs.series[m].points[l],
                std::make_pair(double(l + 1), trace.sublayer_output_rms[l]));
    }
  }
  const auto titled = magnitude_charts({{"full", &full, false}}, "trained Full AttnRes model");
  EXPECT_EQ(titled[0].title,
            "RMS of each sublayer's input h_l on the weights of the trained Full AttnRes model");
}

TEST(ModelCharts, MixingHeatmapIsTheLowerTriangleOfMAndRowsSumToOne) {
  const ForwardTrace trace = forward(model_with(ResidualMode::full), kTokens).trace;
  const HeatmapSpec map = mixing_heatmap(trace, "Full AttnRes");
  const auto n = static_cast<std::size_t>(trace.mixing_mean.rows());
  ASSERT_EQ(n, 7u);
  ASSERT_EQ(map.values.size(), n);
  EXPECT_EQ(map.column_labels.front(), "emb");
  EXPECT_EQ(map.column_labels.back(), "v6");
  EXPECT_EQ(map.row_labels.back(), "final");
  for (std::size_t r = 0; r < n; ++r) {
    double sum = 0.0;
    for (std::size_t c = 0; c < n; ++c) {
      const double m =
          trace.mixing_mean(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c));
      if (c <= r) {
        EXPECT_EQ(map.values[r][c], m);
        sum += map.values[r][c];
      } else {
        EXPECT_TRUE(std::isnan(map.values[r][c]));
      }
    }
    // Full AttnRes: a convex combination.
    EXPECT_TRUE(test::near_relative(sum, 1.0, kRowSum, 0.0, "read " + std::to_string(r)));
  }
}

TEST(ModelCharts, DepthRankChartIsTheTracesRankBesideItsBound) {
  const ForwardTrace full = forward(model_with(ResidualMode::full), kTokens).trace;
  const ForwardTrace block = forward(model_with(ResidualMode::block, 2), kTokens).trace;
  const ChartSpec chart = depth_rank_chart({&full, &block});
  EXPECT_EQ(chart.id, "duality_ranks");
  ASSERT_EQ(chart.series.size(), 4u);
  const int L = 6;
  for (int k = 1; k <= L; ++k) {
    const auto i = static_cast<std::size_t>(k - 1);
    EXPECT_EQ(chart.series[0].points[i].second, full.semiseparable_rank[i]);
    EXPECT_EQ(chart.series[1].points[i].second, std::min(k, L + 1 - k));  // Full: dense
    EXPECT_EQ(chart.series[2].points[i].second, block.semiseparable_rank[i]);
    EXPECT_EQ(chart.series[3].points[i].second, std::min({k, L + 1 - k, 1 + (k - 1 + 1) / 2}));
    EXPECT_LE(full.semiseparable_rank[i], std::min(k, L + 1 - k));
  }
}

TEST(ModelCharts, SequenceSideAndCsv) {
  Eigen::MatrixXd attention(3, 3);
  attention << 1, 0, 0, 0.25, 0.75, 0, 0.2, 0.3, 0.5;
  const HeatmapSpec map = sequence_attention_heatmap(attention, 1, 2);
  EXPECT_EQ(map.title, "sequence: softmax attention of layer 1, head 2 (on its real input)");
  EXPECT_EQ(map.row_labels, (std::vector<std::string>{"t0", "t1", "t2"}));
  EXPECT_EQ(map.values[1][1], 0.75);
  const HeatmapSpec running = running_sum_heatmap(3);
  EXPECT_EQ(running.values, (std::vector<std::vector<double>>{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}));
  const ChartSpec ranks = sequence_rank_chart(attention);
  ASSERT_EQ(ranks.series.size(), 2u);
  EXPECT_EQ(ranks.series[1].points,
            (std::vector<std::pair<double, double>>{{1, 1}, {2, 1}}));  // running sum: rank 1
  HeatmapSpec small;
  small.row_labels = {"r0", "r1"};
  small.column_labels = {"a", "b"};
  small.values = {{0.5, NAN}, {1, 0.25}};
  EXPECT_EQ(heatmap_csv(small), "row,a,b\nr0,0.5,\nr1,1,0.25\n");
  EXPECT_TRUE(same_heatmap(small, small));
}

// The paper's Fig. 6 losses belong to its 32-sublayer model: a sweep of another model says so.
TEST(Sweep, PaperFig6OverlayOnAnotherModelCarriesAWarning) {
  SweepSpec spec{"io",
                 "",
                 {"blocks", {1, 2, 4, 8}},
                 std::nullopt,
                 {"io_multiples_of_d.block_two_phase"},
                 true,
                 false,
                 "paper_fig6"};
  CostInputs other;
  other.sublayers = 64;
  other.blocks = 8;
  other.d_model = 100;
  const ChartSpec chart = sweep_chart(run_sweep(other, spec), other);
  EXPECT_NE(chart.caption.find(
                "Warning: the paper's Fig. 6 losses come from its 32-sublayer ablation model"),
            std::string::npos)
      << chart.caption;
  EXPECT_NE(chart.caption.find("(L = 64)"), std::string::npos) << chart.caption;
  EXPECT_EQ(paper_fig6_warning(spec, other).empty(), false);
  CostInputs paper = other;
  paper.sublayers = 32;
  const ChartSpec own = sweep_chart(run_sweep(paper, spec), paper);
  EXPECT_EQ(own.caption.find("Warning"), std::string::npos) << own.caption;
  spec.overlay.clear();
  EXPECT_EQ(sweep_chart(run_sweep(other, spec), other).caption.find("Warning"), std::string::npos);
}

}  // namespace test_model_charts
}  // namespace attnres
