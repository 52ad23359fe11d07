#include "attnres/model_charts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/error.hpp"
#include "report_parts.hpp"

namespace attnres {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<std::vector<double>> rows_of(const Eigen::MatrixXd& m) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(m.rows()));
  for (Eigen::Index r = 0; r < m.rows(); ++r) {
    for (Eigen::Index c = 0; c < m.cols(); ++c) out[static_cast<std::size_t>(r)].push_back(m(r, c));
  }
  return out;
}

// "<prefix><n>" built by appending (GCC 12 warns, -Wrestrict, on a short literal + to_string).
std::string numbered(const char* prefix, long long n) {
  std::string label = prefix;
  label += std::to_string(n);
  return label;
}

std::vector<std::string> position_labels(Eigen::Index tokens) {
  std::vector<std::string> out;
  for (Eigen::Index t = 0; t < tokens; ++t) out.push_back(numbered("t", t));
  return out;
}

}  // namespace

std::string read_short_label(int read, int sublayers) {
  if (read == sublayers) return "final";
  std::string label = std::to_string(read + 1);
  label += read % 2 == 0 ? " attn" : " mlp";
  return label;
}

int trace_heads(const ForwardTrace& trace) {
  int heads = 1;
  for (const auto& read : trace.reads) heads = std::max(heads, read.heads);
  return heads;
}

std::string alpha_title(const std::string& scheme, const ForwardTrace& trace, int token, int head) {
  const int heads = trace_heads(trace);
  std::string title = scheme;
  title += ": alpha (";
  title += token < 0 ? std::string("mean over tokens") : numbered("token ", token);
  if (heads > 1 && head >= 0 && head < heads) {
    title += numbered(", head ", head);
    title += numbered(" of ", heads);
  } else if (heads > 1) {
    title += numbered(", mean over ", heads);
    title += " heads";
  }
  title += ")";
  return title;
}

HeatmapSpec alpha_heatmap(const ForwardTrace& trace, const std::string& title, int token,
                          int head) {
  HeatmapSpec map;
  map.id = "depth_attention";
  map.title = title;
  map.caption =
      "The depth-attention weights alpha of every read (rows) over its sources (columns); empty: "
      "not a "
      "source of that read.";
  auto& columns = map.column_labels;
  if (trace.reads.empty()) {
    const int L = trace.sublayers;
    columns.emplace_back("emb");
    for (int i = 1; i <= L; ++i) columns.push_back(numbered("v", i));
    for (int r = 0; r <= L; ++r) {
      map.row_labels.push_back(read_short_label(r, L));
      std::vector<double> row(columns.size(), kNaN);
      for (int i = 0; i <= r; ++i) row[static_cast<std::size_t>(i)] = 1.0;
      map.values.push_back(std::move(row));
    }
    return map;
  }
  for (const auto& read : trace.reads) {
    for (const auto& source : read.sources) {
      if (std::find(columns.begin(), columns.end(), source.label()) == columns.end())
        columns.push_back(source.label());
    }
  }
  std::stable_partition(columns.begin(), columns.end(),
                        [](const std::string& l) { return l != "partial" && l != "zero"; });
  double low = 0.0, high = 1.0;
  for (const auto& read : trace.reads) {
    std::vector<double> row(columns.size(), kNaN);
    const auto sources = static_cast<Eigen::Index>(read.sources.size());
    const bool one_head =
        head >= 0 && head < read.heads && read.alpha_heads.cols() == read.heads * sources;
    for (Eigen::Index j = 0; j < sources; ++j) {
      const auto column = std::find(columns.begin(), columns.end(),
                                    read.sources[static_cast<std::size_t>(j)].label()) -
                          columns.begin();
      double v = 0.0;
      if (one_head) {
        const Eigen::Index c = head * sources + j;
        v = token < 0 ? read.alpha_heads.col(c).mean() : read.alpha_heads(token, c);
      } else {
        v = token < 0 ? read.alpha_mean(j) : read.alpha(token, j);
      }
      row[static_cast<std::size_t>(column)] = v;
      low = std::min(low, v);
      high = std::max(high, v);
    }
    map.values.push_back(std::move(row));
    map.row_labels.push_back(read_short_label(read.read, trace.sublayers));
  }
  map.low = low;
  map.high = high;
  return map;
}

