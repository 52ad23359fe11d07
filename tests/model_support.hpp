// Helpers for the suites that link the model library: a model shape for tests, weights with random
// gains, and tensor comparison that prints "TENSOR OK, maxdiff = ..." in the llm.c style.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "attnres/backward.hpp"
#include "attnres/checkpoint_files.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/model_config.hpp"
#include "test_support.hpp"

namespace attnres::test {

// A model shape for tests: layers, width d, heads, key/value heads, SwiGLU width, vocabulary.
inline ModelConfig model_config(int layers, int d, int heads, int kv_heads, int ffn, int vocab) {
  ModelConfig config;
  config.num_hidden_layers = layers;
  config.hidden_size = d;
  config.num_attention_heads = heads;
  config.num_key_value_heads = kv_heads;
  config.intermediate_size = ffn;
  config.vocab_size = vocab;
  return config;
}

// A random model whose norm and key-norm gains are drawn from [0.6, 1.4] instead of ones (queries
// and projections as `options` says), so that every gradient path is exercised.
inline ModelWeights<double> model_with_random_gains(const ModelConfig& config,
                                                    const RandomModelOptions& options,
                                                    std::uint64_t gain_seed) {
  ModelWeights<double> model = random_model(config, options);
  std::mt19937_64 engine(gain_seed);
  std::uniform_real_distribution<double> gain(0.6, 1.4);
  visit_tensors(model, [&](const TensorRef<double>& tensor) {
    if (tensor.shape.size() == 1 && tensor.name.find("query") == std::string::npos) {
      for (std::int64_t i = 0; i < tensor.element_count(); ++i) tensor.data[i] = gain(engine);
    }
  });
  return model;
}

// max |a - b| / max(max |b|, scale): the largest difference relative to the magnitude of what is
// compared (docs/testing.md §2). `scale` is a floor for a tensor whose values are small because
// they cancel: the magnitude of the terms they were made from. Different shapes: infinity. An
// expected all-zero tensor with no floor: 0 if equal, infinity otherwise.
template <typename A, typename B>
double relative_difference(const Eigen::MatrixBase<A>& actual, const Eigen::MatrixBase<B>& expected,
                           double scale = 0.0) {
  const Eigen::MatrixXd a = actual.template cast<double>();
  const Eigen::MatrixXd b = expected.template cast<double>();
  if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
  if (b.size() == 0) return 0.0;
  const double difference = (a - b).cwiseAbs().maxCoeff();
  const double magnitude = std::max(b.cwiseAbs().maxCoeff(), scale);
  if (std::isnan(difference)) return INFINITY;
  if (magnitude == 0) return difference == 0 ? 0.0 : INFINITY;
  return difference / magnitude;
}

// Two computations of the same arithmetic in another order (products blocked and vectorised
// differently, sums split over threads, two-phase reads, NumPy's order) differ by at most
// kReorderedUnits u per unit of the compared output's conditioning kappa (Conditioning below;
// docs/testing.md §2.1 gives the measurements this rests on).
inline constexpr double kReorderedUnits = 64;
// Where a test does not measure kappa, its model's is taken to be at most kAssumedConditioning:
// models of initialisation-scale weights (std <= 0.4) and short depth, as the suites use.
inline constexpr double kAssumedConditioning = 16;
// The bound of such a comparison, relative to each tensor's magnitude.
template <typename Scalar>
inline constexpr double kReorderedBound = roundoffs<Scalar>(kReorderedUnits* kAssumedConditioning);

// The model with every parameter w moved to w (1 + delta r), r uniform in [-1, 1] (seeded).
template <typename Scalar>
ModelWeights<Scalar> with_relative_perturbation(const ModelWeights<Scalar>& model, double delta,
                                                std::uint64_t seed) {
  ModelWeights<Scalar> moved = model;
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> r(-1.0, 1.0);
  visit_tensors(moved, [&](const TensorRef<Scalar>& t) {
    for (std::int64_t i = 0; i < t.element_count(); ++i)
      t.data[i] = static_cast<Scalar>(static_cast<double>(t.data[i]) * (1.0 + delta * r(engine)));
  });
  return moved;
}

// One tensor a comparison holds, by name, with the floor of its scale (relative_difference).
struct NamedOutput {
  std::string name;
  Eigen::MatrixXd value;
  double scale = 0.0;
};

// The tensors a forward comparison holds, each relative to its own magnitude: "logits", "hidden",
// and per read r "read r alpha" and (with heads) "read r alpha heads".
inline std::vector<NamedOutput> forward_outputs(const ForwardResult<double>& result) {
  std::vector<NamedOutput> outputs = {{"logits", result.logits}, {"hidden", result.hidden_final}};
  for (std::size_t r = 0; r < result.trace.reads.size(); ++r) {
    const ReadTrace& read = result.trace.reads[r];
    outputs.push_back({"read " + std::to_string(r) + " alpha", read.alpha});
    if (read.alpha_heads.size())
      outputs.push_back({"read " + std::to_string(r) + " alpha heads", read.alpha_heads});
  }
  return outputs;
}

// The largest |element| over every gradient tensor: the scale of the backward pass's terms. A
// weight's gradient is a sum over tokens of products of the same backward signals, so where its
// terms cancel (a small gradient), its rounding is relative to this scale, not to its own size.
template <typename Scalar>
double gradient_scale(const Gradients<Scalar>& gradients) {
  double scale = 0.0;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(gradients.grad), [&](const TensorRef<Scalar>& t) {
    for (std::int64_t i = 0; i < t.element_count(); ++i)
      scale = std::max(scale, std::abs(static_cast<double>(t.data[i])));
  });
  return scale;
}

