#include "attnres/forward.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

#include "attnres/depth_attention.hpp"
#include "attnres/depth_read.hpp"
#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/layers.hpp"
#include "attnres/mhc.hpp"
#include "attnres/mixing_analysis.hpp"

namespace attnres {

std::string read_target_name(int read, int sublayers) {
  if (read == sublayers) return "final";
  return "sublayer " + std::to_string(read + 1) + " (" + (read % 2 == 0 ? "attn" : "mlp") +
         ", layer " + std::to_string(read / 2) + ")";
}

Eigen::VectorXd cut_singular_values(const Eigen::MatrixXd& mixing, Eigen::Index cut) {
  const Eigen::Index n = mixing.rows();
  if (cut < 1 || cut >= n) {
    throw Error("cut k = " + std::to_string(cut) + " is outside 1 .. " + std::to_string(n - 1) +
                " for a " + std::to_string(n) + " x " + std::to_string(mixing.cols()) + " matrix");
  }
  const Eigen::MatrixXd block = mixing.bottomLeftCorner(n - cut, cut);  // M[k:, :k]
  return Eigen::JacobiSVD<Eigen::MatrixXd>(block).singularValues();
}

int numerical_rank(const Eigen::VectorXd& singular, double tolerance) {
  const double largest = singular.size() ? singular(0) : 0.0;
  int rank = 0;
  for (Eigen::Index i = 0; i < singular.size(); ++i) {
    if (largest > 0.0 && singular(i) > tolerance * largest) ++rank;
  }
  return rank;
}

std::vector<int> semiseparable_ranks(const Eigen::MatrixXd& mixing, double tolerance) {
  std::vector<int> ranks;
  for (Eigen::Index cut = 1; cut < mixing.rows(); ++cut)
    ranks.push_back(numerical_rank(cut_singular_values(mixing, cut), tolerance));
  return ranks;
}

template <typename Scalar>
void require_finite(const Scalar* x, long rows, long cols, long row_stride,
                    const std::string& what) {
  for (long r = 0; r < rows; ++r) {
    const Scalar* row = x + r * row_stride;
    for (long c = 0; c < cols; ++c) {
      if (std::isfinite(static_cast<double>(row[c]))) continue;
      throw Error("forward: a non-finite value (" + std::to_string(static_cast<double>(row[c])) +
                  ") first appeared in " + what + " at token " + std::to_string(r) + ", channel " +
                  std::to_string(c) + (sizeof(Scalar) == 4 ? " (try --precision f64)" : ""));
    }
  }
}

template <typename Scalar>
double rms_of(const Scalar* x, long rows, long cols, long row_stride) {
  if (rows * cols <= 0) return 0.0;
  double sum = 0.0;  // accumulated in double, one vectorised row at a time
  for (long r = 0; r < rows; ++r) {
    sum += Eigen::Map<const Vector<Scalar>>(x + r * row_stride, cols)
               .template cast<double>()
               .squaredNorm();
  }
  return std::sqrt(sum / static_cast<double>(rows * cols));
}

template <typename Scalar>
bool all_finite(const Scalar* x, long rows, long cols, long row_stride) {
  for (long r = 0; r < rows; ++r) {
    if (!Eigen::Map<const Vector<Scalar>>(x + r * row_stride, cols).allFinite()) return false;
  }
  return true;
}

template bool all_finite(const float*, long, long, long);
template bool all_finite(const double*, long, long, long);
template void require_finite(const float*, long, long, long, const std::string&);
template void require_finite(const double*, long, long, long, const std::string&);
template double rms_of(const float*, long, long, long);
template double rms_of(const double*, long, long, long);

void check_tokens(const ModelConfig& config, const std::vector<int>& tokens) {
  if (tokens.empty()) throw Error("forward: no tokens given (expected at least one token id)");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size) {
      throw Error("token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                  " is out of range (the vocabulary has ids 0 .. " +
                  std::to_string(config.vocab_size - 1) + ")");
    }
  }
}