std::array<ChartSpec, 2> magnitude_charts(const std::vector<MagnitudeCurve>& curves,
                                          const std::string& weights) {
  ChartSpec inputs, outputs;
  inputs.id = "magnitudes_input";
  inputs.title = "RMS of each sublayer's input h_l";
  outputs.id = "magnitudes_output";
  outputs.title = "RMS of each sublayer's output v_l";
  if (!weights.empty()) {  // legends name the schemes; the titles say whose weights
    inputs.title += " on the weights of the " + weights;
    outputs.title += " on the weights of the " + weights;
  }
  inputs.x_label = outputs.x_label = "sublayer l";
  inputs.y_label = outputs.y_label = "RMS over tokens and channels";
  inputs.log_y = outputs.log_y = true;
  inputs.caption = "The RMS of every sublayer's input h_l by depth (the paper's Fig. 5b question).";
  outputs.caption = "The RMS of every sublayer's output v_l by depth.";
  for (const auto& curve : curves) {
    const ForwardTrace& trace = *curve.trace;
    const auto style =
        curve.reference ? ChartSeries::Style::line : ChartSeries::Style::line_and_points;
    ChartSeries in{curve.name, {}, style, false}, out = in;
    for (std::size_t l = 0; l < trace.sublayer_input_rms.size(); ++l) {
      in.points.emplace_back(static_cast<double>(l + 1), trace.sublayer_input_rms[l]);
    }
    for (std::size_t l = 0; l < trace.sublayer_output_rms.size(); ++l) {
      out.points.emplace_back(static_cast<double>(l + 1), trace.sublayer_output_rms[l]);
    }
    inputs.series.push_back(std::move(in));
    outputs.series.push_back(std::move(out));
  }
  return {inputs, outputs};
}

RankBound rank_bound(const ForwardTrace& trace) {
  const AttnResConfig& s = trace.scheme;
  const int L = trace.sublayers;
  RankBound bound;
  switch (s.mode) {
    case ResidualMode::standard:
      bound.rule = "one running sum";
      bound.detail = "1 at every cut: h is one running sum";
      break;
    case ResidualMode::rescaled:
      bound.rule = "one running mean";
      bound.detail = "1 at every cut: h is one running mean";
      break;
    case ResidualMode::mhc:
      bound.rule = "m streams";
      bound.detail = "min(k, L+1−k, m): every cut factors through the m streams";
      if (s.dynamic) {
        bound.rule += ", per token";
        bound.detail +=
            "; with input-dependent coefficients each token's M obeys it, their mean need not";
      }
      bound.mean_bounded = !s.dynamic;
      break;
    case ResidualMode::block:
      bound.rule = "emb + blocks";
      bound.detail = std::string("min(k, L+1−k, 1 + ⌈(k−1)/S⌉), S = ") +
                     std::to_string(trace.block_size) +
                     ": the outputs of one block share a column (N + 1 sources at most)";
      break;
    case ResidualMode::full:
      bound.rule = s.window > 0 ? "min(k, L+1−k, W)" : "min(k, L+1−k)";
      bound.detail = s.window > 0
                         ? "the shape of M[k:, :k], and later reads see v_0 and the last W outputs"
                         : "the shape of M[k:, :k]: dense";
      break;
    case ResidualMode::denseformer:
      bound.rule = "min(k, L+1−k)";
      bound.detail = "the shape of M[k:, :k]: dense";
      break;
  }
  for (int k = 1; k <= L; ++k) {
    int b = std::min(k, L + 1 - k);  // the shape of M[k:, :k]
    switch (s.mode) {
      case ResidualMode::standard:
      case ResidualMode::rescaled:
        b = 1;
        break;
      case ResidualMode::mhc:
        b = std::min(b, s.streams);
        break;
      case ResidualMode::block: {
        const int S = std::max(1, trace.block_size);
        b = std::min(b, 1 + (k - 1 + S - 1) / S);  // columns of one block are equal
        break;
      }
      case ResidualMode::full:
        if (s.window > 0) b = std::min(b, s.window);  // later reads see v_0 and the last W outputs
        break;
      case ResidualMode::denseformer:
        break;
    }
    bound.per_cut.push_back(b);
  }
  return bound;
}

