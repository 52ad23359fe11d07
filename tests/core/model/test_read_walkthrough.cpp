// One read, step by step (core/model/include/attnres/read_walkthrough.hpp): its weights and sum
// against the reference forward pass's trace and sublayer inputs, its scores and softmax against
// a recomputation from the raw weights here, and Block's two-phase form against the one-shot read
// and the merge rule of docs/math.md §2.4 Two-phase schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/read_walkthrough.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_read_walkthrough {

const std::vector<int> kTokens = {3, 17, 8, 25, 1};

// L = 6 sublayers, d = 16; random queries and gains so that every weight differs.
ModelWeights<double> model(ResidualMode mode, int block_size = 0, int depth_heads = 1,
                           bool key_norm = true) {
  ModelConfig config = test::model_config(3, 16, 4, 2, 24, 32);
  config.attn_res.mode = mode;
  config.attn_res.block_size = block_size;
  config.attn_res.heads = depth_heads;
  config.attn_res.key_norm = key_norm;
  return test::model_with_random_gains(config, {.seed = 11, .weight_std = 0.3, .query_std = 0.9},
                                       5);
}

ForwardOptions options_for(ResidualMode mode, int block_size = 0) {
  ForwardOptions options;
  options.mode = mode;
  if (block_size > 0) options.block_size = block_size;
  return options;
}

// The reference forward's input of read r (h of sublayer r + 1, or hidden_final) at token t.
struct Reference {
  ForwardResult<double> result;
  std::vector<Eigen::MatrixXd> inputs;
  Eigen::VectorXd h(int read, int token) const {
    if (read == result.trace.sublayers) return result.hidden_final.row(token).transpose();
    return inputs[static_cast<std::size_t>(read)].row(token).transpose();
  }
};

Reference reference(const ModelWeights<double>& weights, ForwardOptions options) {
  Reference out;
  options.sublayer_inputs = &out.inputs;
  out.result = forward(weights, kTokens, options);
  return out;
}

// Bounds (docs/testing.md §2). The walkthrough recomputes a read of the reference forward pass in
// another order (one token, one-shot, its own block sums): kReorderedBound relative to the
// magnitude of what is compared. A score is a dot product whose terms can cancel, so its rounding
// (and m's) is relative to S, the largest sum of |q_j k_j| over the read's sources (~10 here).
// exp(s - m) moves by the absolute error of s - m: what is made of exponentials (l, the weights)
// is compared relative to its own magnitude (the row's largest weight for weights), its error a
// few times the scores' rounding times S, ~100 u, well inside kReorderedBound.
constexpr double kReordered = test::kReorderedBound<double>;

// S of head `head`: max over the sources of sum_j |q_j k_ij| over the head's channels.
double score_scale(const ReadWalkthrough& w, int head) {
  const Eigen::Index width = w.query.size() / w.heads;
  double scale = 0.0;
  for (const auto& step : w.sources) {
    scale = std::max(
        scale,
        (w.query.segment(head * width, width).cwiseProduct(step.key.segment(head * width, width)))
            .cwiseAbs()
            .sum());
  }
  return scale;
}

// sum_i |v_i| channel by channel, largest over the channels: the magnitude of the terms of a sum
// of the sources.
double sum_of_magnitudes(const ReadWalkthrough& w) {
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(w.sources.front().value.size());
  for (const auto& step : w.sources) sum += step.value.cwiseAbs();
  return sum.maxCoeff();
}

struct Case {
  std::string name;
  ResidualMode mode;
  int block_size;
  int depth_heads;
  bool key_norm;
};

const Case kCases[] = {
    {"full", ResidualMode::full, 0, 1, true},
    {"block S=2", ResidualMode::block, 2, 1, true},
    {"block S=4 (incomplete last block)", ResidualMode::block, 4, 1, true},
    {"full, 2 heads", ResidualMode::full, 0, 2, true},
    {"block S=3, no key norm", ResidualMode::block, 3, 1, false},
};