namespace {

bool plain_mode(ResidualMode mode) {
  return mode == ResidualMode::standard || mode == ResidualMode::full ||
         mode == ResidualMode::block;
}

}  // namespace

AttnResConfig resolve_scheme(const ModelConfig& config, const ForwardOptions& options) {
  const int L = config.sublayers();
  AttnResConfig scheme = config.attn_res;
  const ResidualMode mode = options.mode.value_or(scheme.mode);
  if (mode != scheme.mode) {
    // The model's own tensors must serve the other mode: only standard / Full / Block with
    // attention mixing share them (docs/schemes.md "Comparing schemes").
    const bool shares_tensors =
        plain_mode(mode) && plain_mode(scheme.mode) && scheme.mixing == DepthMixing::attention;
    if (!shares_tensors) {
      throw Error("forward: a " + scheme.describe() + " model cannot be read as mode " +
                  to_string(mode) +
                  " with its own tensors; convert it to that scheme first (attnres forward --mode "
                  "converts; "
                  "docs/schemes.md)");
    }
    if (mode == ResidualMode::standard) {
      scheme = AttnResConfig{};
      scheme.key_norm_eps = config.attn_res.key_norm_eps;
    }
    if (mode != ResidualMode::full) scheme.window = 0;
    scheme.mode = mode;
  }
  if (options.block_size) {
    if (scheme.mixing == DepthMixing::scalars && *options.block_size != scheme.block_size) {
      throw Error(
          "forward: the mixing logits of a mixing = scalars model are tied to its block size " +
          std::to_string(scheme.block_size) + "; convert the model to change it (docs/schemes.md)");
    }
    scheme.block_size = *options.block_size;
  }
  if (scheme.mode == ResidualMode::block && scheme.block_size == 0) {
    throw Error("forward: block mode needs a block size S (1 <= S <= L = " + std::to_string(L) +
                " sublayers)");
  }
  if (options.zero_placeholder && scheme.mode == ResidualMode::block &&
      (scheme.mixing != DepthMixing::attention || scheme.query_source != QuerySource::fixed)) {
    throw Error(
        "forward: the zero placeholder applies to Block AttnRes with mixing = attention and a "
        "static query only");
  }
  if (scheme.mode == ResidualMode::block && (scheme.block_size < 1 || scheme.block_size > L)) {
    throw Error("block size S must be between 1 and L = " + std::to_string(L) + " sublayers, got " +
                std::to_string(scheme.block_size));
  }
  ModelConfig checked = config;
  checked.attn_res = scheme;
  checked.validate("forward");
  return scheme;
}

DepthLayout resolve_layout(const ModelConfig& config, const ForwardOptions& options) {
  return make_depth_layout(resolve_scheme(config, options), config.sublayers(),
                           options.zero_placeholder);
}

ForwardTrace start_trace(const AttnResConfig& scheme, const DepthLayout& layout, int tokens,
                         const ForwardOptions& options) {
  ForwardTrace trace;
  trace.mode = layout.mode;
  trace.scheme = scheme;
  trace.sublayers = layout.sublayers;
  trace.block_size = layout.block_size;
  trace.tokens = tokens;
  trace.two_phase = options.two_phase && scheme.two_phase_limit().empty() && !options.mask;
  trace.zero_placeholder = options.zero_placeholder && layout.mode == ResidualMode::block;
  trace.rank_tolerance = options.rank_tolerance;
  return trace;
}

std::vector<int> schedule_groups(const DepthLayout& layout, const ForwardOptions& options) {
  const int L = layout.sublayers;
  int group_size = layout.block_size;
  if (layout.mode == ResidualMode::full) {
    group_size = options.full_schedule_block > 0
                     ? options.full_schedule_block
                     : static_cast<int>(std::lround(std::sqrt(static_cast<double>(L))));
    group_size = std::clamp(group_size, 1, L);
  }
  std::vector<int> group_of(static_cast<std::size_t>(L + 1));
  for (int r = 0; r < L; ++r) group_of[static_cast<std::size_t>(r)] = r / group_size;
  group_of[static_cast<std::size_t>(L)] = (L - 1) / group_size;
  return group_of;
}

