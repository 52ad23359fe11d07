// The residual-scheme zoo (docs/schemes.md) on the fast CPU engine (engine/cpu/): the fast forward
// (logits, final hidden state, every alpha with every head) and the fast gradients against the
// reference engine within the reordering bound of f64 and f32 (docs/testing.md §2), with 1, 2 and 3
// threads, one-shot and two-phase; central finite differences of the fast f64 gradient on a tiny
// model; bit-identical reruns for a thread count. Every read setting of Full / Block AttnRes,
// DenseFormer, the rescaled residual and mHC. The engines are called directly (FastForward,
// FastBackward), so every comparison is of the fast code itself.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "attnres/backward.hpp"
#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/measure.hpp"
#include "cpu/fast_backward.hpp"
#include "cpu/fast_forward.hpp"
#include "cpu/matmul.hpp"
#include "model_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_fast_zoo {

struct ZooCase {
  std::string name;
  AttnResConfig scheme;
  bool zero_placeholder = false;
};

using test::make_scheme;

// Every scheme of the zoo (test::zoo_schemes, shared with test_schemes.cpp), and more
// combinations: windows with heads, an input query with heads and no key norm, an incomplete last
// block (S = 4 at L = 6), the zero placeholder with another gate, scalars with S = 1, mHC with 4
// streams (20 Sinkhorn iterations) and with 1.
std::vector<ZooCase> zoo_cases() {
  std::vector<ZooCase> cases;
  for (const auto& c : test::zoo_schemes()) cases.push_back({c.name, c.scheme});
  auto add = [&](const std::string& name, const AttnResConfig& s, bool placeholder = false) {
    cases.push_back({name, s, placeholder});
  };
  AttnResConfig s = make_scheme(ResidualMode::full);
  s.window = 2;
  s.heads = 4;
  s.gate = DepthGate::sigmoid_normalized;
  add("full_window2_heads4_sigmoid_normalized", s);
  s = make_scheme(ResidualMode::full);
  s.query_source = QuerySource::input;
  s.key_norm = false;
  s.heads = 2;
  s.gate = DepthGate::sigmoid;
  add("full_input_query_heads2_sigmoid_no_key_norm", s);
  s = make_scheme(ResidualMode::block, 4);
  s.gate = DepthGate::sigmoid;
  s.key_norm = false;
  add("block_S4_sigmoid_no_key_norm", s);
  s = make_scheme(ResidualMode::block, 2);
  s.gate = DepthGate::sigmoid_normalized;
  add("block_placeholder_sigmoid_normalized", s, true);
  s = make_scheme(ResidualMode::block, 4);
  s.query_source = QuerySource::input;
  add("block_S4_input_query_softmax", s);
  s = make_scheme(ResidualMode::block, 1);
  s.mixing = DepthMixing::scalars;
  add("block_S1_scalars", s);
  s = make_scheme(ResidualMode::mhc);
  add("mhc_dynamic_m4", s);
  s.streams = 1;
  add("mhc_dynamic_m1", s);
  return cases;
}

// A grouped-query model (4 heads, 2 kv heads, d = 16, L = 6) with its gains, queries and mixing
// parameters off their starting values. An input-dependent query's projection W (d, d) at the
// same std would make scores of ~10 and a network whose rounding grows past 1e-12 in any two
// summation orders (the reference against itself one-shot and two-phase too), so it is smaller.
ModelWeights<double> zoo_model(const ZooCase& c, std::uint64_t seed, double weight_std) {
  ModelConfig config = test::model_config(3, 16, 4, 2, 24, 13);
  config.attn_res = c.scheme;
  const double query_std = c.scheme.query_source == QuerySource::input ? 0.25 : 0.7;
  return test::model_with_random_gains(
      config, {.seed = seed, .weight_std = weight_std, .query_std = query_std}, seed + 17);
}

ForwardOptions options_of(const ZooCase& c, bool two_phase = true) {
  ForwardOptions options;
  options.zero_placeholder = c.zero_placeholder;
  options.two_phase = two_phase;
  return options;
}

// Sequences of different lengths: T = 2, a few short ones, and T = 70 (two 64-row tiles).
std::vector<std::vector<int>> zoo_batch(int vocab) {
  std::vector<std::vector<int>> batch;
  std::mt19937 engine(3);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  for (int length : {9, 2, 70, 5}) {
    std::vector<int> tokens(static_cast<std::size_t>(length));
    for (int& id : tokens) id = token(engine);
    batch.push_back(std::move(tokens));
  }
  return batch;
}