TEST(ReadWalkthrough, WeightsAndSumAreTheReferenceForwardsForEveryReadAndToken) {
  for (const Case& c : kCases) {
    const auto weights = model(c.mode, c.block_size, c.depth_heads, c.key_norm);
    const auto options = options_for(c.mode, c.block_size);
    const Reference ref = reference(weights, options);
    const int L = ref.result.trace.sublayers;
    for (int read : {0, 1, 2, 3, L - 1, L}) {
      for (int token : {0, 2, 4}) {
        const ReadWalkthrough w = read_walkthrough(weights, kTokens, token, read, options);
        const std::string where =
            c.name + ", read " + std::to_string(read) + ", token " + std::to_string(token);
        const ReadTrace& trace = ref.result.trace.reads[static_cast<std::size_t>(read)];
        ASSERT_EQ(w.sources.size(), trace.sources.size()) << where;
        ASSERT_EQ(w.heads, c.depth_heads) << where;
        EXPECT_EQ(w.target, trace.target) << where;
        const auto n = static_cast<Eigen::Index>(trace.sources.size());
        for (Eigen::Index i = 0; i < n; ++i) {
          const auto& step = w.sources[static_cast<std::size_t>(i)];
          EXPECT_EQ(step.source, trace.sources[static_cast<std::size_t>(i)]) << where;
          EXPECT_EQ(step.label, trace.sources[static_cast<std::size_t>(i)].label()) << where;
          for (int head = 0; head < w.heads; ++head) {
            const double expected =
                w.heads == 1 ? trace.alpha(token, i) : trace.alpha_heads(token, head * n + i);
            // Relative to the token's largest weight in this head (see kReordered).
            const double largest =
                w.heads == 1 ? trace.alpha.row(token).maxCoeff()
                             : trace.alpha_heads.row(token).segment(head * n, n).maxCoeff();
            EXPECT_TRUE(test::near_relative(step.weight(head), expected, kReordered, largest,
                                            where + ", weight of source " + std::to_string(i)));
          }
        }
        test::expect_tensor_near(where + " h", w.h, ref.h(read, token), kReordered);
        // sqrt(sum of 16 squares / 16): 16 u of the sum (of positive terms), halved by the sqrt,
        // and the division and sqrt: 16 u (both sides round the same formula).
        EXPECT_TRUE(test::near_relative(w.h_rms, std::sqrt(w.h.squaredNorm() / 16.0),
                                        test::roundoffs<double>(16), 0.0, where + " h rms"));
      }
    }
  }
}

TEST(ReadWalkthrough, ScoresAndSoftmaxAreRecomputedFromTheRawWeights) {
  for (const Case& c : kCases) {
    const auto weights = model(c.mode, c.block_size, c.depth_heads, c.key_norm);
    const auto options = options_for(c.mode, c.block_size);
    for (int read : {1, 3, 6}) {
      const int token = 3;
      const ReadWalkthrough w = read_walkthrough(weights, kTokens, token, read, options);
      const std::string where = c.name + ", read " + std::to_string(read);
      const auto& raw = weights.depth_read(read);
      const double eps = weights.config.attn_res.key_norm_eps;
      const int H = c.depth_heads;
      const int width = 16 / H;
      const auto n = w.sources.size();
      // The walkthrough's keys, scores and softmax against the same formulas by hand: another
      // order of the same arithmetic (see kReordered).
      // s_{c,i} = w . (g * v_i / sqrt(mean_c(v_i^2) + eps)), by hand from the raw tensors.
      std::vector<std::vector<double>> scores(static_cast<std::size_t>(H));
      for (int head = 0; head < H; ++head) {
        for (std::size_t i = 0; i < n; ++i) {
          const Eigen::VectorXd v = w.sources[i].value.segment(head * width, width);
          const double key_rms = c.key_norm ? std::sqrt(v.squaredNorm() / width + eps) : 1.0;
          double s = 0.0, s_terms = 0.0;  // the score and the sum of its |terms|
          for (int j = 0; j < width; ++j) {
            const int channel = head * width + j;
            const double key = c.key_norm ? raw.key_norm_gain(channel) * v(j) / key_rms : v(j);
            s += raw.query(channel) * key;
            s_terms += std::abs(raw.query(channel) * key);
            // A key is v_j times a gain over the RMS of positive squares: relative to itself.
            EXPECT_TRUE(test::near_relative(w.sources[i].key(channel), key, kReordered, 0.0,
                                            where + ", key " + std::to_string(channel)));
          }
          EXPECT_TRUE(test::near_relative(w.sources[i].key_rms(head), key_rms, kReordered, 0.0,
                                          where + ", key rms"));
          EXPECT_TRUE(test::near_relative(w.sources[i].score(head), s, kReordered, s_terms,
                                          where + ", score of source " + std::to_string(i)));
          scores[static_cast<std::size_t>(head)].push_back(s);
        }
        const auto& s = scores[static_cast<std::size_t>(head)];
        const double m = *std::max_element(s.begin(), s.end());
        double l = 0.0;
        for (double score : s) l += std::exp(score - m);
        const double S = score_scale(w, head);
        EXPECT_TRUE(test::near_relative(w.softmax_max(head), m, kReordered, S, where + ", m"));
        EXPECT_TRUE(
            test::near_relative(w.softmax_denominator(head), l, kReordered, 0.0, where + ", l"));
        for (std::size_t i = 0; i < n; ++i) {
          const double e = std::exp(s[i] - m);
          EXPECT_TRUE(test::near_relative(w.sources[i].shifted_exp(head), e, kReordered, 0.0,
                                          where + ", exp(s - m)"));
          // Relative to the largest weight, 1 / l (the one of the source with s = m).
          EXPECT_TRUE(test::near_relative(w.sources[i].weight(head), e / l, kReordered, 1.0 / l,
                                          where + ", weight"));
        }
      }
      // h = sum_i alpha_i v_i, channel by channel with its head's weights.
      Eigen::VectorXd h = Eigen::VectorXd::Zero(16);
      for (int j = 0; j < 16; ++j) {
        for (std::size_t i = 0; i < n; ++i)
          h(j) += w.sources[i].weight(j / width) * w.sources[i].value(j);
      }
      test::expect_tensor_near(where + " h by hand", w.h, h, kReordered);
      // The embedding source is the token's row of the embedding table, copied: the same bits.
      EXPECT_EQ(w.sources.front().label, "emb");
      EXPECT_EQ(w.sources.front().value,
                Eigen::VectorXd(weights.embed_tokens.row(kTokens[token]).transpose()));
    }
  }
}

