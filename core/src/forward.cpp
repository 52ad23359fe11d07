#include "attnres/forward.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>

#include "attnres/depth_attention.hpp"
#include "attnres/error.hpp"
#include "attnres/layers.hpp"

namespace attnres {

std::string read_target_name(int read, int sublayers) {
  if (read == sublayers) return "final";
  return "sublayer " + std::to_string(read + 1) + " (" + (read % 2 == 0 ? "attn" : "mlp") +
         ", layer " + std::to_string(read / 2) + ")";
}

std::vector<int> semiseparable_ranks(const Eigen::MatrixXd& mixing, double tolerance) {
  std::vector<int> ranks;
  const Eigen::Index n = mixing.rows();
  for (Eigen::Index cut = 1; cut < n; ++cut) {
    const Eigen::MatrixXd block = mixing.bottomLeftCorner(n - cut, cut);  // M[k:, :k]
    const Eigen::JacobiSVD<Eigen::MatrixXd> svd(block);
    const auto& singular = svd.singularValues();
    const double largest = singular.size() ? singular(0) : 0.0;
    int rank = 0;
    for (Eigen::Index i = 0; i < singular.size(); ++i) {
      if (largest > 0.0 && singular(i) > tolerance * largest) ++rank;
    }
    ranks.push_back(rank);
  }
  return ranks;
}

namespace {

// A NaN or Inf is reported where it first appears instead of flowing into the output.
template <typename Scalar>
void require_finite(const Matrix<Scalar>& x, const std::string& what) {
  if (x.allFinite()) return;
  Eigen::Index row = 0, col = 0;
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    for (Eigen::Index c = 0; c < x.cols(); ++c) {
      if (!std::isfinite(static_cast<double>(x(r, c)))) {
        row = r;
        col = c;
        r = x.rows();
        break;
      }
    }
  }
  throw Error("forward: a non-finite value (" + std::to_string(static_cast<double>(x(row, col))) +
              ") first appeared in " + what + " at token " + std::to_string(row) + ", channel " +
              std::to_string(col) + (sizeof(Scalar) == 4 ? " (try --precision f64)" : ""));
}

template <typename Scalar>
double rms_of(const Matrix<Scalar>& x) {
  return std::sqrt(x.template cast<double>().array().square().mean());
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
      case DepthSource::Kind::embedding: return outputs.front();
      case DepthSource::Kind::sublayer_output:
        return outputs[static_cast<std::size_t>(source.first_member)];
      case DepthSource::Kind::block: return blocks[static_cast<std::size_t>(source.block)];
      case DepthSource::Kind::partial_block: return partial;
      case DepthSource::Kind::zero_placeholder: return zero;
    }
    return zero;
  }
};

// Reads are scheduled in groups that share one phase-1 pass (SPEC §2.4): the reads of one block
// (Block AttnRes) or of one schedule block of sqrt(L) sublayers (Full AttnRes, Appendix B); the
// final read joins the last group.
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

// Phase-1 results of the group being executed.
template <typename Scalar>
struct ScheduleGroup {
  int first_read = 0;
  std::size_t history_size = 0;                 // sources shared by every read of the group
  std::vector<SoftmaxStats<Scalar>> stats;      // per read of the group
  std::vector<Matrix<Scalar>> history_scores;   // per history source: (T, reads in group)
};

}  // namespace

