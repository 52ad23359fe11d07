// Statistics of paired differences between training runs (docs/training.md#statistics): the
// same seeds give the same initial weights and batches to every scheme, so a scheme is compared
// with another by the per-seed differences of their final validation losses.
//
//   d_i = loss_A(seed i) - loss_B(seed i),  i = 1..n
//   mean = (1/n) sum d_i,  s = sqrt(sum (d_i - mean)^2 / (n - 1))
//   95 % interval: mean -/+ t_{0.975, n-1} * s / sqrt(n)            (Student t, paired)
//   resolved: the interval excludes 0 (the sign of the gap is supported at 95 %)
//   seeds to resolve a gap g at spread s: the smallest n >= 2 with
//     n >= ((t_{0.975, n-1} + t_{0.80, n-1}) * s / g)^2              (80 % power, two-sided 5 %)
//
// Worked example: d = {-0.10, -0.14, -0.12}: mean -0.12, s = 0.02, t_{0.975, 2} = 4.3027,
// half width 4.3027 * 0.02 / sqrt(3) = 0.0497, interval [-0.1697, -0.0703]: resolved.
#pragma once

#include <vector>

namespace attnres {

// The Student t distribution's CDF with `dof` > 0 degrees of freedom (Boost.Math;
// docs/training.md#statistics).
double student_t_cdf(double t, double dof);

// Its quantile: the t with student_t_cdf(t, dof) = p, 0 < p < 1 (Boost.Math).
double student_t_quantile(double p, double dof);

struct PairedInterval {
  int pairs = 0;            // n
  double mean = 0.0;        // mean of the differences
  double spread = 0.0;      // s: sample standard deviation of the differences (n - 1)
  double half_width = 0.0;  // t_{(1+c)/2, n-1} s / sqrt(n); NaN with fewer than 2 pairs
  double low = 0.0, high = 0.0;
  double confidence = 0.95;
  bool resolved = false;     // the interval excludes 0
  int seeds_to_resolve = 0;  // seeds_to_resolve(mean, spread); 0 when it cannot be said
};

// The paired interval of `differences` at `confidence` (default 95 %).
PairedInterval paired_interval(const std::vector<double>& differences, double confidence = 0.95);

// About how many paired seeds resolve a true gap `gap` at spread `spread` (80 % power, two-sided
// 95 %, the t-based iteration above); 0 when gap is 0 or not finite, or spread not finite; 2
// when spread is 0. Capped at `max_seeds` (returned as max_seeds when even that is too few).
int seeds_to_resolve(double gap, double spread, int max_seeds = 100000);

}  // namespace attnres