// The fast forward against the reference: every tensor of test::forward_outputs within its
// bound; a read's mean weights within its weights' bound; the RMS curves within the largest.
template <typename Scalar>
void expect_same_forward(const ForwardResult<Scalar>& fast, const ForwardResult<Scalar>& reference,
                         const test::BoundByName& bound, const std::string& label) {
  test::expect_tensor_near(label + " logits", fast.logits, reference.logits, bound("logits"));
  test::expect_tensor_near(label + " hidden", fast.hidden_final, reference.hidden_final,
                           bound("hidden"));
  EXPECT_EQ(fast.trace.two_phase, reference.trace.two_phase) << label;
  ASSERT_EQ(fast.trace.reads.size(), reference.trace.reads.size()) << label;
  for (std::size_t r = 0; r < reference.trace.reads.size(); ++r) {
    const ReadTrace& a = fast.trace.reads[r];
    const ReadTrace& b = reference.trace.reads[r];
    const std::string read = "read " + std::to_string(r);
    EXPECT_EQ(a.sources, b.sources) << label << " " << read;
    EXPECT_EQ(a.heads, b.heads) << label << " " << read;
    // Weights of a softmax (or gate) over the sources: at most 1 each, and each one's rounding
    // is relative to the largest, so the tensor's largest weight is the scale.
    test::expect_tensor_near(label + " " + read + " alpha", a.alpha, b.alpha,
                             bound(read + " alpha"));
    test::expect_tensor_near(label + " " + read + " alpha mean", a.alpha_mean, b.alpha_mean,
                             bound(read + " alpha"));
    EXPECT_EQ(a.alpha_heads.size(), b.alpha_heads.size()) << label << " " << read;
    if (b.alpha_heads.size())
      test::expect_tensor_near(label + " " + read + " alpha heads", a.alpha_heads, b.alpha_heads,
                               bound(read + " alpha heads"));
  }
  ASSERT_EQ(fast.trace.sublayer_output_rms.size(), reference.trace.sublayer_output_rms.size());
  for (std::size_t l = 0; l < reference.trace.sublayer_output_rms.size(); ++l) {
    EXPECT_TRUE(test::near_relative(fast.trace.sublayer_output_rms[l],
                                    reference.trace.sublayer_output_rms[l], bound("output rms"),
                                    0.0, label + " output rms " + std::to_string(l)));
  }
  EXPECT_EQ(fast.trace.block_summary_rms.size(), reference.trace.block_summary_rms.size());
}

// Worst relative difference (docs/testing.md §2) over every gradient tensor and the loss: each
// tensor against max(its own largest |element|, the whole gradient's), within `relative`.
template <typename Scalar>
double gradient_difference(const Gradients<Scalar>& fast, const Gradients<Scalar>& reference,
                           const test::BoundByName& bound, const std::string& label) {
  std::map<std::string, std::pair<const Scalar*, std::int64_t>> expected;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(reference.grad), [&](const TensorRef<Scalar>& t) {
    expected[t.name] = {t.data, t.element_count()};
  });
  const double scale = test::gradient_scale(reference);
  EXPECT_TRUE(test::near_relative(fast.loss, reference.loss, bound("loss"), 0.0, label + " loss"));
  double worst = std::abs(fast.loss - reference.loss) / std::abs(reference.loss);
  std::size_t seen = 0;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(fast.grad), [&](const TensorRef<Scalar>& t) {
    ++seen;
    const auto& [data, count] = expected.at(t.name);
    EXPECT_EQ(count, t.element_count()) << t.name;
    using Map = Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>;
    const double error = test::relative_difference(Map(t.data, count), Map(data, count), scale);
    const double relative = bound(t.name);
    test::log_bound(label + ": " + t.name, error, relative);
    EXPECT_LE(error, relative) << label << ": " << t.name << " ("
                               << error / test::kUnitRoundoff<Scalar> << " u, bound "
                               << relative / test::kUnitRoundoff<Scalar> << " u)";
    worst = std::max(worst, error);
  });
  EXPECT_EQ(seen, expected.size());
  EXPECT_EQ(fast.predicted, reference.predicted);
  for (std::size_t r = 0; r < reference.sublayer_output_grad_rms.size(); ++r) {
    EXPECT_TRUE(test::near_relative(fast.sublayer_output_grad_rms[r],
                                    reference.sublayer_output_grad_rms[r], bound("grad rms"), 0.0,
                                    label + " grad rms " + std::to_string(r)));
  }
  return worst;
}

