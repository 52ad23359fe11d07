// Training-step benchmarks: loss and gradients (forward + backward) on the gradient engines
// (docs/training.md, docs/engines.md).
//
//   build/bench/attnres_bench --benchmark_filter=Train --benchmark_repetitions=3
//
// BM_TrainStep: tokens/s (items_per_second) of GradientEngine<float>::compute on a d = 256,
// 8-layer (L = 16) model, 4 heads (4 kv heads), SwiGLU width 688 (~ 8/3 d, rounded to 16), vocab
// 256, a batch of 8 sequences of T = 256, per scheme (standard, Full, Block S = 4), on the fast
// engine with 1 and 2 threads, and once on the reference engine (Block, 1 thread) for comparison.
// BM_TrainGemm: the Eigen sgemm rate (FLOP/s counter) of the (T, d) x (d, 3d) product the fast
// engine's fused (q|k|v) projection runs, the yardstick for the step's GEMM efficiency.
#include <benchmark/benchmark.h>

#include "attnres/gradient_engine.hpp"
#include "attnres/model.hpp"

namespace attnres {
namespace {

constexpr int kTrainTokens = 256;
constexpr int kTrainBatch = 8;

const ModelWeights<float>& train_model() {
  static const ModelWeights<float> model = [] {
    ModelConfig config;
    config.hidden_size = 256;
    config.num_hidden_layers = 8;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 4;
    config.intermediate_size = 688;
    config.vocab_size = 256;
    return random_model(config, {.seed = 1, .query_std = 0.02}).cast<float>();
  }();
  return model;
}

std::vector<std::vector<int>> train_batch() {
  std::vector<std::vector<int>> batch(kTrainBatch, std::vector<int>(kTrainTokens));
  for (int b = 0; b < kTrainBatch; ++b) {
    for (int t = 0; t < kTrainTokens; ++t) {
      batch[static_cast<std::size_t>(b)][static_cast<std::size_t>(t)] =
          (t * 37 + b * 101 + 7) % 256;
    }
  }
  return batch;
}

void BM_TrainStep(benchmark::State& state) {
  const auto mode = static_cast<ResidualMode>(state.range(0));
  const auto threads = static_cast<int>(state.range(1));  // 0: the reference engine
  ForwardOptions options;
  options.mode = mode;
  options.block_size = 4;
  options.record_mixing = false;
  const auto& model = train_model();  // built before timing starts
  const auto batch = train_batch();
  GradientEngine<float> engine(
      model.config,
      {threads == 0 ? EngineKind::reference : EngineKind::fast, Device::cpu, std::max(threads, 1)});
  Gradients<float> gradients;
  engine.compute(model, batch, options, gradients);  // warm-up: workspaces and gradient buffers
  for (auto _ : state) {
    engine.compute(model, batch, options, gradients);
    benchmark::DoNotOptimize(gradients.grad.lm_head.data());
  }
  state.SetItemsProcessed(state.iterations() * kTrainBatch * kTrainTokens);
  state.SetLabel(to_string(mode) +
                 (threads == 0 ? ", reference" : ", fast x" + std::to_string(threads)));
}
BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{static_cast<int>(ResidualMode::standard), static_cast<int>(ResidualMode::full),
                    static_cast<int>(ResidualMode::block)},
                   {1, 2}})
    ->Args({static_cast<int>(ResidualMode::block), 0})
    ->MinTime(2.0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_TrainGemm(benchmark::State& state) {
  const Eigen::Index T = kTrainTokens, d = 256, n = 3 * 256;
  const Matrix<float> x = Matrix<float>::Random(T, d);
  const Matrix<float> w = Matrix<float>::Random(n, d);
  Matrix<float> y(T, n);
  for (auto _ : state) {
    y.noalias() = x * w.transpose();
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(T * d * n) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TrainGemm)->MinTime(1.0);

}  // namespace
}  // namespace attnres
