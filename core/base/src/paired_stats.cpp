#include "attnres/paired_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/assert.hpp"

namespace attnres {

namespace {

// Continued fraction of the incomplete beta function (modified Lentz), valid for
// x < (a + 1) / (a + b + 2); Numerical Recipes' betacf written out.
double beta_continued_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0, d = 1.0 - qab * x / qap;
  if (std::abs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::abs(d) < tiny) d = tiny;
    c = 1.0 + aa / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1.0) < 1e-15) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function.
double regularised_incomplete_beta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

}  // namespace

double student_t_cdf(double t, double dof) {
  ATTNRES_ASSERT(dof > 0.0, "Student t needs dof > 0");
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  // P(|T| > |t|) = I_{dof / (dof + t^2)}(dof / 2, 1 / 2).
  const double tail = 0.5 * regularised_incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t));
  return t >= 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double dof) {
  ATTNRES_ASSERT(p > 0.0 && p < 1.0, "a quantile needs 0 < p < 1");
  if (p < 0.5) return -student_t_quantile(1.0 - p, dof);
  if (p == 0.5) return 0.0;
  double low = 0.0, high = 1.0;
  while (student_t_cdf(high, dof) < p) high *= 2.0;
  for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
    const double mid = 0.5 * (low + high);
    (student_t_cdf(mid, dof) < p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

int seeds_to_resolve(double gap, double spread, int max_seeds) {
  if (!std::isfinite(gap) || gap == 0.0 || !std::isfinite(spread)) return 0;
  if (spread == 0.0) return 2;
  const double ratio = spread / std::abs(gap);
  for (int n = 2; n < max_seeds; ++n) {
    const double dof = n - 1.0;
    const double t = student_t_quantile(0.975, dof) + student_t_quantile(0.80, dof);
    if (static_cast<double>(n) >= t * t * ratio * ratio) return n;
    // Far from the answer: jump to the normal approximation's n instead of stepping by one.
    const double normal = (1.959964 + 0.841621) * (1.959964 + 0.841621) * ratio * ratio;
    if (normal > 2.0 * n + 10.0) n = static_cast<int>(std::min<double>(normal, max_seeds)) - 1;
  }
  return max_seeds;
}

PairedInterval paired_interval(const std::vector<double>& differences, double confidence) {
  ATTNRES_ASSERT(confidence > 0.0 && confidence < 1.0, "a confidence level lies in (0, 1)");
  PairedInterval interval;
  interval.confidence = confidence;
  interval.pairs = static_cast<int>(differences.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (differences.empty()) {
    interval.mean = interval.spread = interval.half_width = interval.low = interval.high = nan;
    return interval;
  }
  const double n = static_cast<double>(differences.size());
  double sum = 0.0;
  for (double d : differences) sum += d;
  interval.mean = sum / n;
  if (differences.size() < 2) {
    interval.spread = interval.half_width = interval.low = interval.high = nan;
    return interval;
  }
  double squares = 0.0;
  for (double d : differences) squares += (d - interval.mean) * (d - interval.mean);
  interval.spread = std::sqrt(squares / (n - 1.0));
  interval.half_width =
      student_t_quantile(0.5 + confidence / 2.0, n - 1.0) * interval.spread / std::sqrt(n);
  interval.low = interval.mean - interval.half_width;
  interval.high = interval.mean + interval.half_width;
  interval.resolved = interval.low > 0.0 || interval.high < 0.0;
  interval.seeds_to_resolve = seeds_to_resolve(interval.mean, interval.spread);
  return interval;
}

}  // namespace attnres
