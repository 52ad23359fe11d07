// Cost-engine speed: configurations evaluated per second on one core (goal: >= 1 million).
//
//   build/bench/attnres_bench --benchmark_filter=Cost
//
// BM_CostEvaluate: resolve + evaluate everything (I/O, history, prefill, paper and exact
// per-boundary pipeline payloads, FLOPs) for a varying Kimi-Linear-like setting.
// BM_CostSweep: the same through run_sweep over an L x N grid, with one metric recorded.
#include <benchmark/benchmark.h>

#include "attnres/cost.hpp"
#include "attnres/sweep.hpp"

namespace attnres {
namespace {

void BM_CostEvaluate(benchmark::State& state) {
  CostInputs in;
  in.sublayers = 54;
  in.block_size = 6;
  in.d_model = 2304;
  in.tokens = 4096;
  in.pp = state.range(0);
  in.vpp = state.range(1);
  std::int64_t i = 0;
  for (auto _ : state) {
    in.tokens = 4096 + (i++ & 1023);  // vary the input so nothing is hoisted
    const CostReport report = evaluate_costs(resolve_cost_inputs(in));
    benchmark::DoNotOptimize(report.boundary_cached_elements);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("configs; P=" + std::to_string(in.pp) + " V=" + std::to_string(in.vpp));
}
BENCHMARK(BM_CostEvaluate)->Args({1, 1})->Args({4, 2})->Args({8, 4});

void BM_CostSweep(benchmark::State& state) {
  CostInputs base;
  base.sublayers = 128;
  base.blocks = 8;
  base.d_model = 7168;
  base.pp = 4;
  base.vpp = 2;
  SweepSpec spec;
  spec.name = "grid";
  spec.x.parameter = "sublayers";
  spec.y = SweepAxis{"blocks", {}};
  spec.metrics = {"io_multiples_of_d.block_two_phase"};
  for (std::int64_t L = 8; L <= 256; ++L) spec.x.values.push_back(L);
  for (std::int64_t N = 1; N <= 64; ++N) spec.y->values.push_back(N);
  std::size_t settings = 0;
  for (auto _ : state) {
    const SweepResult result = run_sweep(base, spec);
    settings += spec.x.values.size() * spec.y->values.size();
    benchmark::DoNotOptimize(result.points.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(settings));
  state.SetLabel("configs (L 8..256 x N 1..64, impossible ones rejected)");
}
BENCHMARK(BM_CostSweep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace attnres
BENCHMARK_MAIN();