namespace {

HeatmapSpec mixing_map(const Eigen::MatrixXd& mixing, std::string title, std::string caption) {
  HeatmapSpec map;
  map.id = "duality_mixing";
  map.title = std::move(title);
  map.caption = std::move(caption);
  const auto n = mixing.rows();
  for (Eigen::Index r = 0; r < n; ++r) {
    map.row_labels.push_back(read_short_label(static_cast<int>(r), static_cast<int>(n) - 1));
    map.column_labels.push_back(r == 0 ? std::string("emb") : numbered("v", r));
  }
  if (n == 0) return map;
  map.low = std::min(0.0, mixing.minCoeff());
  map.high = std::max(1.0, mixing.maxCoeff());
  // Only the lower triangle (reads of earlier outputs) is M; above it: not a source.
  map.values = rows_of(mixing);
  for (std::size_t r = 0; r < map.values.size(); ++r) {
    for (std::size_t c = r + 1; c < map.values[r].size(); ++c) map.values[r][c] = kNaN;
  }
  return map;
}

}  // namespace

HeatmapSpec mixing_heatmap(const ForwardTrace& trace, const std::string& scheme) {
  return mixing_map(trace.mixing_mean, "depth mixing M: " + scheme + " (token mean)",
                    "The depth mixing matrix M (h_l = sum_i M(l, i) v_i), the mean over tokens; "
                    "empty: above the diagonal, not a source.");
}

HeatmapSpec mixing_heatmap(const ForwardTrace& trace, const std::string& scheme, int token) {
  if (token < 0 || static_cast<std::size_t>(token) >= trace.mixing_per_token.size()) {
    throw Error("mixing heatmap: token " + std::to_string(token) + " is outside 0 .. " +
                std::to_string(static_cast<long>(trace.mixing_per_token.size()) - 1));
  }
  std::string title = "depth mixing M: ";
  title += scheme;
  title += " (token t";
  title += std::to_string(token);
  title += ")";
  return mixing_map(trace.mixing_per_token[static_cast<std::size_t>(token)], std::move(title),
                    "The depth mixing matrix M_t of one token (h_l = sum_i M_t(l, i) v_i); "
                    "empty: above the diagonal, not a source.");
}

ChartSpec depth_rank_chart(const std::vector<const ForwardTrace*>& traces) {
  ChartSpec chart =
      detail::xy_chart("duality_ranks", "Semiseparable rank of the depth mixing matrix at each cut",
                       "cut k", "rank of M[k:, :k]");
  chart.caption =
      "The rank of the token-mean M below each cut k (SVD, singular values above 1e-6 of the "
      "largest) "
      "beside the largest rank the scheme can reach there.";
  for (const ForwardTrace* trace : traces) {
    ChartSeries rank{trace->scheme.describe(), {}, ChartSeries::Style::line_and_points, false};
    for (std::size_t k = 0; k < trace->semiseparable_rank.size(); ++k) {
      rank.points.emplace_back(static_cast<double>(k + 1), trace->semiseparable_rank[k]);
    }
    ChartSeries bound{std::string("bound: ") + to_string(trace->scheme.mode),
                      {},
                      ChartSeries::Style::line,
                      false};
    const RankBound bounds = rank_bound(*trace);
    for (std::size_t k = 0; k < bounds.per_cut.size(); ++k) {
      bound.points.emplace_back(static_cast<double>(k + 1), bounds.per_cut[k]);
    }
    chart.series.push_back(std::move(rank));
    chart.series.push_back(std::move(bound));
  }
  return chart;
}

HeatmapSpec sequence_attention_heatmap(const Eigen::MatrixXd& attention, int layer, int head) {
  HeatmapSpec map;
  map.id = "duality_sequence";
  map.title = numbered("sequence: softmax attention of layer ", layer);
  map.title += numbered(", head ", head);
  map.title += " (on its real input)";
  map.caption = "One head's causal softmax attention over the tokens (rows attend to columns).";
  map.row_labels = map.column_labels = position_labels(attention.rows());
  map.values = rows_of(attention);
  return map;
}