template <typename Scalar>
ForwardResult<Scalar> forward(const ModelWeights<Scalar>& model, const std::vector<int>& tokens,
                              const ForwardOptions& options) {
  const ModelConfig& config = model.config;
  const int L = config.sublayers();
  const int d = config.hidden_size;
  if (tokens.empty()) throw Error("forward: no tokens given (expected at least one token id)");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config.vocab_size) {
      throw Error("token id " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i) + " is out of range (the vocabulary has ids 0 .. " +
                  std::to_string(config.vocab_size - 1) + ")");
    }
  }
  const ResidualMode mode = options.mode.value_or(config.attn_res.mode);
  const int block_size = options.block_size.value_or(config.attn_res.block_size);
  if (mode == ResidualMode::block && block_size == 0) {
    throw Error("forward: block mode needs a block size S (1 <= S <= L = " + std::to_string(L) +
                " sublayers)");
  }
  const DepthLayout layout = make_depth_layout(mode, L, block_size, options.zero_placeholder);
  const auto T = static_cast<Eigen::Index>(tokens.size());
  const RopeTable<Scalar> rope =
      make_rope_table<Scalar>(static_cast<int>(T), config.head_dim(), config.rope_theta);
  const auto key_eps = static_cast<Scalar>(config.attn_res.key_norm_eps);

  ForwardResult<Scalar> result;
  ForwardTrace& trace = result.trace;
  trace.mode = mode;
  trace.sublayers = L;
  trace.block_size = layout.block_size;
  trace.tokens = static_cast<int>(T);
  trace.two_phase = options.two_phase && mode != ResidualMode::standard;
  trace.zero_placeholder = options.zero_placeholder && mode == ResidualMode::block;
  trace.rank_tolerance = options.rank_tolerance;

  DepthState<Scalar> state;
  Matrix<Scalar> embedding(T, d);  // v_0 = h_1
  for (Eigen::Index t = 0; t < T; ++t) {
    embedding.row(t) = model.embed_tokens.row(tokens[static_cast<std::size_t>(t)]);
  }
  require_finite(embedding, "the token embedding v_0");
  state.outputs.push_back(embedding);
  state.blocks.push_back(embedding);
  state.zero = Matrix<Scalar>::Zero(T, d);
  state.partial = state.zero;

  auto run_sublayer = [&](int sublayer, const Matrix<Scalar>& h) {
    report_progress(options.progress, static_cast<std::size_t>(sublayer),
                    static_cast<std::size_t>(L), "forward pass");
    require_finite(h, "the input h of " + read_target_name(sublayer, L));
    trace.sublayer_input_rms.push_back(rms_of(h));
    Matrix<Scalar> v = sublayer_forward(model, sublayer, h, rope);  // (T, d)
    require_finite(v, "the output v of " + read_target_name(sublayer, L));
    trace.sublayer_output_rms.push_back(rms_of(v));
    return v;
  };

  if (mode == ResidualMode::standard) {
    // SPEC §2.1: h_{l+1} = h_l + f_l(h_l).
    Matrix<Scalar> h = embedding;  // (T, d)
    for (int s = 0; s < L; ++s) h += run_sublayer(s, h);
    result.hidden_final = std::move(h);
  } else {
    const std::vector<int> group_of = schedule_groups(layout, options);
    ScheduleGroup<Scalar> group;
    auto effective_query = [&](int read) -> Vector<Scalar> {
      const auto& weights = model.depth_read(read);
      return weights.query.cwiseProduct(weights.key_norm_gain);  // (d) w * g
    };

    for (int r = 0; r <= L; ++r) {
      const auto& sources = layout.reads[static_cast<std::size_t>(r)];
      ReadTrace read_trace{r, read_target_name(r, L), sources, {}, {}};
      Matrix<Scalar> h;      // (T, d) input of sublayer r (or the final read's output)
      Matrix<Scalar> alpha;  // (T, sources)

      if (!options.two_phase) {
        std::vector<const Matrix<Scalar>*> values;
        for (const auto& source : sources) values.push_back(&state.value(source));
        depth_attention_one_shot(values, model.depth_read(r), key_eps, &h, &alpha);
      } else {
        const int g = group_of[static_cast<std::size_t>(r)];
        if (r == 0 || group_of[static_cast<std::size_t>(r - 1)] != g) {
          // Phase 1: every read of the group reads the completed history once.
          int last = r;
          while (last < L && group_of[static_cast<std::size_t>(last + 1)] == g) ++last;
          std::size_t shared = sources.size();
          for (int other = r + 1; other <= last; ++other) {
            const auto& other_sources = layout.reads[static_cast<std::size_t>(other)];
            std::size_t common = 0;
            while (common < shared && common < other_sources.size() &&
                   other_sources[common] == sources[common]) {
              ++common;
            }
            shared = common;
          }
          std::vector<const Matrix<Scalar>*> history;
          std::vector<Vector<Scalar>> history_inv_rms;
          for (std::size_t i = 0; i < shared; ++i) {
            history.push_back(&state.value(sources[i]));
            history_inv_rms.push_back(key_inverse_rms(*history.back(), key_eps));
          }
          Matrix<Scalar> queries(last - r + 1, d);  // (reads in group, d)
          for (int q = r; q <= last; ++q) queries.row(q - r) = effective_query(q).transpose();
          group.first_read = r;
          group.history_size = shared;
          group.stats = phase_one_stats(history, history_inv_rms, queries, &group.history_scores);
        }
        // Phase 2: merge the sources produced inside the group, one at a time, divide once.
        const Eigen::Index q = r - group.first_read;
        SoftmaxStats<Scalar> stats = group.stats[static_cast<std::size_t>(q)];
        Matrix<Scalar> scores(T, static_cast<Eigen::Index>(sources.size()));  // (T, sources)
        for (std::size_t i = 0; i < group.history_size; ++i) {
          scores.col(static_cast<Eigen::Index>(i)) = group.history_scores[i].col(q);
        }
        const Vector<Scalar> query = effective_query(r);
        for (std::size_t i = group.history_size; i < sources.size(); ++i) {
          const Matrix<Scalar>& value = state.value(sources[i]);
          const Vector<Scalar> z = depth_scores(value, key_inverse_rms(value, key_eps), query);
          scores.col(static_cast<Eigen::Index>(i)) = z;
          stats = merge_stats(stats, single_source_stats(value, z));
        }
        h = stats.finish();
        alpha = ((scores.colwise() - stats.m).array().exp().colwise() / stats.l.array()).matrix();
      }

      read_trace.alpha = alpha.template cast<double>();
      read_trace.alpha_mean = read_trace.alpha.colwise().mean().transpose();
      trace.reads.push_back(std::move(read_trace));
      if (r == L) {
        result.hidden_final = std::move(h);
        break;
      }

      Matrix<Scalar> v = run_sublayer(r, h);
      const int sublayer = r + 1;  // 1-based
      if (mode == ResidualMode::block) {
        state.partial += v;
        if (sublayer % layout.block_size == 0 || sublayer == L) {
          state.blocks.push_back(state.partial);
          state.partial = state.zero;
        }
      }
      state.outputs.push_back(std::move(v));
    }
    if (mode == ResidualMode::block) {
      for (const auto& block : state.blocks) trace.block_summary_rms.push_back(rms_of(block));
    }
  }

  require_finite(result.hidden_final, "the final read's output");
  result.logits = rms_norm(result.hidden_final, model.norm, static_cast<Scalar>(config.rms_norm_eps)) *
                  model.lm_head.transpose();  // (T, vocab)
  require_finite(result.logits, "the logits");

  if (options.record_mixing) {
    const Eigen::Index n = L + 1;
    trace.mixing_per_token.assign(static_cast<std::size_t>(T), Eigen::MatrixXd::Zero(n, n));
    for (Eigen::Index t = 0; t < T; ++t) {
      auto& mixing = trace.mixing_per_token[static_cast<std::size_t>(t)];
      if (mode == ResidualMode::standard) {
        mixing.triangularView<Eigen::Lower>().setOnes();
        continue;
      }
      for (const auto& read : trace.reads) {
        for (std::size_t j = 0; j < read.sources.size(); ++j) {
          const auto& source = read.sources[j];
          for (int member = source.first_member; member <= source.last_member; ++member) {
            mixing(read.read, member) = read.alpha(t, static_cast<Eigen::Index>(j));
          }
        }
      }
    }
    trace.mixing_mean = Eigen::MatrixXd::Zero(n, n);
    for (const auto& mixing : trace.mixing_per_token) trace.mixing_mean += mixing;
    trace.mixing_mean /= static_cast<double>(T);
    trace.semiseparable_rank = semiseparable_ranks(trace.mixing_mean, options.rank_tolerance);
    trace.semiseparable_rank_max.assign(trace.semiseparable_rank.size(), 0);
    for (const auto& mixing : trace.mixing_per_token) {
      const auto ranks = semiseparable_ranks(mixing, options.rank_tolerance);
      for (std::size_t k = 0; k < ranks.size(); ++k) {
        trace.semiseparable_rank_max[k] = std::max(trace.semiseparable_rank_max[k], ranks[k]);
      }
    }
  }
  return result;
}

template ForwardResult<float> forward(const ModelWeights<float>&, const std::vector<int>&,
                                      const ForwardOptions&);
template ForwardResult<double> forward(const ModelWeights<double>&, const std::vector<int>&,
                                       const ForwardOptions&);

}  // namespace attnres
