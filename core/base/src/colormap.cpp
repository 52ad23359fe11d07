#include "attnres/colormap.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace attnres {

Rgb viridis(double t) {
  // matplotlib's viridis at t = 0, 1/16, ..., 1.
  static constexpr std::array<std::array<double, 3>, 17> anchors = {{{68, 1, 84},
                                                                     {72, 26, 108},
                                                                     {71, 47, 125},
                                                                     {65, 68, 135},
                                                                     {57, 86, 140},
                                                                     {49, 104, 142},
                                                                     {42, 120, 142},
                                                                     {35, 136, 142},
                                                                     {31, 152, 139},
                                                                     {34, 168, 132},
                                                                     {53, 183, 121},
                                                                     {84, 197, 104},
                                                                     {122, 209, 81},
                                                                     {165, 219, 54},
                                                                     {210, 226, 27},
                                                                     {253, 231, 37},
                                                                     {253, 231, 37}}};
  if (std::isnan(t)) return {128, 128, 128};
  const double x = std::clamp(t, 0.0, 1.0) * 15.0;  // the last anchor repeats the 15th
  const auto i = static_cast<std::size_t>(std::min(14.0, std::floor(x)));
  const double f = x - static_cast<double>(i);
  auto mix = [&](std::size_t c) {
    return static_cast<std::uint8_t>(std::lround(anchors[i][c] * (1 - f) + anchors[i + 1][c] * f));
  };
  return {mix(0), mix(1), mix(2)};
}

}  // namespace attnres