TEST(ReadWalkthrough, BlockSummariesAreTheForwardPasssBlocks) {
  // Block S = 4, L = 6: the final read sees [emb, b1 = v1..v4, b2 = v5 + v6]. Over every token,
  // the summaries' RMS is the trace's block_summary_rms (RMS over T x d of b_n).
  const auto weights = model(ResidualMode::block, 4);
  const auto options = options_for(ResidualMode::block, 4);
  const Reference ref = reference(weights, options);
  const auto& expected = ref.result.trace.block_summary_rms;
  ASSERT_EQ(expected.size(), 3u);
  std::vector<double> squares(3, 0.0);
  for (int token = 0; token < static_cast<int>(kTokens.size()); ++token) {
    const ReadWalkthrough w = read_walkthrough(weights, kTokens, token, 6, options);
    ASSERT_EQ(w.sources.size(), 3u);
    for (std::size_t n = 0; n < 3; ++n) squares[n] += w.sources[n].value.squaredNorm();
    EXPECT_EQ(w.sources[1].description, "b1 = v1 + v2 + v3 + v4");
    EXPECT_EQ(w.sources[2].description, "b2 = v5 + v6");
  }
  // The same sums of squares in another order (token by token here, the whole (T, d) there).
  for (std::size_t n = 0; n < 3; ++n) {
    EXPECT_TRUE(
        test::near_relative(std::sqrt(squares[n] / (16.0 * static_cast<double>(kTokens.size()))),
                            expected[n], kReordered, 0.0, "b" + std::to_string(n) + " rms"));
  }
  // Sublayer 3 reads the partial sum of its block so far.
  const ReadWalkthrough partial = read_walkthrough(weights, kTokens, 1, 2, options);
  ASSERT_EQ(partial.sources.size(), 2u);
  EXPECT_EQ(partial.sources[1].label, "partial");
  EXPECT_EQ(partial.sources[1].description, "partial = v1 + v2 (block 1 so far)");
  // The same formula on both sides: 16 squares summed (16 u, halved by the sqrt), a division and a
  // sqrt: 16 u.
  EXPECT_TRUE(test::near_relative(partial.sources[1].rms,
                                  std::sqrt(partial.sources[1].value.squaredNorm() / 16.0),
                                  test::roundoffs<double>(16), 0.0, "partial rms"));
}