HeatmapSpec running_sum_heatmap(int tokens) {
  Eigen::MatrixXd running = Eigen::MatrixXd::Zero(tokens, tokens);
  running.triangularView<Eigen::Lower>().setOnes();
  HeatmapSpec map;
  map.id = "duality_running_sum";
  map.title = "sequence: running sum (RNN / linear attention)";
  map.caption =
      "The running sum over the tokens: every earlier token with weight 1 (rank 1 at every cut).";
  map.row_labels = map.column_labels = position_labels(tokens);
  map.values = rows_of(running);
  return map;
}

ChartSpec sequence_rank_chart(const Eigen::MatrixXd& attention, double tolerance) {
  const auto T = attention.rows();
  Eigen::MatrixXd running = Eigen::MatrixXd::Zero(T, T);
  running.triangularView<Eigen::Lower>().setOnes();
  const auto attention_ranks = semiseparable_ranks(attention, tolerance);
  const auto running_ranks = semiseparable_ranks(running, tolerance);
  ChartSpec chart = detail::xy_chart("duality_sequence_ranks", "Semiseparable rank over the tokens",
                                     "cut t", "rank of A[t:, :t]");
  ChartSeries sequence{"softmax attention", {}, ChartSeries::Style::line_and_points, false};
  for (std::size_t k = 0; k < attention_ranks.size(); ++k)
    sequence.points.emplace_back(double(k + 1), attention_ranks[k]);
  ChartSeries sum{"running sum", {}, ChartSeries::Style::line, false};
  for (std::size_t k = 0; k < running_ranks.size(); ++k)
    sum.points.emplace_back(double(k + 1), running_ranks[k]);
  chart.series = {sequence, sum};
  return chart;
}

HeatmapSpec query_cosine_heatmap(const Eigen::MatrixXd& cosines) {
  HeatmapSpec map;
  map.id = "query_cosines";
  map.title = "cosine similarity between the reads' pseudo-queries";
  map.caption =
      "cos(q_r, q_s) of the vectors that score each read's RMS-normalised sources (w ⊙ g): "
      "reads that attend alike have similar queries; empty: a zero query.";
  const int L = static_cast<int>(cosines.rows()) - 1;
  for (int r = 0; r <= L; ++r) {
    map.row_labels.push_back(read_short_label(r, L));
    map.column_labels.push_back(read_short_label(r, L));
    std::vector<double> row;
    for (int s = 0; s <= L; ++s) row.push_back(cosines(r, s));
    map.values.push_back(std::move(row));
  }
  map.low = -1.0;
  map.high = 1.0;
  return map;
}

ChartSpec routing_chart(const std::vector<ReadRouting>& routing, int sublayers) {
  ChartSpec chart = detail::xy_chart("routing_by_read", "Routing statistics of each depth read",
                                     "read r (L = final read)", "fraction");
  chart.caption =
      "Per read, the mean over the text's tokens of the normalised entropy (1: uniform over the "
      "sources), the top-1 mass, and the weight on the embedding and on the most recent source.";
  ChartSeries entropy{"normalised entropy", {}, ChartSeries::Style::line_and_points, false};
  ChartSeries top{"top-1 mass", {}, ChartSeries::Style::line_and_points, false};
  ChartSeries embedding{"weight on the embedding", {}, ChartSeries::Style::line_and_points, false};
  ChartSeries recent{"weight on the most recent", {}, ChartSeries::Style::line_and_points, false};
  for (const ReadRouting& r : routing) {
    const auto x = static_cast<double>(r.read);
    if (std::isfinite(r.normalised_entropy)) entropy.points.emplace_back(x, r.normalised_entropy);
    top.points.emplace_back(x, r.top1_mass);
    if (std::isfinite(r.embedding_weight)) embedding.points.emplace_back(x, r.embedding_weight);
    recent.points.emplace_back(x, r.recent_weight);
  }
  chart.series = {entropy, top, embedding, recent};
  chart.marker_x = static_cast<double>(sublayers);
  chart.marker_label = "final read";
  return chart;
}

}  // namespace attnres