std::size_t shared_history(const DepthLayout& layout, int first, int last) {
  const auto& sources = layout.reads[static_cast<std::size_t>(first)];
  std::size_t shared = sources.size();
  for (int other = first + 1; other <= last; ++other) {
    const auto& other_sources = layout.reads[static_cast<std::size_t>(other)];
    std::size_t common = 0;
    while (common < shared && common < other_sources.size() &&
           other_sources[common] == sources[common])
      ++common;
    shared = common;
  }
  return shared;
}

double rank_analysis_work(std::int64_t n) {
  double work = 0.0;
  for (std::int64_t k = 1; k < n; ++k) {
    const auto rows = static_cast<double>(n - k), cols = static_cast<double>(k);
    work += rows * cols * std::min(rows, cols);
  }
  return work;
}

MixingAnalysisPlan plan_mixing_analysis(std::int64_t sublayers, std::int64_t tokens) {
  const auto n = static_cast<double>(sublayers + 1);
  const double work = rank_analysis_work(sublayers + 1);
  MixingAnalysisPlan plan;
  plan.per_token_matrices = static_cast<double>(tokens) * n * n <= kMaxMixingPerTokenCells;
  plan.mean_ranks = work <= kMaxRankAnalysisWork;
  plan.token_ranks =
      plan.per_token_matrices && static_cast<double>(tokens) * work <= kMaxRankAnalysisWork;
  return plan;
}

std::string mixing_analysis_note(const ForwardTrace& trace) {
  const MixingAnalysisPlan plan = plan_mixing_analysis(trace.sublayers, trace.tokens);
  std::string skipped;
  if (!plan.per_token_matrices) skipped = "the per-token mixing matrices M_t";
  if (!plan.mean_ranks) {
    skipped += std::string(skipped.empty() ? "" : " and ") + "the semiseparable ranks";
  } else if (!plan.token_ranks) {
    skipped += std::string(skipped.empty() ? "" : " and ") +
               "the per-token semiseparable ranks (those of the mean M are given)";
  }
  if (skipped.empty()) return "";
  return "skipped " + skipped + ": at L = " + std::to_string(trace.sublayers) +
         " sublayers and T = " + std::to_string(trace.tokens) +
         " tokens they exceed the analysis bounds (256 MB of M_t; 1e9 multiply-adds of SVDs, "
         "docs/math.md §2.8)";
}

void record_mixing(ForwardTrace& trace, const ForwardOptions& options) {
  const Eigen::Index n = trace.sublayers + 1;
  const auto T = static_cast<std::size_t>(trace.tokens);
  const MixingAnalysisPlan plan = plan_mixing_analysis(trace.sublayers, trace.tokens);
  // Ctrl-C / SIGTERM is checked once per token and per cut (Cancelled, as the pass itself).
  const auto L = static_cast<std::size_t>(trace.sublayers);
  auto check = [&] { report_progress(options.progress, L, L, "forward pass"); };
  auto fill = [&](Eigen::MatrixXd& mixing, std::size_t t) {
    if (trace.mode == ResidualMode::standard) {
      mixing.triangularView<Eigen::Lower>().setOnes();
      return;
    }
    for (const auto& read : trace.reads) {
      for (std::size_t j = 0; j < read.sources.size(); ++j) {
        const auto& source = read.sources[j];
        for (int member = source.first_member; member <= source.last_member; ++member) {
          mixing(read.read, member) =
              read.alpha(static_cast<Eigen::Index>(t), static_cast<Eigen::Index>(j));
        }
      }
    }
  };
  trace.mixing_per_token.clear();
  trace.mixing_mean = Eigen::MatrixXd::Zero(n, n);
  if (plan.per_token_matrices) trace.mixing_per_token.reserve(T);
  Eigen::MatrixXd one = Eigen::MatrixXd::Zero(n, n);
  for (std::size_t t = 0; t < T; ++t) {
    check();
    one.setZero();
    fill(one, t);
    trace.mixing_mean += one;
    if (plan.per_token_matrices) trace.mixing_per_token.push_back(one);
  }
  if (T > 0) trace.mixing_mean /= static_cast<double>(T);
  trace.semiseparable_rank.clear();
  trace.semiseparable_rank_max.clear();
  auto ranks_of = [&](const Eigen::MatrixXd& mixing) {
    std::vector<int> ranks;
    for (Eigen::Index cut = 1; cut < mixing.rows(); ++cut) {
      check();
      ranks.push_back(numerical_rank(cut_singular_values(mixing, cut), options.rank_tolerance));
    }
    return ranks;
  };
  if (!plan.mean_ranks) return;
  trace.semiseparable_rank = ranks_of(trace.mixing_mean);
  if (!plan.token_ranks) return;
  trace.semiseparable_rank_max.assign(trace.semiseparable_rank.size(), 0);
  for (const auto& mixing : trace.mixing_per_token) {
    const auto ranks = ranks_of(mixing);
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      trace.semiseparable_rank_max[k] = std::max(trace.semiseparable_rank_max[k], ranks[k]);
    }
  }
}

