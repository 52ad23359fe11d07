#include "attnres/depth_layout.hpp"

#include <algorithm>

#include "attnres/error.hpp"

namespace attnres {

std::string DepthSource::label() const {
  switch (kind) {
    case Kind::embedding:
      return "emb";
    // (append, not "v" + to_string: GCC 12 raises a false -Wrestrict on the latter)
    case Kind::sublayer_output:
      return std::string("v").append(std::to_string(first_member));
    case Kind::block:
      return std::string("b").append(std::to_string(block));
    case Kind::partial_block:
      return "partial";
    case Kind::zero_placeholder:
      return "zero";
  }
  return "?";
}

int DepthLayout::block_of_sublayer(int sublayer) const {
  if (mode == ResidualMode::block) return (sublayer - 1) / block_size + 1;
  return sublayer;
}

DepthLayout make_depth_layout(const AttnResConfig& scheme, int sublayers, bool zero_placeholder) {
  switch (scheme.mode) {
    case ResidualMode::standard:
      return make_depth_layout(ResidualMode::standard, sublayers, 0);
    case ResidualMode::block:
      return make_depth_layout(ResidualMode::block, sublayers, scheme.block_size, zero_placeholder);
    default:
      break;
  }
  // Full AttnRes and the schemes that weight every earlier output (DenseFormer, rescaled, mHC's
  // effective weights) share the Full layout; only Full takes a window (docs/schemes.md).
  DepthLayout layout = make_depth_layout(ResidualMode::full, sublayers, 1, false, scheme.window);
  layout.mode = scheme.mode;
  return layout;
}

DepthLayout make_depth_layout(ResidualMode mode, int sublayers, int block_size,
                              bool zero_placeholder, int window) {
  if (sublayers < 1) {
    throw Error("the number of sublayers L must be >= 1, got " + std::to_string(sublayers));
  }
  DepthLayout layout;
  layout.mode = mode;
  layout.sublayers = sublayers;
  layout.zero_placeholder = zero_placeholder;
  const DepthSource embedding{DepthSource::Kind::embedding, 0, 0, 0};
  const int L = sublayers;

  if (mode == ResidualMode::standard) return layout;

  if (mode == ResidualMode::full) {
    // docs/math.md §2.2: read r sees v_0 .. v_r (read L: all L+1 outputs); with a window W
    // (docs/schemes.md) the embedding and the last W outputs v_{r-W+1} .. v_r.
    if (window < 0) throw Error("window W must be >= 0 (0 = off), got " + std::to_string(window));
    layout.block_size = 1;
    layout.blocks = L;
    layout.window = window;
    for (int r = 0; r <= L; ++r) {
      std::vector<DepthSource> sources{embedding};
      for (int i = window > 0 ? std::max(1, r - window + 1) : 1; i <= r; ++i) {
        sources.push_back({DepthSource::Kind::sublayer_output, i, i, i});
      }
      layout.reads.push_back(std::move(sources));
    }
    return layout;
  }

  if (block_size < 1 || block_size > L) {
    throw Error("block size S must be between 1 and L = " + std::to_string(L) + " sublayers, got " +
                std::to_string(block_size));
  }
  const int S = block_size;
  layout.block_size = S;
  layout.blocks = (L + S - 1) / S;
  auto completed_block = [&](int n) {
    return DepthSource{DepthSource::Kind::block, n, (n - 1) * S + 1, std::min(n * S, L)};
  };
  // docs/math.md §2.3: the i-th sublayer of block n sees b_0 .. b_{n-1}, plus b_n^{(i-1)} when
  // i >= 2.
  for (int sublayer = 1; sublayer <= L; ++sublayer) {
    const int n = (sublayer - 1) / S + 1;
    const int i = sublayer - (n - 1) * S;
    std::vector<DepthSource> sources{embedding};
    for (int m = 1; m < n; ++m) sources.push_back(completed_block(m));
    if (i >= 2) {
      sources.push_back({DepthSource::Kind::partial_block, n, (n - 1) * S + 1, sublayer - 1});
    } else if (zero_placeholder) {
      sources.push_back({DepthSource::Kind::zero_placeholder, n, 0, -1});
    }
    layout.reads.push_back(std::move(sources));
  }
  // The final read sees b_0 .. b_N; an incomplete last block contributes its partial sum.
  std::vector<DepthSource> final_sources{embedding};
  for (int n = 1; n <= layout.blocks; ++n) final_sources.push_back(completed_block(n));
  layout.reads.push_back(std::move(final_sources));
  return layout;
}

}  // namespace attnres
