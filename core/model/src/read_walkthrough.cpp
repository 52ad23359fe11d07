// One depth read, step by step (read_walkthrough.hpp): the sources from the reference forward
// pass, the one-shot read through depth_read on the token's row, the two-phase form through
// depth_read_stats / merge_read_stats / finish_read_stats, with every intermediate number kept.
#include "attnres/read_walkthrough.hpp"

#include <cmath>
#include <limits>

#include "attnres/depth_read.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/layers.hpp"

namespace attnres {

namespace {

// "v1 + v2 + v3": the members first .. last (appended piece by piece: GCC 12 gives a false
// -Wrestrict on "literal" + std::string chains).
std::string member_sum(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i) {
    if (i > first) text += " + ";
    text += "v";
    text += std::to_string(i);
  }
  return text;
}

double rms(const Eigen::VectorXd& x) {
  return x.size() == 0 ? 0.0 : std::sqrt(x.squaredNorm() / static_cast<double>(x.size()));
}

Eigen::VectorXd row_vector(const Matrix<double>& x) {
  return x.row(0).transpose();
}

WalkthroughStats stats_at_token(const DepthReadStats<double>& stats, int first, int count) {
  WalkthroughStats out;
  for (int i = 0; i < count; ++i) out.sources.push_back(first + i);
  out.o = row_vector(stats.o);
  out.m = row_vector(stats.m);
  out.l = row_vector(stats.l);
  return out;
}

// The statistics of no source: m = -inf, l = 0, o = 0 (the merge leaves the other side as it is).
DepthReadStats<double> empty_stats(Eigen::Index d, int heads) {
  DepthReadStats<double> stats;
  stats.o = Matrix<double>::Zero(1, d);
  stats.l = Matrix<double>::Zero(1, heads);
  stats.m = Matrix<double>::Constant(1, heads, -std::numeric_limits<double>::infinity());
  stats.scores = Matrix<double>(1, 0);
  return stats;
}

bool walkthrough_supports(const AttnResConfig& scheme) {
  if (scheme.mode == ResidualMode::standard) return true;
  return scheme.attention_mode() && scheme.mixing == DepthMixing::attention &&
         scheme.gate == DepthGate::softmax;
}

}  // namespace

std::string describe_depth_source(const DepthSource& source, int sublayers) {
  std::string text;
  switch (source.kind) {
    case DepthSource::Kind::embedding:
      return "the embedding v_0";
    case DepthSource::Kind::sublayer_output:
      text = source.label();
      text += ": the output of ";
      text += read_target_name(source.first_member - 1, sublayers);
      return text;
    case DepthSource::Kind::block:
      text = source.label();
      text += " = ";
      text += member_sum(source.first_member, source.last_member);
      return text;
    case DepthSource::Kind::partial_block:
      text = "partial = ";
      text += member_sum(source.first_member, source.last_member);
      text += " (block ";
      text += std::to_string(source.block);
      text += " so far)";
      return text;
    case DepthSource::Kind::zero_placeholder:
      return "zero: the placeholder (a zero vector)";
  }
  return text;
}

