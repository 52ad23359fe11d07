// Forward-pass and depth-attention benchmarks.
//
//   build/bench/attnres_bench                         # everything
//   build/bench/attnres_bench --benchmark_filter=Forward
//
// BM_Forward: tokens/s of a d = 512, 8-layer (L = 16) model at T = 256, f32, per scheme
// (standard, Full, Block S = 4) with two-phase reads and one-shot reads, on the reference engine
// (argument 0) and the fast engine with 1 and 2 threads (arguments 1, 2). `attnres bench forward`
// measures the same on a model file, with the depth read's bandwidth.
// BM_DepthRead*: one depth-attention read over n sources for T = 256, d = 512: the readable
// reference (core, Eigen) against the fused CPU kernel.
#include <benchmark/benchmark.h>

#include <random>

#include "attnres/depth_attention.hpp"
#include "attnres/engine.hpp"
#include "attnres/forward.hpp"
#include "attnres/kernels.hpp"
#include "attnres/model.hpp"

namespace attnres {
namespace {

const ModelWeights<float>& bench_model() {
  static const ModelWeights<float> model = [] {
    ModelConfig config;
    config.hidden_size = 512;
    config.num_hidden_layers = 8;
    config.num_attention_heads = 8;
    config.num_key_value_heads = 8;
    config.intermediate_size = 1376;  // ~ 8/3 d, Llama-style
    config.vocab_size = 1024;
    return random_model(config, {.seed = 1, .query_std = 0.02}).cast<float>();
  }();
  return model;
}

void BM_Forward(benchmark::State& state) {
  const auto mode = static_cast<ResidualMode>(state.range(0));
  const bool two_phase = state.range(1) != 0;
  const auto threads = static_cast<int>(state.range(2));  // 0: the reference engine
  const int T = 256;
  std::vector<int> tokens(T);
  for (int t = 0; t < T; ++t) tokens[static_cast<std::size_t>(t)] = (t * 37) % 1024;
  ForwardOptions options;
  options.mode = mode;
  options.block_size = 4;
  options.two_phase = two_phase;
  options.record_mixing = false;
  const auto& model = bench_model();  // built before timing starts
  ForwardEngine<float> engine(model, {threads == 0 ? EngineKind::reference : EngineKind::fast,
                                      Device::cpu, std::max(threads, 1)});
  for (auto _ : state) {
    auto result = engine.forward(tokens, options);
    benchmark::DoNotOptimize(result.logits.data());
  }
  state.SetItemsProcessed(state.iterations() * T);
  state.SetLabel(to_string(mode) +
                 (mode == ResidualMode::standard ? ""
                  : two_phase                    ? " two-phase"
                                                 : " one-shot") +
                 (threads == 0 ? ", reference" : ", fast x" + std::to_string(threads)));
}
BENCHMARK(BM_Forward)
    ->ArgsProduct({{static_cast<int>(ResidualMode::standard), static_cast<int>(ResidualMode::full),
                    static_cast<int>(ResidualMode::block)},
                   {1, 0},
                   {0, 1, 2}})
    ->MinTime(2.0)
    ->Unit(benchmark::kMillisecond);

struct ReadInputs {
  int n, T = 256, d = 512;
  std::vector<Matrix<float>> values;
  std::vector<float> packed;  // (n, T, d)
  DepthReadWeights<float> read;
  explicit ReadInputs(int sources) : n(sources) {
    std::mt19937 rng(2);
    std::normal_distribution<float> normal;
    for (int i = 0; i < n; ++i) {
      values.push_back(Matrix<float>(T, d).unaryExpr([&](float) { return normal(rng); }));
      packed.insert(packed.end(), values.back().data(), values.back().data() + T * d);
    }
    read.query = Vector<float>(d).unaryExpr([&](float) { return 0.05f * normal(rng); });
    read.key_norm_gain = Vector<float>::Ones(d);
  }
};

void BM_DepthReadReference(benchmark::State& state) {
  const ReadInputs in(static_cast<int>(state.range(0)));
  std::vector<const Matrix<float>*> sources;
  for (const auto& v : in.values) sources.push_back(&v);
  Matrix<float> h, alpha;
  for (auto _ : state) {
    depth_attention_one_shot(sources, in.read, 1e-6f, &h, &alpha);
    benchmark::DoNotOptimize(h.data());
  }
  state.SetItemsProcessed(state.iterations() * in.T);
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(in.packed.size() * sizeof(float)));
}
BENCHMARK(BM_DepthReadReference)->Arg(9)->Arg(17)->Unit(benchmark::kMicrosecond);

void BM_DepthReadCpuKernel(benchmark::State& state) {
  const ReadInputs in(static_cast<int>(state.range(0)));
  std::vector<float> h(static_cast<std::size_t>(in.T) * in.d),
      alpha(static_cast<std::size_t>(in.T) * in.n);
  for (auto _ : state) {
    depth_attention_forward(KernelBackend::cpu, h.data(), alpha.data(), in.packed.data(),
                            in.read.query.data(), in.read.key_norm_gain.data(), 1e-6f, in.n, in.T,
                            in.d);
    benchmark::DoNotOptimize(h.data());
  }
  state.SetItemsProcessed(state.iterations() * in.T);
  state.SetBytesProcessed(state.iterations() *
                          static_cast<int64_t>(in.packed.size() * sizeof(float)));
}
BENCHMARK(BM_DepthReadCpuKernel)->Arg(9)->Arg(17)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace attnres
