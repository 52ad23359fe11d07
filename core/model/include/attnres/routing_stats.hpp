// What a model's depth reads learnt (docs/interop.md "attnres inspect"): routing statistics of
// every read over a text, and the static picture of its pseudo-queries.
//
//   const auto trace = forward(model, tokens).trace;
//   for (const ReadRouting& r : routing_statistics(trace)) r.normalised_entropy ...
//
// Per read r with n sources and weights alpha_t (token t = 0 .. T-1), each a mean over tokens:
//   normalised entropy  H_t / ln n, H_t = -sum_i alpha_ti ln alpha_ti (NaN when n = 1)
//   effective sources   exp(H_t) (1 .. n: how many sources the read spreads over)
//   top-1 mass          max_i alpha_ti
//   embedding weight    alpha on the embedding source v_0 (b_0), when the read has it
//   recent weight       alpha on the last source (the most recent output or the partial block)
#pragma once

#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres {

struct ReadRouting {
  int read = 0;
  std::string target;                // "sublayer 3 (attn, layer 1)", "final"
  std::vector<std::string> sources;  // labels: "emb", "b1", "partial", "v3"
  double normalised_entropy = 0.0;   // NaN for a one-source read
  double effective_sources = 1.0;
  double top1_mass = 1.0;
  double embedding_weight = 0.0;  // NaN when the read has no embedding source
  double recent_weight = 1.0;
};

// One entry per read of the trace (none for the standard residual).
std::vector<ReadRouting> routing_statistics(const ForwardTrace& trace);

// The pseudo-query of read r as it scores keys: w_r ⊙ g_r with the key norm's gain (or w_r
// without a key norm); (L + 1) rows, the final read last.
template <typename Scalar>
Eigen::MatrixXd effective_queries(const ModelWeights<Scalar>& model);
extern template Eigen::MatrixXd effective_queries(const ModelWeights<double>&);
extern template Eigen::MatrixXd effective_queries(const ModelWeights<float>&);
// Cosine similarity between the rows of `queries` ((L + 1) x (L + 1); NaN where a row is zero).
Eigen::MatrixXd row_cosines(const Eigen::MatrixXd& queries);

}  // namespace attnres
