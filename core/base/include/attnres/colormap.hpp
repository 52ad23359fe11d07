// Perceptual colormap (viridis) for heatmaps, Qt-free so that tests and the CLI can use it.
//
//   Rgb colour = viridis(0.5);     // value in [0, 1], clamped
#pragma once

#include <cstdint>

namespace attnres {

struct Rgb {
  std::uint8_t r, g, b;
  bool operator==(const Rgb&) const = default;
};

// Viridis (van der Walt & Smith, matplotlib), interpolated linearly between 17 anchor colours
// sampled from the published table at 1/16 steps. NaN maps to grey.
Rgb viridis(double t);

}  // namespace attnres
