// Which sources each read sees (docs/math.md §2.3): the block rules, limits and bad sizes.
#include <gtest/gtest.h>

#include "attnres/depth_layout.hpp"
#include "attnres/error.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_depth_layout {

std::vector<std::string> labels(const std::vector<DepthSource>& sources) {
  std::vector<std::string> out;
  for (const auto& s : sources) out.push_back(s.label());
  return out;
}
using Labels = std::vector<std::string>;

TEST(DepthLayout, BlockFirstSublayerHasNoPartialSource) {
  const auto layout = make_depth_layout(ResidualMode::block, 4, 2);
  ASSERT_EQ(layout.reads.size(), 5u);
  EXPECT_EQ(labels(layout.reads[0]), (Labels{"emb"}));
  EXPECT_EQ(labels(layout.reads[1]), (Labels{"emb", "partial"}));
  EXPECT_EQ(labels(layout.reads[2]), (Labels{"emb", "b1"}));
  EXPECT_EQ(labels(layout.reads[3]), (Labels{"emb", "b1", "partial"}));
  EXPECT_EQ(labels(layout.reads[4]), (Labels{"emb", "b1", "b2"}));
  // The partial of sublayer 4 is v3 only.
  EXPECT_EQ(layout.reads[3][2].first_member, 3);
  EXPECT_EQ(layout.reads[3][2].last_member, 3);
}

TEST(DepthLayout, NoZeroPlaceholderUnlessAsked) {
  const auto plain = make_depth_layout(ResidualMode::block, 6, 3);
  for (const auto& read : plain.reads) {
    for (const auto& source : read) EXPECT_NE(source.kind, DepthSource::Kind::zero_placeholder);
  }
  const auto with = make_depth_layout(ResidualMode::block, 6, 3, true);
  EXPECT_EQ(labels(with.reads[0]), (Labels{"emb", "zero"}));
  EXPECT_EQ(labels(with.reads[3]), (Labels{"emb", "b1", "zero"}));
  EXPECT_EQ(labels(with.reads[6]), (Labels{"emb", "b1", "b2"}));  // final read: none
}

TEST(DepthLayout, BlockSizeOneHasTheSameSourcesAsFull) {
  const auto block = make_depth_layout(ResidualMode::block, 7, 1);
  const auto full = make_depth_layout(ResidualMode::full, 7, 0);
  ASSERT_EQ(block.reads.size(), full.reads.size());
  for (std::size_t r = 0; r < block.reads.size(); ++r) {
    ASSERT_EQ(block.reads[r].size(), full.reads[r].size()) << "read " << r;
    for (std::size_t j = 0; j < block.reads[r].size(); ++j) {
      EXPECT_EQ(block.reads[r][j].first_member, full.reads[r][j].first_member);
      EXPECT_EQ(block.reads[r][j].last_member, full.reads[r][j].last_member);
    }
  }
}

TEST(DepthLayout, OneBlockKeepsTheEmbeddingSeparate) {
  const auto layout = make_depth_layout(ResidualMode::block, 6, 6);
  EXPECT_EQ(layout.blocks, 1);
  EXPECT_EQ(labels(layout.reads[0]), (Labels{"emb"}));
  for (int r = 1; r < 6; ++r) EXPECT_EQ(labels(layout.reads[r]), (Labels{"emb", "partial"}));
  EXPECT_EQ(labels(layout.reads[6]), (Labels{"emb", "b1"}));  // a 2-way softmax
}

TEST(DepthLayout, KimiLinear48BFinalReadHasTenSources) {
  const auto layout = make_depth_layout(ResidualMode::block, 54, 6);
  EXPECT_EQ(layout.blocks, 9);
  EXPECT_EQ(layout.reads.back().size(), 10u);  // embedding + 9 blocks
}

TEST(DepthLayout, IncompleteLastBlockContributesItsPartialSum) {
  const auto layout = make_depth_layout(ResidualMode::block, 6, 4);  // blocks {1..4}, {5, 6}
  EXPECT_EQ(layout.blocks, 2);
  const auto& final_read = layout.reads.back();
  ASSERT_EQ(labels(final_read), (Labels{"emb", "b1", "b2"}));
  EXPECT_EQ(final_read[2].first_member, 5);
  EXPECT_EQ(final_read[2].last_member, 6);
  EXPECT_EQ(labels(layout.reads[5]), (Labels{"emb", "b1", "partial"}));
}

TEST(DepthLayout, FullReadSeesEveryEarlierOutput) {
  const auto layout = make_depth_layout(ResidualMode::full, 5, 0);
  for (int r = 0; r <= 5; ++r) EXPECT_EQ(layout.reads[r].size(), static_cast<std::size_t>(r + 1));
}

TEST(DepthLayout, RejectsImpossibleBlockSizes) {
  EXPECT_THROW(make_depth_layout(ResidualMode::block, 8, 0), Error);
  EXPECT_THROW(make_depth_layout(ResidualMode::block, 8, 9), Error);
  EXPECT_THROW(make_depth_layout(ResidualMode::block, 8, -2), Error);
  EXPECT_THROW(make_depth_layout(ResidualMode::full, 0, 0), Error);
  EXPECT_NE(test::error_message([] {
              make_depth_layout(ResidualMode::block, 8, 9);
            }).find("between 1 and L = 8"),
            std::string::npos);
}

}  // namespace test_depth_layout
}  // namespace attnres
