// The measurements behind calibrate --measure (attnres/measure.hpp): the engine's depth reads of
// a whole pass, one-shot, two-phase and stack-style, give the same outputs; the measuring
// functions return figures and stop when asked. No timing is asserted.
#include <gtest/gtest.h>

#include <cmath>

#include "attnres/depth_layout.hpp"
#include "attnres/measure.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_measure {

void expect_same_reads(const DepthLayout& layout, int T, int d, int threads,
                       int full_schedule_block) {
  DepthPass pass(layout, T, d, threads, full_schedule_block);
  pass.keep_outputs(true);
  pass.run(DepthImplementation::one_shot);
  const std::vector<float> one_shot = pass.read_outputs();
  const int reads = layout.sublayers + 1;
  ASSERT_EQ(one_shot.size(), static_cast<std::size_t>(reads) * T * d);
  EXPECT_EQ(pass.calls(), 2 * reads);  // phase one + finish per read
  for (const auto implementation : {DepthImplementation::stack, DepthImplementation::two_phase}) {
    pass.run(implementation);
    const std::vector<float>& other = pass.read_outputs();
    ASSERT_EQ(other.size(), one_shot.size());
    // The same reads in another order (docs/testing.md §2), relative to the outputs' magnitude.
    using Map = Eigen::Map<const Eigen::VectorXf>;
    const auto count = static_cast<Eigen::Index>(one_shot.size());
    test::expect_tensor_near(to_string(implementation) + " " + to_string(layout.mode),
                             Map(other.data(), count), Map(one_shot.data(), count),
                             test::kReorderedBound<float>);
    if (implementation == DepthImplementation::stack) EXPECT_EQ(pass.calls(), 5 * reads);
  }
  // Reruns start from the same history (Block's partial sums restart from zero).
  pass.run(DepthImplementation::one_shot);
  EXPECT_EQ(pass.read_outputs(), one_shot);
  EXPECT_TRUE(std::isfinite(one_shot.back()));
}

TEST(DepthPass, StackStyleAndTwoPhaseReadWhatTheArenaReadReads) {
  expect_same_reads(make_depth_layout(ResidualMode::block, 8, 2), 24, 16, 2, 0);
  expect_same_reads(make_depth_layout(ResidualMode::block, 6, 4), 7, 8, 3, 0);  // ragged last block
  expect_same_reads(make_depth_layout(ResidualMode::full, 7, 1), 24, 16, 2, 3);
  expect_same_reads(make_depth_layout(ResidualMode::full, 5, 1), 5, 8, 1, 0);
}

TEST(DepthPass, CountsTheCallsAndHistoryUpdatesOfAPass) {
  // Block, L = 8, S = 4: two-phase is one phase-1 call per group (2 blocks) + one per read; the
  // history: 8 partial-sum adds and one zero fill (block 2 starting).
  DepthPass pass(make_depth_layout(ResidualMode::block, 8, 4), 16, 8, 2);
  pass.run(DepthImplementation::two_phase);
  EXPECT_EQ(pass.calls(), 2 + 9);
  EXPECT_EQ(pass.history_updates(), 8 + 1);
  EXPECT_GT(time_depth_pass(pass, DepthImplementation::stack, 1), 0);
  EXPECT_THROW(DepthPass(make_depth_layout(ResidualMode::standard, 4, 1), 4, 4, 1), Error);
}

TEST(Measure, FiguresArePositiveAndCancellingStops) {
  for (const Precision precision : {Precision::f32, Precision::bf16, Precision::f64}) {
    const GemmTiming gemm = measure_gemm(precision, 32, 24, 16, 2, 1);
    EXPECT_EQ(gemm.flops(), 2.0 * 32 * 24 * 16);
    EXPECT_GT(gemm.flops_per_s(), 0) << to_string(precision);
  }
  EXPECT_GT(measure_call_floor(2, 5), 0);
  EXPECT_GT(time_standard_residual(8, 8, 4, 1), 0);
  EXPECT_GT(physical_memory_bytes(), 0);
  const Progress stop = [](std::size_t, std::size_t) { return false; };
  EXPECT_THROW(measure_gemm(Precision::f32, 8, 8, 8, 1, 1, stop), Cancelled);
  EXPECT_THROW(measure_call_floor(1, 2, stop), Cancelled);
  DepthPass pass(make_depth_layout(ResidualMode::full, 3, 1), 4, 4, 1);
  EXPECT_THROW(time_depth_pass(pass, DepthImplementation::one_shot, 2, stop), Cancelled);
  EXPECT_THROW(time_standard_residual(4, 4, 2, 1, stop), Cancelled);
}

}  // namespace test_measure
}  // namespace attnres
