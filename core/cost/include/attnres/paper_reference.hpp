// Reference results from the paper (docs/math.md, docs/schemes.md), for reference marks on plots,
// the tiny Table 4 and sanity tests.
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

// Table 4: validation loss of each residual scheme on the 32-sublayer ablation model, keyed by
// the named scheme of the cost engine (cost.hpp scheme_names; Block rows at S = 4, the window
// row W = 8, multi-head H = 16). The baseline is the standard residual of the same model.
struct SchemeLoss {
  const char* scheme;
  const char* row;  // the paper's wording
  double loss;
};
inline constexpr std::array<SchemeLoss, 12> kTable4 = {
    SchemeLoss{"standard", "baseline (standard residual)", kFig6Baseline},
    {"denseformer", "DenseFormer", 1.767},
    {"mhc", "mHC", 1.747},
    {"full", "Full AttnRes", 1.737},
    {"full_input_query", "input-dependent query", 1.731},
    {"full_scalars", "input-independent mixing (scalars)", 1.749},
    {"full_sigmoid", "sigmoid instead of softmax", 1.741},
    {"full_no_key_norm", "no key norm", 1.743},
    {"full_window", "sliding window W = 1 + 8", 1.764},
    {"block", "Block AttnRes S = 4", 1.746},
    {"block_multihead", "Block multi-head (H = 16)", 1.752},
    {"block_no_key_norm", "Block without key norm", 1.750}};

}  // namespace attnres::paper
