// The cost engine's source counts against the model's own layout (two independent implementations
// in two libraries): the forward engine's DepthLayout lists every read's sources, the cost engine
// counts them in closed form (docs/math.md §3) and per block (block_layout.hpp).
#include <gtest/gtest.h>

#include <cstdint>

#include "attnres/block_layout.hpp"
#include "attnres/cost.hpp"
#include "attnres/depth_layout.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_layouts_agree {

TEST(CostFlops, SourcePairCountsMatchTheLayouts) {
  for (std::int64_t L : {1, 2, 5, 8, 13}) {
    for (std::int64_t S = 1; S <= L; ++S) {
      const auto layout =
          make_depth_layout(ResidualMode::block, static_cast<int>(L), static_cast<int>(S));
      std::int64_t pairs = 0;
      for (const auto& read : layout.reads) pairs += static_cast<std::int64_t>(read.size());
      EXPECT_EQ(depth_read_source_pairs(ResidualMode::block, L, S), pairs) << L << " " << S;
    }
    const auto full = make_depth_layout(ResidualMode::full, static_cast<int>(L), 0);
    std::int64_t pairs = 0;
    for (const auto& read : full.reads) pairs += static_cast<std::int64_t>(read.size());
    EXPECT_EQ(depth_read_source_pairs(ResidualMode::full, L, 1), pairs);
  }
}

TEST(BlockLayout, SourcesAgreeWithTheForwardEnginesLayout) {
  // An independent implementation: the forward engine's DepthLayout lists every read's sources.
  for (int L : {1, 2, 5, 8, 13, 24}) {
    for (int S = 1; S <= L; ++S) {
      const DepthLayout engine = make_depth_layout(ResidualMode::block, L, S);
      const auto reads = read_sources(uniform_block_layout(L, S));
      ASSERT_EQ(reads.size(), engine.reads.size());
      for (std::size_t r = 0; r < reads.size(); ++r) {
        EXPECT_EQ(reads[r].sources(), static_cast<std::int64_t>(engine.reads[r].size()))
            << "L=" << L << " S=" << S << " r=" << r;
      }
      EXPECT_EQ(read_source_pairs(uniform_block_layout(L, S)),
                depth_read_source_pairs(ResidualMode::block, L, S));
    }
  }
}

}  // namespace test_layouts_agree
}  // namespace attnres