// The loss ("loss") and every gradient tensor, by its parameter's name, against max(its
// magnitude, gradient_scale).
inline std::vector<NamedOutput> gradient_outputs(const Gradients<double>& gradients) {
  const double scale = gradient_scale(gradients);
  std::vector<NamedOutput> outputs = {{"loss", Eigen::MatrixXd::Constant(1, 1, gradients.loss)}};
  visit_tensors(const_cast<ModelWeights<double>&>(gradients.grad), [&](const TensorRef<double>& t) {
    outputs.push_back(
        {t.name, Eigen::Map<const Eigen::VectorXd>(t.data, t.element_count()), scale});
  });
  return outputs;
}

// The conditioning kappa of each output of a model (docs/testing.md §2.1): its largest relative
// move, relative_difference(moved, original, scale), per unit of a relative perturbation
// delta = 2^-30 of every parameter, the worst of two random perturbations, at least 1.
// Rounding the same arithmetic in another order perturbs each operation's inputs by a few u; an
// output that amplifies a perturbation of the parameters kappa times amplifies those as much.
// delta is 2^23 u of f64 (the perturbed run's own rounding is negligible beside it) and small
// enough that the move is linear in it. `outputs(model)` returns forward_outputs or
// gradient_outputs of a run of `model`.
class Conditioning {
 public:
  template <typename Outputs>
  Conditioning(const ModelWeights<double>& model, Outputs&& outputs) {
    constexpr double delta = 0x1p-30;
    const std::vector<NamedOutput> base = outputs(model);
    for (const auto& output : base) kappa_[output.name] = 1.0;
    for (std::uint64_t seed : {1u, 2u}) {
      const std::vector<NamedOutput> moved =
          outputs(with_relative_perturbation(model, delta, seed));
      for (std::size_t i = 0; i < base.size(); ++i) {
        double& kappa = kappa_[base[i].name];
        kappa = std::max(kappa,
                         relative_difference(moved[i].value, base[i].value, base[i].scale) / delta);
      }
    }
    for (const auto& [name, kappa] : kappa_) largest_ = std::max(largest_, kappa);
  }
  // The kappa of one output (by name); the largest for a name not compared here.
  double operator()(const std::string& name) const {
    const auto found = kappa_.find(name);
    return found == kappa_.end() ? largest_ : found->second;
  }
  double largest() const { return largest_; }

 private:
  std::map<std::string, double> kappa_;
  double largest_ = 1.0;
};

// A bound for each compared tensor by its name in forward_outputs / gradient_outputs:
// kReorderedUnits u of Scalar times the tensor's kappa where the model's conditioning is
// measured (conditioned_bound), one bound for every tensor otherwise (same_bound).
using BoundByName = std::function<double(const std::string&)>;
inline BoundByName same_bound(double relative) {
  return [relative](const std::string&) { return relative; };
}
template <typename Scalar>
BoundByName conditioned_bound(const Conditioning& kappa) {
  return
      [kappa](const std::string& name) { return roundoffs<Scalar>(kReorderedUnits) * kappa(name); };
}

// Asserts that relative_difference(actual, expected, scale) <= relative and prints the
// difference in the llm.c style ("TENSOR OK name, maxdiff = ..., bound ...").
template <typename A, typename B>
void expect_tensor_near(const std::string& name, const Eigen::MatrixBase<A>& actual,
                        const Eigen::MatrixBase<B>& expected, double relative, double scale = 0.0) {
  ASSERT_EQ(actual.rows(), expected.rows()) << name;
  ASSERT_EQ(actual.cols(), expected.cols()) << name;
  const double diff = relative_difference(actual, expected, scale);
  log_bound(name, diff, relative);
  EXPECT_LE(diff, relative) << name << ": relative maxdiff " << diff << " > " << relative << " ("
                            << diff / kUnitRoundoff<double> << " u of f64, "
                            << diff / kUnitRoundoff<float> << " u of f32)";
  if (diff <= relative)
    std::cout << "TENSOR OK " << name << ", maxdiff = " << diff << " (bound " << relative << ")\n";
}

// Every tensor of two checkpoint directories (docs/interop.md): the same names, dtypes, shapes and
// stored bytes.
inline void expect_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  CheckpointFiles x = CheckpointFiles::open(a);
  CheckpointFiles y = CheckpointFiles::open(b);
  x.load_data();
  y.load_data();
  ASSERT_EQ(x.tensors().size(), y.tensors().size());
  for (const auto& [name, tensor] : x.tensors()) {
    const auto* other = y.find(name);
    ASSERT_NE(other, nullptr) << name;
    EXPECT_EQ(other->info->dtype, tensor.info->dtype) << name;
    EXPECT_EQ(other->info->shape, tensor.info->shape) << name;
    EXPECT_TRUE(other->file->raw_bytes(*other->info) == tensor.file->raw_bytes(*tensor.info))
        << name;
  }
}

}  // namespace attnres::test