ReadWalkthrough read_walkthrough(const ModelWeights<double>& model, const std::vector<int>& tokens,
                                 int token, int read, const ForwardOptions& options) {
  const ModelConfig& config = model.config;
  const int L = config.sublayers();
  const auto T = static_cast<int>(tokens.size());
  check_tokens(config, tokens);
  if (token < 0 || token >= T) {
    std::string message = "read walkthrough: token position ";
    message += std::to_string(token);
    message += " is out of range (T = ";
    message += std::to_string(T);
    if (T == 1) {
      message += " token: position 0)";
    } else {
      message += " tokens: positions 0 .. ";
      message += std::to_string(T - 1);
      message += ")";
    }
    throw Error(message);
  }
  if (read < 0 || read > L) {
    std::string message = "read walkthrough: read ";
    message += std::to_string(read);
    message += " is out of range (L = ";
    message += std::to_string(L);
    message += " sublayers: reads 0 .. ";
    message += std::to_string(L);
    message += "; read r forms the input of sublayer r + 1, read ";
    message += std::to_string(L);
    message += " is the final read)";
    throw Error(message);
  }
  if (options.mask != nullptr)
    throw Error("read walkthrough: a masked read is not walked through (leave out the mask)");
  const AttnResConfig scheme = resolve_scheme(config, options);
  if (!walkthrough_supports(scheme)) {
    throw Error(
        "read walkthrough: the step-by-step read covers the standard residual and Full and Block "
        "AttnRes with the softmax gate and attention mixing; " +
        scheme.describe() +
        " is not one of them (attnres forward --trace records its weights; docs/schemes.md)");
  }

  // The reference forward pass gives every sublayer's input h_l; the read's sources are the
  // outputs v_l = f_l(h_l) of the sublayers before it, summed as the layout says.
  std::vector<Eigen::MatrixXd> inputs;
  ForwardOptions pass = options;
  pass.record_mixing = false;
  pass.sublayer_inputs = &inputs;
  (void)forward(model, tokens, pass);
  const RopeTable<double> rope = make_rope_table<double>(T, config.head_dim(), config.rope_theta);
  const Eigen::Index d = config.hidden_size;
  std::vector<Matrix<double>> outputs;  // v_0 .. v_read, each (T, d)
  Matrix<double> embedding(T, d);
  for (int t = 0; t < T; ++t)
    embedding.row(t) = model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
  outputs.push_back(embedding);
  for (int s = 0; s < read && s < L; ++s) {
    const Matrix<double> h = inputs[static_cast<std::size_t>(s)];
    outputs.push_back(sublayer_forward(model, s, h, rope));
  }

  ReadWalkthrough w;
  w.scheme = scheme;
  w.sublayers = L;
  w.read = read;
  w.target = read_target_name(read, L);
  w.tokens = T;
  w.token = token;
  w.token_id = tokens[static_cast<std::size_t>(token)];
  w.key_norm_eps = config.attn_res.key_norm_eps;

  std::vector<DepthSource> sources;
  if (scheme.mode == ResidualMode::standard) {
    sources.push_back(DepthSource{});  // the embedding
    for (int i = 1; i <= read; ++i) {
      DepthSource source;
      source.kind = DepthSource::Kind::sublayer_output;
      source.first_member = source.last_member = i;
      sources.push_back(source);
    }
  } else {
    const DepthLayout layout = make_depth_layout(scheme, L, options.zero_placeholder);
    sources = layout.reads[static_cast<std::size_t>(read)];
  }
  // Each source's value at token t: a block or partial sum added in the forward pass's order.
  std::vector<Matrix<double>> rows;
  for (const DepthSource& source : sources) {
    Matrix<double> row = Matrix<double>::Zero(1, d);
    if (source.kind == DepthSource::Kind::embedding) {
      row = outputs.front().row(token);
    } else if (source.kind != DepthSource::Kind::zero_placeholder) {
      for (int member = source.first_member; member <= source.last_member; ++member)
        row += outputs[static_cast<std::size_t>(member)].row(token);
    }
    rows.push_back(std::move(row));
    WalkthroughSource step;
    step.source = source;
    step.label = source.label();
    step.description = describe_depth_source(source, L);
    step.value = row_vector(rows.back());
    step.rms = rms(step.value);
    w.sources.push_back(std::move(step));
  }
  const auto n = static_cast<Eigen::Index>(sources.size());

  if (scheme.mode == ResidualMode::standard) {
    // h = v_0 + v_1 + ... + v_r, every weight 1 (docs/math.md §2.1), summed as the forward does.
    Eigen::VectorXd h = w.sources.front().value;
    for (std::size_t i = 1; i < w.sources.size(); ++i) h += w.sources[i].value;
    for (auto& step : w.sources) step.weight = Eigen::VectorXd::Ones(1);
    w.h = h;
    w.h_rms = rms(w.h);
    w.two_phase_note = "the standard residual has no depth attention to split: h = v_0 + ... + v_r";
    return w;
  }

  // One-shot: depth_read on the token's row (reads never mix positions).
  const auto& weights = model.depth_read(read);
  const double eps = config.attn_res.key_norm_eps;
  std::vector<const Matrix<double>*> pointers;
  for (const auto& row : rows) pointers.push_back(&row);
  DepthReadCache<double> cache;
  const Matrix<double> h = depth_read(scheme, weights, pointers, eps, &cache);
  const int heads = cache.heads;
  const Eigen::Index width = d / heads;
  w.heads = heads;
  w.query = scheme.query_source == QuerySource::input ? row_vector(cache.query) : weights.query;
  if (scheme.key_norm) w.key_norm_gain = weights.key_norm_gain;
  w.softmax_max.resize(heads);
  w.softmax_denominator.resize(heads);
  for (int c = 0; c < heads; ++c) {
    w.softmax_max(c) = cache.scores.middleCols(c * n, n).maxCoeff();
    w.softmax_denominator(c) =
        (cache.scores.middleCols(c * n, n).array() - w.softmax_max(c)).exp().sum();
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    WalkthroughSource& step = w.sources[static_cast<std::size_t>(i)];
    const Matrix<double>& inverse_rms = cache.key_inv_rms[static_cast<std::size_t>(i)];  // (1, H)
    step.key_rms.resize(heads);
    step.key.resize(d);
    step.score.resize(heads);
    step.shifted_exp.resize(heads);
    step.weight.resize(heads);
    for (int c = 0; c < heads; ++c) {
      step.key_rms(c) = 1.0 / inverse_rms(0, c);
      auto key = step.key.segment(c * width, width);
      key = step.value.segment(c * width, width) * inverse_rms(0, c);
      if (scheme.key_norm) key.array() *= weights.key_norm_gain.segment(c * width, width).array();
      step.score(c) = cache.scores(0, c * n + i);
      step.shifted_exp(c) = std::exp(step.score(c) - w.softmax_max(c));
      step.weight(c) = cache.alpha(0, c * n + i);
    }
  }
  w.h = row_vector(h);
  w.h_rms = rms(w.h);

  if (const std::string limit = scheme.two_phase_limit(); !limit.empty()) {
    w.two_phase_note = limit;
    return w;
  }
  // Two-phase, on the schedule the forward pass runs: phase 1 over the group's shared history,
  // phase 2 over the read's other sources, then one merge and one division.
  const DepthLayout layout = make_depth_layout(scheme, L, options.zero_placeholder);
  const std::vector<int> group_of = schedule_groups(layout, options);
  WalkthroughTwoPhase two;
  two.group_first_read = two.group_last_read = read;
  const int group = group_of[static_cast<std::size_t>(read)];
  while (two.group_first_read > 0 &&
         group_of[static_cast<std::size_t>(two.group_first_read - 1)] == group)
    --two.group_first_read;
  while (two.group_last_read < L &&
         group_of[static_cast<std::size_t>(two.group_last_read + 1)] == group)
    ++two.group_last_read;
  const auto history =
      static_cast<Eigen::Index>(shared_history(layout, two.group_first_read, two.group_last_read));
  const std::vector<const Matrix<double>*> first(pointers.begin(), pointers.begin() + history);
  const std::vector<const Matrix<double>*> second(pointers.begin() + history, pointers.end());
  const DepthReadStats<double> phase1 = depth_read_stats(scheme, weights, first, 0, n, eps);
  const DepthReadStats<double> phase2 =
      second.empty() ? empty_stats(d, heads)
                     : depth_read_stats(scheme, weights, second, history, n, eps);
  const DepthReadStats<double> merged = merge_read_stats(scheme, phase1, phase2);
  Matrix<double> alpha;
  const Matrix<double> h_merged = finish_read_stats(scheme, merged, &alpha);
  two.phase1 = stats_at_token(phase1, 0, static_cast<int>(history));
  two.phase2 = stats_at_token(phase2, static_cast<int>(history), static_cast<int>(n - history));
  two.merged = stats_at_token(merged, 0, static_cast<int>(n));
  two.scale1 = (two.phase1.m - two.merged.m).array().exp().matrix();
  two.scale2 = (two.phase2.m - two.merged.m).array().exp().matrix();
  two.h = row_vector(h_merged);
  two.weights = row_vector(alpha);
  two.max_difference = (two.h - w.h).cwiseAbs().maxCoeff();
  for (Eigen::Index i = 0; i < n; ++i)
    w.sources[static_cast<std::size_t>(i)].phase = i < history ? 1 : 2;
  w.two_phase = std::move(two);
  return w;
}

}  // namespace attnres
