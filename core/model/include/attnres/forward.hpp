// The reference forward pass of every residual scheme — the standard residual, Full and Block
// AttnRes (docs/math.md §2.1–2.4) and the zoo of docs/schemes.md — and the trace it records
// (docs/math.md §2.7–2.8).
//
//   ModelWeights<double> model = random_model(config, {.seed = 1, .query_std = 0.5});
//   ForwardOptions options;
//   options.mode = ResidualMode::block;
//   options.block_size = 2;
//   ForwardResult<double> result = forward(model, {1, 2, 3}, options);
//   result.logits;                 // (T, vocab)
//   result.trace.reads[0].alpha;   // (T, sources of read 0)
#pragma once

#include <Eigen/Core>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/depth_layout.hpp"
#include "attnres/model.hpp"

namespace attnres {

// Sources removed from depth reads (the history-masking experiment, docs/training.md): the
// weight of source i of read r is multiplied by keep[r][i] (0 removes it, 1 keeps it, between
// removes part of it), then the weights are renormalised to sum to 1. A read whose every factor
// is 0 keeps its weights (nothing to renormalise over).
struct DepthMask {
  std::vector<std::vector<double>> keep;  // per read r = 0 .. L, per source of that read
};

struct ForwardOptions {
  std::optional<ResidualMode> mode;  // default: the model's config
  std::optional<int> block_size;     // S in sublayers, default: the model's config
  bool two_phase = true;  // the (o, m, l) schedule where the scheme allows it; off = one-shot
  bool zero_placeholder = false;  // Block: a zero source at each block's first sublayer
  int full_schedule_block = 0;    // Full two-phase schedule block; 0 = round(sqrt(L))
  bool record_mixing = true;      // build M per token and its semiseparable ranks
  double rank_tolerance = 1e-6;   // numerical rank: singular values > tol * sigma_max
  // Full/Block only: reads use one-shot weights with these sources removed (the fast engines
  // hand a masked pass to the reference). Null: no mask.
  const DepthMask* mask = nullptr;
  // When set, receives each sublayer's input h (T, d), in order (reference engine only; the
  // duality view reads the real input of a layer's attention from it).
  std::vector<Eigen::MatrixXd>* sublayer_inputs = nullptr;
  // Called before each sublayer with (sublayers done, L); returning false stops the pass with
  // attnres::Cancelled (the CLI's Ctrl-C, the GUI's Cancel).
  Progress progress;
};

// One read's weights (docs/math.md §2.7).
struct ReadTrace {
  int read = 0;        // r = 0 .. L (L = final read)
  std::string target;  // "sublayer 3 (attn, layer 1)" or "final"
  std::vector<DepthSource> sources;
  Eigen::MatrixXd alpha;        // (T, sources); multi-head reads: the mean over heads
  Eigen::VectorXd alpha_mean;   // (sources), mean over tokens
  int heads = 1;                // depth-attention heads (docs/schemes.md)
  Eigen::MatrixXd alpha_heads;  // (T, heads * sources), column c * sources + i; heads > 1 only
};

struct ForwardTrace {
  ResidualMode mode = ResidualMode::standard;
  AttnResConfig scheme;  // every setting of the scheme that ran (docs/schemes.md)
  int sublayers = 0;     // L
  int block_size = 0;    // S (block mode), 1 (full), 0 (standard)
  int tokens = 0;        // T
  bool two_phase = false;
  bool zero_placeholder = false;
  std::vector<ReadTrace> reads;             // empty for the standard residual
  std::vector<double> sublayer_input_rms;   // (L) RMS over all T x d of h_l
  std::vector<double> sublayer_output_rms;  // (L) RMS of v_l
  std::vector<double> block_summary_rms;    // (N + 1) RMS of b_0 .. b_N, block mode only
  // Depth mixing matrix M (docs/math.md §2.8): h_l = sum_i M(l, i) v_i, rows = reads 0 .. L,
  // columns = v_0 .. v_L; lower triangular.
  std::vector<Eigen::MatrixXd> mixing_per_token;  // T x (L+1, L+1)
  Eigen::MatrixXd mixing_mean;                    // (L+1, L+1)
  double rank_tolerance = 0.0;
  std::vector<int> semiseparable_rank;      // cut k = 1 .. L: rank(M_mean[k:, :k])
  std::vector<int> semiseparable_rank_max;  // max over tokens of the per-token rank
};

template <typename Scalar>
struct ForwardResult {
  Matrix<Scalar> logits;        // (T, vocab)
  Matrix<Scalar> hidden_final;  // (T, d) output of the final read, before the final RMSNorm
  ForwardTrace trace;
};

// Runs the model on `tokens` (each in [0, vocab)). Throws attnres::Error on bad tokens, a block
// size outside 1..L, or block mode without a block size.
template <typename Scalar>
ForwardResult<Scalar> forward(const ModelWeights<Scalar>& model, const std::vector<int>& tokens,
                              const ForwardOptions& options = {});

// Numerical rank of M[k:, :k] for k = 1 .. rows-1 (singular values > tol * sigma_max).
std::vector<int> semiseparable_ranks(const Eigen::MatrixXd& mixing, double tolerance);
// The singular values of the cut M[k:, :k] (largest first; 1 <= k < rows) and its numerical rank
// (the count above tol * the largest): what semiseparable_ranks counts at one cut.
Eigen::VectorXd cut_singular_values(const Eigen::MatrixXd& mixing, Eigen::Index cut);
int numerical_rank(const Eigen::VectorXd& singular_values, double tolerance);

// "sublayer 3 (attn, layer 1)" / "final": the target of read r of a model with L sublayers.
std::string read_target_name(int read, int sublayers);

}  // namespace attnres
