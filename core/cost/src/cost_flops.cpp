// Arithmetic of the cost engine: the (read, source) pairs of the depth reads (the closed forms of
// docs/math.md §2.2–2.3, with and without a window), depth-attention and model FLOPs per token,
// and the paper's scaling-law fits (docs/math.md §3.5).
#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/checked_math.hpp"
#include "attnres/cost.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

// ---------------------------------------------------------------- arithmetic

std::int64_t depth_read_source_pairs(ResidualMode mode, std::int64_t sublayers,
                                     std::int64_t block_size) {
  const std::int64_t L = sublayers;
  const std::string what = "depth-attention source count";
  switch (mode) {
    case ResidualMode::standard:
    case ResidualMode::mhc:
      return 0;  // no reads over stored sources
    case ResidualMode::full:
    case ResidualMode::denseformer:
    case ResidualMode::rescaled:
      // Read r sees r + 1 sources, r = 0..L.
      return checked_multiply(L + 1, L + 2, what) / 2;
    case ResidualMode::block: {
      // The i-th sublayer of block n sees n sources, plus the partial sum when i >= 2; the final
      // read sees N + 1.
      const std::int64_t S = block_size, N = block_count(L, S), last_size = L - (N - 1) * S;
      const std::int64_t full_blocks =
          checked_multiply(S, checked_multiply(N - 1, N, what) / 2, what);
      return checked_add(checked_add(full_blocks, checked_multiply(N, last_size, what), what),
                         (L - N) + (N + 1), what);
    }
  }
  return 0;
}

std::int64_t depth_read_source_pairs_window(std::int64_t sublayers, std::int64_t window) {
  const std::int64_t L = sublayers, W = window;
  if (W <= 0 || W >= L) return depth_read_source_pairs(ResidualMode::full, L, 1);
  // Read r sees the embedding and min(r, W) outputs: sum over r = 0..L of (1 + min(r, W)).
  const std::string what = "windowed depth-attention source count";
  return checked_add(checked_add(L + 1, checked_multiply(W, W + 1, what) / 2, what),
                     checked_multiply(L - W, W, what), what);
}

double depth_attention_flops(ResidualMode mode, std::int64_t sublayers, std::int64_t block_size,
                             std::int64_t d) {
  if (mode == ResidualMode::standard) return 0.0;
  const double D = static_cast<double>(d);
  return static_cast<double>(depth_read_source_pairs(mode, sublayers, block_size)) * 6.0 * D +
         static_cast<double>(sublayers + 1) * 2.0 * D;
}

// ---------------------------------------------------------------- docs/math.md §3.5

double ScalingFit::loss_at(double compute) const {
  return A * std::pow(compute, -a);
}
double ScalingFit::compute_for(double loss) const {
  return std::pow(A / loss, 1.0 / a);
}

const std::array<ScalingFit, 3>& paper_scaling_fits() {
  static const std::array<ScalingFit, 3> fits = {ScalingFit{"baseline", 1.891, 0.057},
                                                 ScalingFit{"block", 1.870, 0.058},
                                                 ScalingFit{"full", 1.865, 0.057}};
  return fits;
}

ScalingAtLoss scaling_at_loss(double target_loss) {
  if (!(target_loss > 0.0) || !std::isfinite(target_loss)) {
    throw Error("target loss must be a positive number, got " + std::to_string(target_loss));
  }
  const auto& fits = paper_scaling_fits();
  ScalingAtLoss out;
  out.target_loss = target_loss;
  out.compute_baseline = fits[0].compute_for(target_loss);
  out.compute_block = fits[1].compute_for(target_loss);
  out.compute_full = fits[2].compute_for(target_loss);
  out.multiplier_block = out.compute_baseline / out.compute_block;
  out.multiplier_full = out.compute_baseline / out.compute_full;
  // C = (A / loss)^(1/a) with a near 0.057 leaves the doubles (overflows to inf or underflows to
  // 0, and the multipliers become NaN) for a loss far from the fits' range: refused, with the
  // losses whose every answer is a finite positive number.
  const bool finite = std::isnormal(out.compute_baseline) && std::isnormal(out.compute_block) &&
                      std::isnormal(out.compute_full) && std::isnormal(out.multiplier_block) &&
                      std::isnormal(out.multiplier_full);
  if (!finite) {
    double low = 0, high = std::numeric_limits<double>::infinity();
    for (const ScalingFit& fit : fits) {
      // compute_for(loss) <= DBL_MAX  <=>  loss >= A · DBL_MAX^(-a); >= DBL_MIN likewise.
      low = std::max(low, fit.A * std::pow(std::numeric_limits<double>::max(), -fit.a));
      high = std::min(high, fit.A * std::pow(std::numeric_limits<double>::min(), -fit.a));
    }
    throw Error("target loss " + format_number(target_loss) +
                " has no finite compute under the paper's fits: expected a loss between " +
                format_number(low * 1.01) + " and " + format_number(high * 0.99));
  }
  return out;
}

}  // namespace attnres
