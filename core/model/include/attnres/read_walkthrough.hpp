// One depth read, step by step: every number of read r at token t, so that a teacher can walk
// through it (docs/math.md §2.2 Full AttnRes: reads and sources, §2.3 Block AttnRes, §2.4
// Two-phase schedule; docs/schemes.md "Read-based schemes: one formula").
//
//   sources v_i the read sees (the layout of depth_layout.hpp), each with its RMS
//   keys      k_i = KeyNorm(v_i) = g . v_i / sqrt(mean(v_i^2) + eps)   (per head's channels)
//   scores    s_i = q . k_i                                            (per head)
//   softmax   m = max_i s_i, l = sum_i exp(s_i - m), alpha_i = exp(s_i - m) / l
//   sum       h = sum_i alpha_i v_i
//   two-phase (o, m, l) of the shared history (phase 1) and of the sources produced inside the
//             read's schedule group (phase 2: for Block the partial sum), merged online:
//             m = max(m1, m2), l = l1 exp(m1 - m) + l2 exp(m2 - m), o likewise, h = o / l.
//
// The one-shot numbers come from depth_read (depth_read.hpp) on the token's row, the two-phase
// ones from depth_read_stats / merge_read_stats / finish_read_stats, and the sources from the
// reference forward pass (forward.hpp): what the model computes, with every step exposed. The
// standard residual is the trivial case: every weight 1, h = v_0 + ... + v_r (docs/math.md §2.1).
//
//   ForwardOptions options;
//   options.mode = ResidualMode::block;
//   options.block_size = 2;
//   ReadWalkthrough w = read_walkthrough(model, {1, 2, 3}, /*token=*/2, /*read=*/3, options);
//   w.sources[1].score(0);      // s of source 1 (b1) in head 0
//   w.softmax_max(0);           // m of head 0
//   w.h;                        // (d) the input of sublayer 4 at token 2
//   w.two_phase->merged.l(0);   // l after the merge; w.two_phase->h equals w.h
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnres/depth_layout.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres {

// One source of the read, at token t. Per-head quantities have H entries (head c covers channels
// c d/H .. (c+1) d/H - 1); the standard residual has no keys or scores (empty vectors).
struct WalkthroughSource {
  DepthSource source;       // kind, block and member range v_first .. v_last
  std::string label;        // the trace's and the heatmap's name: "emb", "v3", "b2", "partial"
  std::string description;  // "the embedding v_0", "b1 = v1 + v2", "partial = v3 (block 2 so far)"
  Eigen::VectorXd value;    // (d) v_i at token t
  double rms = 0.0;         // sqrt(mean over the d channels of v_i^2), no eps
  Eigen::VectorXd
      key_rms;          // (H) sqrt(mean over head c's channels of v_i^2 + eps); 1 without key norm
  Eigen::VectorXd key;  // (d) KeyNorm(v_i) = g * v_i / key_rms (v_i itself without the key norm)
  Eigen::VectorXd score;        // (H) s_{c,i} = q . k_i over head c's channels
  Eigen::VectorXd shifted_exp;  // (H) exp(s_{c,i} - m_c)
  Eigen::VectorXd weight;       // (H) alpha_{c,i} = exp(s_{c,i} - m_c) / l_c (1 for standard)
  int phase = 0;                // 1 or 2 in the two-phase schedule; 0 when it does not apply
};

// Online-softmax statistics of a subset A of the read's sources at token t (docs/math.md §2.4):
// m = max_{i in A} s_i, l = sum_{i in A} exp(s_i - m), o = sum_{i in A} exp(s_i - m) v_i, per head.
// An empty subset has m = -inf, l = 0, o = 0.
struct WalkthroughStats {
  std::vector<int> sources;  // indices into ReadWalkthrough::sources
  Eigen::VectorXd o;         // (d)
  Eigen::VectorXd m;         // (H)
  Eigen::VectorXd l;         // (H)
};

// The read in the two-phase schedule the forward pass runs (docs/math.md §2.4): its schedule group
// (Block: the reads of one block; Full: round(sqrt(L)) sublayers, or
// ForwardOptions::full_schedule_block; the final read joins the last group), phase 1 over the
// group's shared history, phase 2 over the rest of the read's sources, and the merge.
struct WalkthroughTwoPhase {
  int group_first_read = 0;  // the reads of the schedule group
  int group_last_read = 0;
  WalkthroughStats phase1;      // the shared history (the completed blocks, for Block)
  WalkthroughStats phase2;      // produced inside the group (Block: the partial sum); may be empty
  Eigen::VectorXd scale1;       // (H) exp(m1 - m)
  Eigen::VectorXd scale2;       // (H) exp(m2 - m); 0 for an empty phase 2
  WalkthroughStats merged;      // merge_read_stats of the two: every source of the read
  Eigen::VectorXd h;            // (d) merged o / l, per head
  Eigen::VectorXd weights;      // (H n) alpha recovered from the merged statistics, head-major
  double max_difference = 0.0;  // max over channels |h - one-shot h|
};

struct ReadWalkthrough {
  AttnResConfig scheme;  // the scheme that ran (the model's, with the options' mode and S)
  int sublayers = 0;     // L
  int read = 0;          // r = 0 .. L: the input of sublayer r + 1; L is the final read
  std::string target;    // "sublayer 3 (attn, layer 1)" or "final"
  int tokens = 0;        // T
  int token = 0;         // the position t, 0 .. T-1
  int token_id = 0;      // tokens[t]
  int heads = 1;         // H: depth-attention heads (1 for the standard residual)
  double key_norm_eps = 0.0;
  Eigen::VectorXd query;          // (d) q at token t: w (static) or w + W u/rms(u) (input); empty
                                  // for the standard residual
  Eigen::VectorXd key_norm_gain;  // (d) g; empty without the key norm or for the standard residual
  std::vector<WalkthroughSource> sources;  // in the read's order, the most recent last
  Eigen::VectorXd softmax_max;             // (H) m_c over every source
  Eigen::VectorXd softmax_denominator;     // (H) l_c = sum_i exp(s_{c,i} - m_c)
  Eigen::VectorXd h;                       // (d) the read's output h = sum_i alpha_i v_i
  double h_rms = 0.0;                      // sqrt(mean of h^2)
  std::optional<WalkthroughTwoPhase> two_phase;
  std::string two_phase_note;  // why there is no two-phase form (empty when there is one)
};

// Every number of read `read` (0 .. L) at position `token` (0 .. T-1) of a forward pass of `model`
// on `tokens`, with `options`' mode, block size, zero placeholder and Full schedule block (the
// walkthrough shows the one-shot and the two-phase form whatever options.two_phase says). Runs
// the reference forward pass in f64. Supports the standard residual and Full and Block AttnRes
// with the softmax gate and attention mixing (any key norm, window, heads, query source). Throws
// attnres::Error naming the position or the read when either is out of range, for a bad token
// id, for another scheme, and for options.mask.
ReadWalkthrough read_walkthrough(const ModelWeights<double>& model, const std::vector<int>& tokens,
                                 int token, int read, const ForwardOptions& options = {});

// "the embedding v_0", "v3: the output of sublayer 3 (attn, layer 1)", "b1 = v1 + v2",
// "partial = v3 (block 2 so far)", "zero (the placeholder)": a source spelt out.
std::string describe_depth_source(const DepthSource& source, int sublayers);

}  // namespace attnres