TEST(ReadWalkthrough, BlockTwoPhaseMergesToTheOneShotRead) {
  for (int S : {2, 3, 4, 6}) {
    const auto weights = model(ResidualMode::block, S);
    const auto options = options_for(ResidualMode::block, S);
    for (int read = 0; read <= 6; ++read) {
      for (int token : {0, 4}) {
        const ReadWalkthrough w = read_walkthrough(weights, kTokens, token, read, options);
        const std::string where = "S=" + std::to_string(S) + ", read " + std::to_string(read);
        ASSERT_TRUE(w.two_phase.has_value()) << where;
        const WalkthroughTwoPhase& two = *w.two_phase;
        // Phase 1: the embedding and the completed blocks; phase 2: the partial sum (or, at the
        // final read, the last block, which its group did not have yet).
        for (int i : two.phase1.sources) {
          const auto kind = w.sources[static_cast<std::size_t>(i)].source.kind;
          EXPECT_TRUE(kind == DepthSource::Kind::embedding || kind == DepthSource::Kind::block)
              << where;
        }
        const bool first_of_block = read < 6 && read % S == 0;
        EXPECT_EQ(two.phase2.sources.size(), first_of_block ? 0u : 1u) << where;
        if (read < 6 && !first_of_block) {
          EXPECT_EQ(w.sources[static_cast<std::size_t>(two.phase2.sources[0])].label, "partial")
              << where;
        }
        const double S = score_scale(w, 0);
        // The merged h equals the one-shot h (another order), and max_difference is its distance.
        test::expect_tensor_near(where + " merged h", two.h, w.h, kReordered);
        EXPECT_EQ(two.max_difference, (two.h - w.h).cwiseAbs().maxCoeff()) << where;
        // m = max(m1, m2), l = l1 exp(m1 - m) + l2 exp(m2 - m), o likewise, h = o / l.
        const double m1 = two.phase1.m(0), m2 = two.phase2.m(0), m = two.merged.m(0);
        EXPECT_EQ(m, std::max(m1, m2)) << where;
        // The merge rule by hand: two exps (std::exp here, Eigen's there: a few u each), two
        // products and a sum of positive terms: 8 u of l.
        EXPECT_TRUE(test::near_relative(
            two.merged.l(0),
            two.phase1.l(0) * std::exp(m1 - m) + two.phase2.l(0) * std::exp(m2 - m),
            test::roundoffs<double>(8), 0.0, where + ", merged l"));
        // The same argument through Eigen's exp and std::exp: within a few u each.
        EXPECT_TRUE(test::near_relative(two.scale1(0), std::exp(m1 - m), test::roundoffs<double>(4),
                                        0.0, where + ", scale 1"));
        EXPECT_TRUE(test::near_relative(two.scale2(0), std::exp(m2 - m), test::roundoffs<double>(4),
                                        0.0, where + ", scale 2"));
        // o = o1 scale1 + o2 scale2: two products and a sum, 2 u of the sum of |terms|, and the
        // merge's own scales (Eigen's exp on a longer vector: a few u): 8 u.
        const Eigen::VectorXd o = two.phase1.o * two.scale1(0) + two.phase2.o * two.scale2(0);
        const double o_terms =
            (two.phase1.o.cwiseAbs() * two.scale1(0) + two.phase2.o.cwiseAbs() * two.scale2(0))
                .maxCoeff();
        test::expect_tensor_near(where + " merged o", two.merged.o, o, test::roundoffs<double>(8),
                                 o_terms);
        test::expect_tensor_near(where + " merged o / l", two.merged.o / two.merged.l(0), w.h,
                                 kReordered);
        // The merged statistics are the one-shot softmax's: same max, same denominator (from
        // scores computed in another order: m relative to S, see kReordered).
        EXPECT_TRUE(test::near_relative(m, w.softmax_max(0), kReordered, S, where + ", m"));
        EXPECT_TRUE(test::near_relative(two.merged.l(0), w.softmax_denominator(0), kReordered, 0.0,
                                        where + ", l"));
        // Each phase's statistics from the walkthrough's own scores.
        double max1 = -std::numeric_limits<double>::infinity();
        for (int i : two.phase1.sources)
          max1 = std::max(max1, w.sources[static_cast<std::size_t>(i)].score(0));
        double l1 = 0.0;
        Eigen::VectorXd o1 = Eigen::VectorXd::Zero(16), o1_terms = Eigen::VectorXd::Zero(16);
        for (int i : two.phase1.sources) {
          const auto& step = w.sources[static_cast<std::size_t>(i)];
          l1 += std::exp(step.score(0) - max1);
          o1 += std::exp(step.score(0) - max1) * step.value;
          o1_terms += std::exp(step.score(0) - max1) * step.value.cwiseAbs();
        }
        EXPECT_EQ(m1, max1) << where;
        EXPECT_TRUE(
            test::near_relative(two.phase1.l(0), l1, kReordered, 0.0, where + ", phase 1 l"));
        // o1 = sum_i exp(s_i - m1) v_i can cancel: relative to the sum of its |terms|.
        test::expect_tensor_near(where + " phase 1 o", two.phase1.o, o1, kReordered,
                                 o1_terms.maxCoeff());
        Eigen::VectorXd one_shot_weights(two.weights.size());
        for (Eigen::Index i = 0; i < two.weights.size(); ++i)
          one_shot_weights(i) = w.sources[static_cast<std::size_t>(i)].weight(0);
        // Relative to the largest weight (see kReordered).
        test::expect_tensor_near(where + " weights", two.weights, one_shot_weights, kReordered);
      }
    }
  }
}

