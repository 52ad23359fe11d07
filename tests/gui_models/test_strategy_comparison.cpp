// The cost explorer's Strategies tab without a window (app/gui/models/strategy_comparison.hpp):
// each row against the core's strategy model called directly (strategy_cost, strategy_step) at
// the explorer's opening inputs on H100 in bf16.
#include <gtest/gtest.h>

#include <string>

#include "attnres/hardware.hpp"
#include "explorer_state.hpp"
#include "strategy_comparison.hpp"

namespace attnres::gui {

TEST(StrategyComparison, EachRowIsTheCoresStrategyModel) {
  const ExplorerState state = default_explorer_state();  // L = 128, N = 8, d = 7168, T = 128K
  const CostInputs& in = state.model;
  const Hardware h100 = load_hardware("h100");
  const StrategyComparison c = compare_strategies(in, h100);
  // Four rows per mode: Block's, then Full's, in kStrategyNames order.
  ASSERT_EQ(c.rows.size(), 8u);
  for (std::size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(c.rows[r].mode, r < 4 ? ResidualMode::block : ResidualMode::full) << r;
    EXPECT_EQ(c.rows[r].strategy, kStrategyNames[r % 4].value) << r;
  }
  // One d-wide vector over the micro-batch: d · B·T · 2 bytes (bf16).
  EXPECT_EQ(c.vector_bytes, 7168.0 * 131072.0 * 2.0);
  EXPECT_EQ(c.block_layout, "16 x 8");  // N = 8 blocks of S = 16 sublayers
  const StrategyCost stack = strategy_cost(Strategy::stack, mode_layout(ResidualMode::block, in),
                                           mode_groups(ResidualMode::block, in));
  EXPECT_EQ(c.rows[0].forward.read_vectors, stack.forward.read_vectors);
  EXPECT_EQ(c.rows[0].backward.write_vectors, stack.backward.write_vectors);
  EXPECT_EQ(c.rows[0].forward.launches, stack.forward.launches);
  const StrategyStep arena_full =
      strategy_step(Strategy::arena, ResidualMode::full, in, Phase::prefill, true, h100);
  EXPECT_EQ(c.rows[5].strategy, Strategy::arena);
  EXPECT_EQ(c.rows[5].train.overhead_fraction, arena_full.overhead_fraction);
  const StrategyStep decode =
      strategy_step(Strategy::fused_two_phase, ResidualMode::block, in, Phase::decode, false, h100);
  EXPECT_EQ(c.rows[3].decode.forward.seconds, decode.forward.seconds);
  // Another preset changes the times, never the bytes.
  const StrategyComparison a100 = compare_strategies(in, load_hardware("a100"));
  EXPECT_EQ(a100.rows[0].forward.read_vectors, c.rows[0].forward.read_vectors);
  EXPECT_NE(a100.rows[0].train.forward.seconds, c.rows[0].train.forward.seconds);
}

}  // namespace attnres::gui
