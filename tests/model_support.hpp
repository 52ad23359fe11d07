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

// Max |a - b| / max(1, max |b|): absolute for small values, relative for large ones.
template <typename A, typename B>
double max_scaled_difference(const Eigen::MatrixBase<A>& actual,
                             const Eigen::MatrixBase<B>& expected) {
  const Eigen::MatrixXd a = actual.template cast<double>();
  const Eigen::MatrixXd b = expected.template cast<double>();
  if (a.rows() != b.rows() || a.cols() != b.cols()) return INFINITY;
  const double scale = std::max(1.0, b.cwiseAbs().maxCoeff());
  return (a - b).cwiseAbs().maxCoeff() / scale;
}

// Asserts closeness and prints the max difference.
template <typename A, typename B>
void expect_tensor_near(const std::string& name, const Eigen::MatrixBase<A>& actual,
                        const Eigen::MatrixBase<B>& expected, double tolerance) {
  ASSERT_EQ(actual.rows(), expected.rows()) << name;
  ASSERT_EQ(actual.cols(), expected.cols()) << name;
  const double diff = max_scaled_difference(actual, expected);
  EXPECT_LE(diff, tolerance) << name << ": maxdiff " << diff << " > " << tolerance;
  if (diff <= tolerance) std::cout << "TENSOR OK " << name << ", maxdiff = " << diff << "\n";
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