template <typename Scalar>
std::vector<unsigned char> bytes_of(Gradients<Scalar>& g) {
  std::vector<unsigned char> bytes;
  visit_tensors(g.grad, [&](const TensorRef<Scalar>& t) {
    const auto* begin = reinterpret_cast<const unsigned char*>(t.data);
    bytes.insert(bytes.end(), begin,
                 begin + t.element_count() * static_cast<std::int64_t>(sizeof(Scalar)));
  });
  return bytes;
}

class FastZoo : public ::testing::TestWithParam<ZooCase> {};

TEST_P(FastZoo, ForwardMatchesTheReferenceAtF64AndF32WithOneTwoAndThreeThreads) {
  const ZooCase& c = GetParam();
  const ModelWeights<double> model = zoo_model(c, 7, 0.5);
  const ModelWeights<float> model32 = zoo_model(c, 7, 0.02).cast<float>();
  engine::FastForward<double> fast1(model, 1), fast2(model, 2), fast3(model, 3);
  engine::FastForward<float> fast32(model32, 2);
  for (bool two_phase : {true, false}) {
    const ForwardOptions options = options_of(c, two_phase);
    for (int T : {1, 5, 70}) {
      const auto tokens = benchmark_tokens(T, model.config.vocab_size, T);
      const auto reference = forward(model, tokens, options);
      const std::string label =
          c.name + (two_phase ? " two-phase" : " one-shot") + " T=" + std::to_string(T);
      const test::Conditioning kappa(model, [&](const ModelWeights<double>& m) {
        return test::forward_outputs(forward(m, tokens, options));
      });
      const test::BoundByName bound = test::conditioned_bound<double>(kappa);
      expect_same_forward(fast1.forward(tokens, options), reference, bound, label + " x1");
      const auto two = fast2.forward(tokens, options);
      expect_same_forward(two, reference, bound, label + " x2");
      expect_same_forward(fast3.forward(tokens, options), reference, bound, label + " x3");
      const auto again = fast2.forward(tokens, options);  // reused workspace: the same bits
      EXPECT_TRUE(again.logits == two.logits) << label;
      EXPECT_TRUE(again.trace.reads.back().alpha == two.trace.reads.back().alpha) << label;
      const test::Conditioning kappa32(model32.cast<double>(), [&](const ModelWeights<double>& m) {
        return test::forward_outputs(forward(m, tokens, options));
      });
      expect_same_forward(fast32.forward(tokens, options), forward(model32, tokens, options),
                          test::conditioned_bound<float>(kappa32), label + " f32");
    }
  }
}

TEST_P(FastZoo, GradientsMatchTheReferenceAtF64AndF32AndRerunsAreBitIdentical) {
  const ZooCase& c = GetParam();
  const ModelWeights<double> model = zoo_model(c, 7, 0.3);
  const auto batch = zoo_batch(model.config.vocab_size);
  const ForwardOptions options = options_of(c);
  const Gradients<double> reference = loss_and_gradients(model, batch, options);
  const test::Conditioning kappa(model, [&](const ModelWeights<double>& m) {
    return test::gradient_outputs(loss_and_gradients(m, batch, options));
  });
  for (int threads : {1, 2, 3}) {
    engine::FastBackward<double> fast(model.config, threads);
    Gradients<double> first, second;
    fast.compute(model, batch, options, first);
    const double worst =
        gradient_difference(first, reference, test::conditioned_bound<double>(kappa),
                            c.name + " x" + std::to_string(threads));
    std::cout << "[ " << c.name << " x" << threads << " ] worst f64 difference " << worst << "\n";
    fast.compute(model, batch, options, second);
    EXPECT_EQ(std::memcmp(&first.loss, &second.loss, sizeof(double)), 0);
    EXPECT_TRUE(bytes_of(first) == bytes_of(second)) << c.name << " x" << threads;
  }
  const ModelWeights<float> model32 = zoo_model(c, 11, 0.02).cast<float>();
  const Gradients<float> reference32 = loss_and_gradients(model32, batch, options);
  engine::FastBackward<float> fast32(model32.config, 2);
  Gradients<float> gradients32;
  fast32.compute(model32, batch, options, gradients32);
  const test::Conditioning kappa32(model32.cast<double>(), [&](const ModelWeights<double>& m) {
    return test::gradient_outputs(loss_and_gradients(m, batch, options));
  });
  const double worst32 = gradient_difference(
      gradients32, reference32, test::conditioned_bound<float>(kappa32), c.name + " f32");
  std::cout << "[ " << c.name << " ] worst f32 difference " << worst32 << "\n";
}