namespace {

template <typename Scalar>
void require_finite(const Matrix<Scalar>& x, const std::string& what) {
  attnres::require_finite(x.data(), static_cast<long>(x.rows()), static_cast<long>(x.cols()),
                          static_cast<long>(x.cols()), what);
}

template <typename Scalar>
double rms_of(const Matrix<Scalar>& x) {
  return attnres::rms_of(x.data(), static_cast<long>(x.rows()), static_cast<long>(x.cols()),
                         static_cast<long>(x.cols()));
}

// The values a read can draw on, as the forward pass produces them.
template <typename Scalar>
struct DepthState {
  std::vector<Matrix<Scalar>> outputs;  // v_0 (embedding) .. v_l so far, each (T, d)
  std::vector<Matrix<Scalar>> blocks;   // b_0 = v_0, then completed blocks b_1 .., each (T, d)
  Matrix<Scalar> partial;               // running sum of the current block's outputs (T, d)
  Matrix<Scalar> zero;                  // (T, d) zeros: the placeholder's value

  const Matrix<Scalar>& value(const DepthSource& source) const {
    switch (source.kind) {
      case DepthSource::Kind::embedding:
        return outputs.front();
      case DepthSource::Kind::sublayer_output:
        return outputs[static_cast<std::size_t>(source.first_member)];
      case DepthSource::Kind::block:
        return blocks[static_cast<std::size_t>(source.block)];
      case DepthSource::Kind::partial_block:
        return partial;
      case DepthSource::Kind::zero_placeholder:
        return zero;
    }
    return zero;
  }
};

// Phase-1 results of the group being executed.
template <typename Scalar>
struct ScheduleGroup {
  int first_read = 0;
  std::size_t history_size = 0;                // sources shared by every read of the group
  std::vector<SoftmaxStats<Scalar>> stats;     // per read of the group
  std::vector<Matrix<Scalar>> history_scores;  // per history source: (T, reads in group)
};

// One read's result: the sublayer input h (T, d) and the weights alpha (T, sources).
template <typename Scalar>
struct ReadResult {
  Matrix<Scalar> h;
  Matrix<Scalar> alpha;
};

// The two-phase path's score pieces: w * g and 1 / rms(v) with the key norm, w and 1 without.
template <typename Scalar>
Vector<Scalar> effective_query(const ModelWeights<Scalar>& model, int read) {
  const auto& weights = model.depth_read(read);
  if (!model.config.attn_res.key_norm) return weights.query;
  return weights.query.cwiseProduct(weights.key_norm_gain);  // (d) w * g
}

template <typename Scalar>
Vector<Scalar> source_inverse_rms(const AttnResConfig& scheme, const Matrix<Scalar>& value,
                                  Scalar key_eps) {
  if (!scheme.key_norm) return Vector<Scalar>::Ones(value.rows());
  return key_inverse_rms(value, key_eps);
}

// One-shot read of any read-based scheme (docs/schemes.md): every source scored and weighted at
// once. alpha keeps every head: (T, H * sources).
template <typename Scalar>
ReadResult<Scalar> one_shot_read(const ModelWeights<Scalar>& model, const AttnResConfig& scheme,
                                 const DepthState<Scalar>& state,
                                 const std::vector<DepthSource>& sources, int read,
                                 Scalar key_eps) {
  std::vector<const Matrix<Scalar>*> values;
  for (const auto& source : sources) values.push_back(&state.value(source));
  ReadResult<Scalar> out;
  DepthReadCache<Scalar> cache;
  out.h = depth_read(scheme, model.depth_read(read), values, key_eps, &cache);
  out.alpha = std::move(cache.alpha);
  return out;
}

// A read with some sources removed: the remaining weights renormalised, h recomputed from them.
template <typename Scalar>
ReadResult<Scalar> masked_read(const ModelWeights<Scalar>& model, const AttnResConfig& scheme,
                               const DepthState<Scalar>& state,
                               const std::vector<DepthSource>& sources, int read, Scalar key_eps,
                               const std::vector<double>& keep) {
  if (depth_read_heads(scheme) != 1 ||
      !(scheme.gate == DepthGate::softmax || scheme.gate == DepthGate::sigmoid_normalized) ||
      scheme.mode == ResidualMode::denseformer) {
    throw Error(
        "history masks need single-head weights that sum to 1 (softmax or sigmoid_normalized gate, "
        "one head); " +
        scheme.describe() + " has others (docs/training.md)");
  }
  ReadResult<Scalar> out = one_shot_read(model, scheme, state, sources, read, key_eps);
  if (keep.size() != sources.size()) {
    throw Error("forward: the depth mask of read " + std::to_string(read) + " lists " +
                std::to_string(keep.size()) + " sources; the read has " +
                std::to_string(sources.size()));
  }
  if (std::all_of(keep.begin(), keep.end(), [](double k) { return k <= 0.0; })) return out;
  for (std::size_t i = 0; i < keep.size(); ++i)
    out.alpha.col(static_cast<Eigen::Index>(i)) *= static_cast<Scalar>(keep[i]);
  const Vector<Scalar> kept = out.alpha.rowwise().sum();  // (T)
  out.alpha.array().colwise() /= kept.array();
  out.h.setZero();
  for (std::size_t i = 0; i < sources.size(); ++i) {
    out.h.array() += state.value(sources[i]).array().colwise() *
                     out.alpha.col(static_cast<Eigen::Index>(i)).array();
  }
  return out;
}

// Phase 1 of the two-phase schedule: the reads first..last of a group read their shared,
// completed history once, with their queries stacked.
template <typename Scalar>
ScheduleGroup<Scalar> phase_one(const ModelWeights<Scalar>& model, const DepthLayout& layout,
                                const DepthState<Scalar>& state, int first, int last,
                                Scalar key_eps) {
  const auto& sources = layout.reads[static_cast<std::size_t>(first)];
  ScheduleGroup<Scalar> group;
  group.first_read = first;
  group.history_size = shared_history(layout, first, last);
  std::vector<const Matrix<Scalar>*> history;
  std::vector<Vector<Scalar>> history_inv_rms;
  for (std::size_t i = 0; i < group.history_size; ++i) {
    history.push_back(&state.value(sources[i]));
    history_inv_rms.push_back(source_inverse_rms(model.config.attn_res, *history.back(), key_eps));
  }
  Matrix<Scalar> queries(last - first + 1, model.config.hidden_size);  // (reads in group, d)
  for (int q = first; q <= last; ++q)
    queries.row(q - first) = effective_query(model, q).transpose();
  group.stats = phase_one_stats(history, history_inv_rms, queries, &group.history_scores);
  return group;
}

// Phase 2: read r merges the sources produced inside its group (not in the shared history), one
// at a time, into its phase-1 statistics, and divides once.
template <typename Scalar>
ReadResult<Scalar> phase_two_read(const ModelWeights<Scalar>& model,
                                  const DepthState<Scalar>& state,
                                  const ScheduleGroup<Scalar>& group,
                                  const std::vector<DepthSource>& sources, int read,
                                  Scalar key_eps) {
  const Eigen::Index q = read - group.first_read;
  const Eigen::Index T = state.outputs.front().rows();
  SoftmaxStats<Scalar> stats = group.stats[static_cast<std::size_t>(q)];
  Matrix<Scalar> scores(T, static_cast<Eigen::Index>(sources.size()));  // (T, sources)
  for (std::size_t i = 0; i < group.history_size; ++i) {
    scores.col(static_cast<Eigen::Index>(i)) = group.history_scores[i].col(q);
  }
  const Vector<Scalar> query = effective_query(model, read);
  for (std::size_t i = group.history_size; i < sources.size(); ++i) {
    const Matrix<Scalar>& value = state.value(sources[i]);
    const Vector<Scalar> z =
        depth_scores(value, source_inverse_rms(model.config.attn_res, value, key_eps), query);
    scores.col(static_cast<Eigen::Index>(i)) = z;
    stats = merge_stats(stats, single_source_stats(value, z));
  }
  ReadResult<Scalar> out;
  out.h = stats.finish();
  out.alpha = ((scores.colwise() - stats.m).array().exp().colwise() / stats.l.array()).matrix();
  return out;
}

// Phase 1 of the merged-statistics schedule: each read of the group reads the group's shared
// history (its longest common prefix of sources).
template <typename Scalar>
struct GenericGroup {
  int first_read = 0;
  std::size_t history_size = 0;
  std::vector<DepthReadStats<Scalar>> stats;  // per read of the group
};

template <typename Scalar>
GenericGroup<Scalar> generic_phase_one(const ModelWeights<Scalar>& model,
                                       const AttnResConfig& scheme, const DepthLayout& layout,
                                       const DepthState<Scalar>& state, int first, int last,
                                       Scalar key_eps) {
  GenericGroup<Scalar> group;
  group.first_read = first;
  group.history_size = shared_history(layout, first, last);
  const auto& sources = layout.reads[static_cast<std::size_t>(first)];
  std::vector<const Matrix<Scalar>*> history;
  for (std::size_t i = 0; i < group.history_size; ++i) history.push_back(&state.value(sources[i]));
  for (int r = first; r <= last; ++r) {
    const auto n = static_cast<Eigen::Index>(layout.reads[static_cast<std::size_t>(r)].size());
    group.stats.push_back(depth_read_stats(scheme, model.depth_read(r), history, 0, n, key_eps));
  }
  return group;
}

// Phase 2: merge each source produced inside the group, then finish once.
template <typename Scalar>
ReadResult<Scalar> generic_phase_two(const ModelWeights<Scalar>& model, const AttnResConfig& scheme,
                                     const DepthState<Scalar>& state,
                                     const GenericGroup<Scalar>& group,
                                     const std::vector<DepthSource>& sources, int read,
                                     Scalar key_eps) {
  DepthReadStats<Scalar> stats = group.stats[static_cast<std::size_t>(read - group.first_read)];
  const auto n = static_cast<Eigen::Index>(sources.size());
  for (std::size_t i = group.history_size; i < sources.size(); ++i) {
    const DepthReadStats<Scalar> local =
        depth_read_stats(scheme, model.depth_read(read), {&state.value(sources[i])},
                         static_cast<Eigen::Index>(i), n, key_eps);
    stats = merge_read_stats(scheme, stats, local);
  }
  ReadResult<Scalar> out;
  out.h = finish_read_stats(scheme, stats, &out.alpha);
  return out;
}

// Block bookkeeping after sublayer r (0-based) produced v: the partial sum grows, and a full (or
// the last, incomplete) block becomes a block summary.
template <typename Scalar>
void add_output(const DepthLayout& layout, DepthState<Scalar>& state, int r, Matrix<Scalar> v) {
  const int sublayer = r + 1;  // 1-based
  if (layout.mode == ResidualMode::block) {
    state.partial += v;
    if (sublayer % layout.block_size == 0 || sublayer == layout.sublayers) {
      state.blocks.push_back(state.partial);
      state.partial = state.zero;
    }
  }
  state.outputs.push_back(std::move(v));
}

// alpha: (T, heads * sources); the trace keeps the mean over heads in `alpha` and every head in
// `alpha_heads` (multi-head reads only).
template <typename Scalar>
void record_read(ForwardTrace& trace, int r, const std::vector<DepthSource>& sources,
                 const Matrix<Scalar>& alpha, int heads = 1) {
  ReadTrace read;
  read.read = r;
  read.target = read_target_name(r, trace.sublayers);
  read.sources = sources;
  read.heads = heads;
  if (heads > 1) {
    read.alpha_heads = alpha.template cast<double>();
    read.alpha = head_mean(alpha, heads).template cast<double>();
  } else {
    read.alpha = alpha.template cast<double>();
  }
  read.alpha_mean = read.alpha.colwise().mean().transpose();
  trace.reads.push_back(std::move(read));
}

}  // namespace

