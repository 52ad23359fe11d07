// The figures of the views on a model — Depth attention, Magnitudes, Duality (README "The
// desktop GUI", docs/math.md §2.7-2.8) — built from forward traces as plain data. The GUI's views
// and `attnres forward --chart DIR` both draw these, so one trace gives one figure everywhere.
//
//   const ForwardTrace& trace = forward(model, tokens).trace;
//   HeatmapSpec alpha = alpha_heatmap(trace, alpha_title("Full AttnRes", trace, -1, -1));
//   auto [inputs, outputs] = magnitude_charts({{"Full AttnRes", &trace, false}}, "");
#pragma once

#include <Eigen/Dense>
#include <array>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/forward.hpp"
#include "attnres/routing_stats.hpp"

namespace attnres {

// Read r of a model with L sublayers, short: "1 attn", "2 mlp", ..., "final" (r = L).
std::string read_short_label(int read, int sublayers);

// The most depth-attention heads of any read of the trace (1 for schemes without heads).
int trace_heads(const ForwardTrace& trace);

// ---------------------------------------------------------------- Depth attention

// "<scheme>: alpha (mean over tokens)", "(token 3, head 1 of 4)", "(..., mean over 4 heads)".
std::string alpha_title(const std::string& scheme, const ForwardTrace& trace, int token, int head);

// Rows = reads, columns = every source label in order of first appearance ("partial" and "zero"
// last); the weights of token `token` (-1: the mean over tokens) and head `head` (-1: the mean over
// heads; a read with fewer heads shows its mean). The standard residual records no reads: every
// read weighs each earlier output v_0 .. v_{r} by 1. NaN: not a source of that read. Colours run
// from min(0, smallest) to max(1, largest): unnormalised schemes (DenseFormer, sigmoid gates,
// mHC) can leave [0, 1]. id "depth_attention".
HeatmapSpec alpha_heatmap(const ForwardTrace& trace, const std::string& title, int token = -1,
                          int head = -1);

// ---------------------------------------------------------------- Magnitudes

// One curve of the magnitude charts: a legend name and its trace. A reference curve (the standard
// residual drawn for comparison) is a thin line, the others lines with points.
struct MagnitudeCurve {
  std::string name;
  const ForwardTrace* trace = nullptr;
  bool reference = false;
};

// The RMS of every sublayer's input h_l (first, id "magnitudes_input") and output v_l (second,
// "magnitudes_output") against l = 1..L, log y, one series per curve. `weights` ("trained Full
// AttnRes model"; empty: none) names whose weights every curve reads, in the titles.
std::array<ChartSpec, 2> magnitude_charts(const std::vector<MagnitudeCurve>& curves,
                                          const std::string& weights);

// ---------------------------------------------------------------- Duality

// The semiseparable rank each cut k = 1..L of a scheme's M can reach (docs/schemes.md "The mixing
// matrix of every scheme"): the size of the state a recurrence over depth carries across the cut.
// `mean_bounded` is false where only each token's M obeys it (input-dependent mHC coefficients:
// the token mean of rank-m matrices can exceed m).
struct RankBound {
  std::vector<int> per_cut;
  std::string rule;    // short, for tables
  std::string detail;  // the formula at cut k
  bool mean_bounded = true;
};
RankBound rank_bound(const ForwardTrace& trace);

// The token-mean depth mixing matrix M (rows: reads "1 attn" .. "final"; columns: "emb", "v1" ..),
// NaN above the diagonal (not a source). Colours from min(0, smallest) to max(1, largest).
// `scheme` names the scheme in the title; id "duality_mixing".
HeatmapSpec mixing_heatmap(const ForwardTrace& trace, const std::string& scheme);
// The same for one token's M_t (trace.mixing_per_token[token]; the title says which token).
HeatmapSpec mixing_heatmap(const ForwardTrace& trace, const std::string& scheme, int token);

// The semiseparable rank of the token-mean M at each cut with the scheme's bound, two series per
// trace (needs traces recorded with mixing). id "duality_ranks".
ChartSpec depth_rank_chart(const std::vector<const ForwardTrace*>& traces);

// The sequence side: one head's causal attention over the tokens (T x T, rows and columns "t0" ..),
// id "duality_sequence"; the running sum (the lower-triangular all-ones T x T), id
// "duality_running_sum"; and the rank of both at each cut t, id "duality_sequence_ranks".
HeatmapSpec sequence_attention_heatmap(const Eigen::MatrixXd& attention, int layer, int head);
HeatmapSpec running_sum_heatmap(int tokens);
ChartSpec sequence_rank_chart(const Eigen::MatrixXd& attention, double tolerance = 1e-6);

// attnres inspect (docs/interop.md): the cosine similarity between the reads' effective
// pseudo-queries (rows and columns "1 attn" .. "final"; routing_stats.hpp), id "query_cosines",
// and the routing statistics by read (normalised entropy, top-1 mass, weight on the embedding and
// on the most recent source), id "routing_by_read".
HeatmapSpec query_cosine_heatmap(const Eigen::MatrixXd& cosines);
ChartSpec routing_chart(const std::vector<ReadRouting>& routing, int sublayers);

}  // namespace attnres
