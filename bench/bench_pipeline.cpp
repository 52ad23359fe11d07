// Schedule-simulator speed: 64 ranks, V = 4, m = 256 micro-batches (goal: under one second),
// timeline recorded (as for a Gantt chart) and not.
//
//   build/bench/attnres_bench --benchmark_filter=Pipeline
#include <benchmark/benchmark.h>

#include "attnres/pipeline_sim.hpp"

namespace attnres {
namespace {

void BM_PipelineSimulate(benchmark::State& state) {
  PipelineSimInputs in;
  in.ranks = static_cast<int>(state.range(0));
  in.virtual_stages = static_cast<int>(state.range(1));
  in.microbatches = static_cast<int>(state.range(2));
  in.schedule =
      in.virtual_stages > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
  in.record_timeline = state.range(3) != 0;
  const auto C = static_cast<std::size_t>(in.ranks * in.virtual_stages);
  in.forward_seconds.assign(C, 1e-3);
  in.backward_seconds.assign(C, 2e-3);
  in.boundary_bytes.assign(C - 1, 1e8);
  in.activation_bytes.assign(C, 1e9);
  in.history_bytes.assign(C, 1e8);
  in.link_bandwidth = 40e9;
  in.link_latency = 5e-6;
  for (auto _ : state) {
    const auto result = simulate_pipeline(in);
    benchmark::DoNotOptimize(result.iteration_seconds);
  }
  const double ops = 2.0 * static_cast<double>(C) * in.microbatches;
  state.counters["ops"] = ops;
  state.SetLabel(in.record_timeline ? "timeline recorded" : "no timeline");
}
BENCHMARK(BM_PipelineSimulate)
    ->Args({64, 4, 256, 1})
    ->Args({64, 4, 256, 0})
    ->Args({8, 2, 64, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace attnres