template <typename Scalar>
ForwardResult<Scalar> forward(const ModelWeights<Scalar>& model, const std::vector<int>& tokens,
                              const ForwardOptions& options) {
  const ModelConfig& config = model.config;
  check_tokens(config, tokens);
  const AttnResConfig scheme = resolve_scheme(config, options);
  const DepthLayout layout =
      make_depth_layout(scheme, config.sublayers(), options.zero_placeholder);
  const int L = layout.sublayers;
  const auto T = static_cast<Eigen::Index>(tokens.size());
  const RopeTable<Scalar> rope =
      make_rope_table<Scalar>(static_cast<int>(T), config.head_dim(), config.rope_theta);
  const auto key_eps = static_cast<Scalar>(config.attn_res.key_norm_eps);

  ForwardResult<Scalar> result;
  ForwardTrace& trace = result.trace;
  trace = start_trace(scheme, layout, static_cast<int>(T), options);

  DepthState<Scalar> state;
  Matrix<Scalar> embedding(T, config.hidden_size);  // v_0 = h_1
  for (Eigen::Index t = 0; t < T; ++t)
    embedding.row(t) = model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
  require_finite(embedding, "the token embedding v_0");
  state.outputs.push_back(embedding);
  state.blocks.push_back(embedding);
  state.zero = Matrix<Scalar>::Zero(T, config.hidden_size);
  state.partial = state.zero;

  auto run_sublayer = [&](int sublayer, const Matrix<Scalar>& h) {
    report_progress(options.progress, static_cast<std::size_t>(sublayer),
                    static_cast<std::size_t>(L), "forward pass");
    require_finite(h, "the input h of " + read_target_name(sublayer, L));
    trace.sublayer_input_rms.push_back(rms_of(h));
    if (options.sublayer_inputs != nullptr)
      options.sublayer_inputs->push_back(h.template cast<double>());
    Matrix<Scalar> v = sublayer_forward(model, sublayer, h, rope);  // (T, d)
    require_finite(v, "the output v of " + read_target_name(sublayer, L));
    trace.sublayer_output_rms.push_back(rms_of(v));
    return v;
  };

  if (layout.mode == ResidualMode::standard) {
    // h_{l+1} = h_l + f_l(h_l) (docs/math.md).
    Matrix<Scalar> h = embedding;  // (T, d)
    for (int s = 0; s < L; ++s) h += run_sublayer(s, h);
    result.hidden_final = std::move(h);
  } else if (layout.mode == ResidualMode::mhc) {
    // m streams, read by H_pre, mixed by H_res, written by H_post (docs/schemes.md "mHC"). The
    // trace lists each sublayer input's effective weights over v_0 .. v_r.
    if (options.mask) throw Error("history masks apply to reads over stored sources; mHC has none");
    std::vector<Matrix<Scalar>> streams(static_cast<std::size_t>(scheme.streams), embedding);
    MhcCoefficientsOfOutputs<Scalar> coefficients;
    coefficients.coefficients.push_back(Matrix<Scalar>::Ones(T, scheme.streams));
    const auto eps = static_cast<Scalar>(config.rms_norm_eps);
    for (int r = 0; r < L; ++r) {
      const MhcStep<Scalar> step = mhc_coefficients(scheme, model.depth_read(r), streams, eps);
      record_read(trace, r, layout.reads[static_cast<std::size_t>(r)],
                  coefficients.read_weights(step));
      const Matrix<Scalar> v = run_sublayer(r, mhc_sublayer_input(step, streams));
      mhc_write(step, v, streams);
      coefficients.advance(step);
    }
    record_read(trace, L, layout.reads[static_cast<std::size_t>(L)], coefficients.final_weights());
    result.hidden_final = Matrix<Scalar>::Zero(T, config.hidden_size);
    for (const auto& stream : streams) result.hidden_final += stream;
    result.hidden_final /= static_cast<Scalar>(scheme.streams);
  } else {
    const std::vector<int> group_of = schedule_groups(layout, options);
    ScheduleGroup<Scalar> group;
    GenericGroup<Scalar> generic_group;
    for (int r = 0; r <= L; ++r) {
      const auto& sources = layout.reads[static_cast<std::size_t>(r)];
      ReadResult<Scalar> read;
      if (options.mask) {
        if (options.mask->keep.size() != static_cast<std::size_t>(L + 1)) {
          throw Error("forward: the depth mask lists " + std::to_string(options.mask->keep.size()) +
                      " reads; the model has " + std::to_string(L + 1));
        }
        read = masked_read(model, scheme, state, sources, r, key_eps,
                           options.mask->keep[static_cast<std::size_t>(r)]);
      } else if (!trace.two_phase) {
        read = one_shot_read(model, scheme, state, sources, r, key_eps);
      } else if (!scheme.stacked_two_phase()) {
        // Two-phase by merged statistics (docs/schemes.md "Which schedules apply"): the group's
        // shared history once per read, then each local source merged in, one division at the end.
        const int g = group_of[static_cast<std::size_t>(r)];
        if (r == 0 || group_of[static_cast<std::size_t>(r - 1)] != g) {
          int last = r;
          while (last < L && group_of[static_cast<std::size_t>(last + 1)] == g) ++last;
          generic_group = generic_phase_one(model, scheme, layout, state, r, last, key_eps);
        }
        read = generic_phase_two(model, scheme, state, generic_group, sources, r, key_eps);
      } else {
        const int g = group_of[static_cast<std::size_t>(r)];
        if (r == 0 || group_of[static_cast<std::size_t>(r - 1)] != g) {
          int last = r;
          while (last < L && group_of[static_cast<std::size_t>(last + 1)] == g) ++last;
          group = phase_one(model, layout, state, r, last, key_eps);
        }
        read = phase_two_read(model, state, group, sources, r, key_eps);
      }
      record_read(trace, r, sources, read.alpha, depth_read_heads(scheme));
      if (r == L) {
        result.hidden_final = std::move(read.h);
        break;
      }
      add_output(layout, state, r, run_sublayer(r, read.h));
    }
    if (layout.mode == ResidualMode::block) {
      for (const auto& block : state.blocks) trace.block_summary_rms.push_back(rms_of(block));
    }
  }

  require_finite(result.hidden_final, "the final read's output");
  result.logits =
      rms_norm(result.hidden_final, model.norm, static_cast<Scalar>(config.rms_norm_eps)) *
      model.lm_head.transpose();  // (T, vocab)
  require_finite(result.logits, "the logits");
  if (options.record_mixing) record_mixing(trace, options);
  return result;
}

template ForwardResult<float> forward(const ModelWeights<float>&, const std::vector<int>&,
                                      const ForwardOptions&);
template ForwardResult<double> forward(const ModelWeights<double>&, const std::vector<int>&,
                                       const ForwardOptions&);

}  // namespace attnres