// bf16 products (docs/engines.md "Precision") against the f64 reference, within the bound of
// tests/training/test_fast_backward.cpp's Bf16WithinTheRoundingBoundOfTheF64Reference: 2 u16 P
// relative (Frobenius) per tensor, u16 = 2^-8, P = 39 rounded products on the longest path of
// this 3-layer model (13 forward: 4 per layer and the LM head; 2 per product backward). The
// depth-mixing tensors (queries, projections, mHC coefficients) stay f32 but their gradients pass
// through the rounded products.
TEST_P(FastZoo, Bf16GradientsWithinTheRoundingBound) {
  const ZooCase& c = GetParam();
  // The f32 comparison's model (small weights: no product is ill-conditioned), read back at f64
  // so that both sides hold the same weights.
  const ModelWeights<float> model32 = zoo_model(c, 11, 0.02).cast<float>();
  const ModelWeights<double> model = model32.cast<double>();
  const auto batch = zoo_batch(model.config.vocab_size);
  const ForwardOptions options = options_of(c);
  const Gradients<double> reference = loss_and_gradients(model, batch, options);
  engine::FastBackward<float> fast(model32.config, 2, /*bf16=*/true);
  Gradients<float> bf16;
  fast.compute(model32, batch, options, bf16);
  std::map<std::string, Eigen::VectorXd> exact;
  double total = 0.0;
  visit_tensors(const_cast<ModelWeights<double>&>(reference.grad), [&](const auto& t) {
    exact[t.name] = Eigen::Map<const Eigen::VectorXd>(t.data, t.element_count());
    total += exact[t.name].squaredNorm();
  });
  // A tensor whose exact gradient is (nearly) zero, as some of mHC's are by symmetry, is held
  // against a thousandth of the whole gradient's norm instead of its own.
  const double floor = 1e-3 * std::sqrt(total);
  // How far the exact gradient moves when only the weights of the products are rounded to bf16
  // (f64 arithmetic): a measure of the tensor's conditioning. Where that alone exceeds a quarter
  // of the bound (full_input_query's layer-0 gradients move by ~10 %: small gradients that are
  // differences of larger ones), no first-order bound at u16 holds, and the tensor is held to its
  // direction instead: cos(bf16, exact) >= 1 - 2 x that move.
  ModelWeights<double> rounded = model;
  for (auto& layer : rounded.layers) {
    for (auto* w : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj, &layer.gate_proj,
                    &layer.up_proj, &layer.down_proj})
      *w = w->unaryExpr([](double x) {
        return static_cast<double>(engine::from_bf16(engine::to_bf16(static_cast<float>(x))));
      });
  }
  rounded.lm_head = rounded.lm_head.unaryExpr([](double x) {
    return static_cast<double>(engine::from_bf16(engine::to_bf16(static_cast<float>(x))));
  });
  const Gradients<double> weights_rounded = loss_and_gradients(rounded, batch, options);
  std::map<std::string, double> weight_move;
  visit_tensors(const_cast<ModelWeights<double>&>(weights_rounded.grad), [&](const auto& t) {
    const Eigen::VectorXd& want = exact.at(t.name);
    weight_move[t.name] =
        (Eigen::Map<const Eigen::VectorXd>(t.data, t.element_count()) - want).norm() /
        std::max(want.norm(), floor);
  });
  double worst = 0.0;
  visit_tensors(bf16.grad, [&](const TensorRef<float>& t) {
    const Eigen::VectorXd got =
        Eigen::Map<const Eigen::VectorXf>(t.data, t.element_count()).cast<double>();
    const Eigen::VectorXd& want = exact.at(t.name);
    const double error = (got - want).norm() / std::max(want.norm(), floor);
    const double bound = 2.0 / 256 * 39, move = weight_move.at(t.name);
    if (move <= bound / 4) {
      EXPECT_LE(error, bound) << c.name << ": " << t.name;
      worst = std::max(worst, error);
    } else {
      const double cosine = got.dot(want) / (got.norm() * want.norm());
      EXPECT_GE(cosine, 1 - 2 * move) << c.name << ": " << t.name << " (ill-conditioned: the "
                                      << "weights alone move it by " << move << ")";
    }
  });
  EXPECT_GT(worst, 1e-4) << c.name << ": bf16 gradients as exact as f32's";
  std::cout << "[ " << c.name << " ] worst bf16 relative error " << worst << "\n";
}

