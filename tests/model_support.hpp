// Helpers for the suites that link the model library: a model shape for tests, weights with random
// gains, and tensor comparison that prints "TENSOR OK, maxdiff = ..." in the llm.c style.
#pragma once

#include <gtest/gtest.h>

#include <Eigen/Core>
#include <cmath>
#include <iostream>
#include <random>
#include <string>

#include "attnres/checkpoint_files.hpp"
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
double relative_difference(const Eigen::MatrixBase<A>& actual,
                           const Eigen::MatrixBase<B>& expected, double scale = 0.0) {
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

// The bound of an engine against the reference when both compute the same arithmetic in another
// order (products blocked and vectorised differently, sums split over threads, two-phase reads):
// docs/testing.md §2. TODO units.
template <typename Scalar>
inline constexpr double kReorderedBound = roundoffs<Scalar>(4096);

// Asserts that relative_difference(actual, expected, scale) <= relative and prints the
// difference in the llm.c style ("TENSOR OK name, maxdiff = ..., bound ...").
template <typename A, typename B>
void expect_tensor_near(const std::string& name, const Eigen::MatrixBase<A>& actual,
                        const Eigen::MatrixBase<B>& expected, double relative,
                        double scale = 0.0) {
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

// The same for a check written as EXPECT_LE(tensor_difference(...), bound): the difference, logged.
template <typename A, typename B>
double tensor_difference(const std::string& name, const Eigen::MatrixBase<A>& actual,
                         const Eigen::MatrixBase<B>& expected, double relative,
                         double scale = 0.0) {
  const double diff = relative_difference(actual, expected, scale);
  log_bound(name, diff, relative);
  return diff;
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