TEST(ReadWalkthrough, FullTwoPhaseFollowsTheScheduleBlock) {
  const auto weights = model(ResidualMode::full);
  auto options = options_for(ResidualMode::full);
  options.full_schedule_block = 2;  // groups {0, 1}, {2, 3}, {4, 5, final}
  const ReadWalkthrough w = read_walkthrough(weights, kTokens, 2, 5, options);
  ASSERT_TRUE(w.two_phase.has_value());
  EXPECT_EQ(w.two_phase->group_first_read, 4);
  EXPECT_EQ(w.two_phase->group_last_read, 6);
  EXPECT_EQ(w.two_phase->phase1.sources.size(), 5u);  // v0 .. v4
  EXPECT_EQ(w.two_phase->phase2.sources.size(), 1u);  // v5
  // The largest |two-phase h - one-shot h|, relative to the read's magnitude (another order).
  EXPECT_LE(w.two_phase->max_difference, kReordered * w.h.cwiseAbs().maxCoeff());
  test::expect_tensor_near("full two-phase h", w.two_phase->h, w.h, kReordered);
}

TEST(ReadWalkthrough, StandardResidualIsTheSumWithUnitWeights) {
  const auto weights = model(ResidualMode::standard);
  const auto options = options_for(ResidualMode::standard);
  const Reference ref = reference(weights, options);
  for (int read : {0, 3, 6}) {
    const ReadWalkthrough w = read_walkthrough(weights, kTokens, 1, read, options);
    ASSERT_EQ(w.sources.size(), static_cast<std::size_t>(read + 1));
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(16);
    for (const auto& step : w.sources) {
      EXPECT_EQ(step.weight(0), 1.0);
      sum += step.value;
    }
    // The forward's residual stream, summed in its own order.
    test::expect_tensor_near("standard h, read " + std::to_string(read), w.h, ref.h(read, 1),
                             kReordered);
    // The same sum of read + 1 <= 7 terms in the same order: 8 u of the sum of |terms| (the same
    // bits in practice).
    test::expect_tensor_near("standard h by hand, read " + std::to_string(read), sum, w.h,
                             test::roundoffs<double>(8), sum_of_magnitudes(w));
    EXPECT_FALSE(w.two_phase.has_value());
    EXPECT_FALSE(w.two_phase_note.empty());
  }
}

// The message of the attnres::Error that `call` throws ("" when it throws none).
template <typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ReadWalkthrough, OutOfRangePositionsAndReadsAreLocatedErrors) {
  const auto weights = model(ResidualMode::block, 2);
  const auto options = options_for(ResidualMode::block, 2);
  auto walk = [&](int token, int read) {
    return error_of([&] { read_walkthrough(weights, kTokens, token, read, options); });
  };
  EXPECT_EQ(walk(5, 0),
            "read walkthrough: token position 5 is out of range (T = 5 tokens: positions 0 .. 4)");
  EXPECT_NE(walk(-1, 0).find("token position -1 is out of range"), std::string::npos);
  EXPECT_EQ(walk(0, 7),
            "read walkthrough: read 7 is out of range (L = 6 sublayers: reads 0 .. 6; read r "
            "forms the input of sublayer r + 1, read 6 is the final read)");
  EXPECT_NE(walk(0, -1).find("read -1 is out of range"), std::string::npos);
  EXPECT_NE(error_of([&] {
              read_walkthrough(weights, {1, 99}, 0, 0, options);
            }).find("token id 99 at position 1 is out of range"),
            std::string::npos);
  ModelConfig config = test::model_config(3, 16, 4, 2, 24, 32);
  config.attn_res.mode = ResidualMode::denseformer;
  const auto denseformer = random_model(config, {});
  EXPECT_NE(error_of([&] {
              read_walkthrough(denseformer, kTokens, 0, 1);
            }).find("the step-by-step read covers the standard residual and Full and Block"),
            std::string::npos);
}

}  // namespace test_read_walkthrough
}  // namespace attnres