// Central differences of the loss (Richardson-extrapolated, steps h and h / 2) against the fast
// f64 gradient on a tiny model (L = 4, d = 8): at most 64 elements of every depth-mixing tensor
// spread over it, every 5th element of the others.
TEST_P(FastZoo, FastGradientsMatchCentralDifferences) {
  const ZooCase& c = GetParam();
  ModelConfig config = test::model_config(2, 8, 2, 1, 12, 11);
  config.attn_res = c.scheme;
  if (c.scheme.mode == ResidualMode::block)
    config.attn_res.block_size = std::min(c.scheme.block_size, 3);
  ModelWeights<double> model =
      test::model_with_random_gains(config, {.seed = 3, .weight_std = 0.4, .query_std = 0.5}, 17);
  const std::vector<std::vector<int>> batch = {{1, 7, 3, 3, 10}, {4, 0, 9}};
  const ForwardOptions options = options_of(c);
  engine::FastBackward<double> fast(model.config, 2);
  Gradients<double> analytic;
  fast.compute(model, batch, options, analytic);
  std::map<std::string, const double*> analytic_by_name;
  visit_tensors(analytic.grad,
                [&](const TensorRef<double>& t) { analytic_by_name[t.name] = t.data; });
  const double step = 1e-4;
  int depth_elements = 0;
  visit_tensors(model, [&](const TensorRef<double>& tensor) {
    const double* gradient = analytic_by_name.at(tensor.name);
    auto difference = [&](std::int64_t i, double h) {
      return test::central_difference(model, batch, options, tensor.data[i], h);
    };
    const std::int64_t stride =
        tensor.attn_res ? std::max<std::int64_t>(1, tensor.element_count() / 64) : 5;
    double largest = 0.0, error = 0.0;
    for (std::int64_t i = 0; i < tensor.element_count(); i += stride) {
      if (tensor.attn_res) ++depth_elements;
      const double numeric = (4 * difference(i, step / 2) - difference(i, step)) / 3;
      largest = std::max(largest, std::abs(numeric));
      error = std::max(error, std::abs(numeric - gradient[i]));
    }
    EXPECT_LE(error / std::max(largest, 1e-4), 1e-6)
        << c.name << ": " << tensor.name << " largest " << largest << " error " << error;
  });
  if (c.scheme.mode != ResidualMode::rescaled) EXPECT_GT(depth_elements, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryScheme, FastZoo, ::testing::ValuesIn(zoo_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(FastZooThreads, DifferentThreadCountsAgreeAndEachIsBitIdenticalAcrossEngines) {
  ZooCase c{"block_heads4_input_query", make_scheme(ResidualMode::block, 2)};
  c.scheme.heads = 4;
  c.scheme.query_source = QuerySource::input;
  const ModelWeights<float> model = zoo_model(c, 5, 0.3).cast<float>();
  const auto batch = zoo_batch(model.config.vocab_size);
  const auto tokens = benchmark_tokens(130, model.config.vocab_size, 1);
  for (int threads : {1, 2, 3}) {
    engine::FastBackward<float> a(model.config, threads), b(model.config, threads);
    Gradients<float> ga, gb;
    a.compute(model, batch, {}, ga);
    b.compute(model, batch, {}, gb);
    EXPECT_TRUE(bytes_of(ga) == bytes_of(gb)) << threads << " threads, two engines";
    engine::FastForward<float> fa(model, threads), fb(model, threads);
    EXPECT_TRUE(fa.forward(tokens, {}).logits == fb.forward(tokens, {}).logits) << threads;
  }
}

}  // namespace test_fast_zoo
}  // namespace attnres
