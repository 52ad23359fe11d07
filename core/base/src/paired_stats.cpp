#include "attnres/paired_stats.hpp"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>

#include "attnres/assert.hpp"

namespace attnres {

// Student t from Boost.Math (header-only, in Debian's libboost1.74-dev, which
// libboost-program-options-dev already installs): a well-kept implementation of the incomplete
// beta function and its inverse, rather than our own continued fraction.
double student_t_cdf(double t, double dof) {
  ATTNRES_ASSERT(dof > 0.0, "Student t needs dof > 0");
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  return boost::math::cdf(boost::math::students_t_distribution<double>(dof), t);
}

double student_t_quantile(double p, double dof) {
  ATTNRES_ASSERT(p > 0.0 && p < 1.0, "a quantile needs 0 < p < 1");
  ATTNRES_ASSERT(dof > 0.0, "Student t needs dof > 0");
  return boost::math::quantile(boost::math::students_t_distribution<double>(dof), p);
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
