// Reference results from the paper (SPEC §4), for reference marks on plots and sanity tests.
#pragma once

#include <array>

namespace attnres::paper {

// Fig. 6: block-size sweep on the 32-sublayer ablation model (validation loss).
struct BlockSizeLoss {
  int block_size;  // S; N = 32 / S
  double loss;
};
inline constexpr std::array<BlockSizeLoss, 6> kFig6BlockSweep = {
    BlockSizeLoss{32, 1.757}, {16, 1.753}, {8, 1.748}, {4, 1.746}, {2, 1.746}, {1, 1.737}};
inline constexpr double kFig6Baseline = 1.766;
inline constexpr int kFig6Sublayers = 32;

// Table 2: validation loss by model size (baseline / Block / Full).
struct SizeLoss {
  const char* size;
  double baseline, block, full;
};
inline constexpr std::array<SizeLoss, 5> kTable2 = {SizeLoss{"194M", 1.931, 1.909, 1.899},
                                                    {"241M", 1.895, 1.875, 1.874},
                                                    {"296M", 1.829, 1.809, 1.804},
                                                    {"436M", 1.766, 1.746, 1.737},
                                                    {"528M", 1.719, 1.693, 1.692}};

}  // namespace attnres::paper
