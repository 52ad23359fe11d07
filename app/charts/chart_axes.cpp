// Axes of xy charts: the axis scales (linear, or log10 of the data on a log axis), the ticks of
// log axes (at least three labelled ones whenever the range allows; Qt's QLogValueAxis labels
// only powers of the base), the axes build_chart makes, and the overlay's step that fits them to
// the plot once it is laid out (tick counts, wrapped axis titles, the room the x axis takes).
#include <QFontMetricsF>
#include <QtCharts/QCategoryAxis>
#include <QtCharts/QChart>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>

#include "chart_render_internal.hpp"

namespace attnres::charts::detail {

bool usable(double v, bool logarithmic) {
  return std::isfinite(v) && (!logarithmic || v > 0);
}
double to_axis(double v, bool logarithmic) {
  return logarithmic ? std::log10(v) : v;
}
double from_axis(double v, bool logarithmic) {
  return logarithmic ? std::pow(10.0, v) : v;
}

double nice_step(double span, int target_ticks) {
  if (!(span > 0)) return 1.0;
  const double raw = span / std::max(1, target_ticks);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude * (1 + 1e-9)) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

namespace {

// Every k-th element so that at most `most` remain (always the first).
std::vector<double> thinned(const std::vector<double>& ticks, std::size_t most) {
  if (ticks.size() <= most) return ticks;
  const std::size_t every = (ticks.size() + most - 1) / most;
  std::vector<double> out;
  for (std::size_t i = 0; i < ticks.size(); i += every) out.push_back(ticks[i]);
  return out;
}

bool power_of_two(double v) {
  if (!(v > 0)) return false;
  const double exponent = std::round(std::log2(v));
  return std::abs(v - std::exp2(exponent)) <= 1e-9 * v;
}

// Ticks for a logarithmic axis over [low, high] (both > 0), at most `most` of them: powers of two
// when every data value is one (block counts, ranks); else the finest "nice" set that gives at
// least three and at most `most` ticks among decades, 1-3, 1-2-5 and 1..9 per decade, and, for a
// range narrower than about a factor of two, evenly spaced nice values (placed logarithmically).
// When the axis is too short for three of any set: the decades, or the coarsest set thinned.
// Ticks `keep` rejects (a label that would stick out of the chart) are left out before choosing.
std::vector<double> log_ticks(double low, double high, const std::vector<double>& data,
                              std::size_t most, const std::function<bool(double)>& keep = {}) {
  most = std::max<std::size_t>(most, 2);
  auto within = [&](double v) {
    return v >= low * (1 - 1e-9) && v <= high * (1 + 1e-9) && (!keep || keep(v));
  };
  const int first_decade = static_cast<int>(std::floor(std::log10(low))) - 1;
  const int last_decade = static_cast<int>(std::ceil(std::log10(high))) + 1;
  auto per_decade = [&](std::initializer_list<double> mantissas) {
    std::vector<double> out;
    for (int k = first_decade; k <= last_decade; ++k) {
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, k);
        if (within(v)) out.push_back(v);
      }
    }
    return out;
  };
  if (data.size() >= 2 && std::all_of(data.begin(), data.end(), power_of_two)) {
    std::vector<double> out;
    for (int k = static_cast<int>(std::floor(std::log2(low)));
         k <= static_cast<int>(std::ceil(std::log2(high))); ++k) {
      if (within(std::exp2(k))) out.push_back(std::exp2(k));
    }
    if (out.size() >= 3) return thinned(out, most);
  }
  std::vector<double> linear;
  for (int target = 4; target <= 12 && linear.size() < 3; ++target) {
    linear.clear();
    const double step = nice_step(high - low, target);
    for (double v = std::ceil(low / step) * step; v <= high * (1 + 1e-12); v += step) {
      if (!keep || keep(v)) linear.push_back(v);
    }
  }
  const std::vector<std::vector<double>> sets = {
      per_decade({1.0}), per_decade({1.0, 3.0}), per_decade({1.0, 2.0, 5.0}),
      per_decade({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0})};
  for (auto set = sets.rbegin(); set != sets.rend(); ++set) {
    if (set->size() >= 3 && set->size() <= most) return *set;
  }
  if (sets.front().size() >= 2) return thinned(sets.front(), most);
  for (const auto& set : sets) {
    if (set.size() >= 3) return thinned(set, most);
  }
  return thinned(linear, most);
}

}  // namespace

QString tick_label(double v) {
  return QString::number(v, 'g', 6);
}

QString plain_number(double v) {
  // Four significant digits without an exponent between 0.001 and 10^7 ("35840", "1.746",
  // "0.04123"), else 'g' notation.
  const double a = std::abs(v);
  if (v == 0 || !std::isfinite(v)) return QString::number(v);
  if (a < 1e-3 || a >= 1e7) return QString::number(v, 'g', 4);
  QString text =
      QString::number(v, 'f', std::clamp(3 - static_cast<int>(std::floor(std::log10(a))), 0, 6));
  if (text.contains('.')) {
    while (text.endsWith('0')) text.chop(1);
    if (text.endsWith('.')) text.chop(1);
  }
  return text;
}

void set_log_ticks(QCategoryAxis* axis, const std::vector<double>& data, std::size_t most,
                   const std::function<bool(double, const QString&)>& keep) {
  QStringList labels;
  std::vector<double> at;
  std::function<bool(double)> keep_tick;
  if (keep) keep_tick = [&keep](double tick) { return keep(tick, tick_label(tick)); };
  for (double tick :
       log_ticks(std::pow(10.0, axis->min()), std::pow(10.0, axis->max()), data, most, keep_tick)) {
    const QString label = tick_label(tick);
    if (labels.contains(label)) continue;
    labels.push_back(label);
    at.push_back(std::log10(tick));
  }
  if (labels == axis->categoriesLabels()) return;
  for (const QString& old : axis->categoriesLabels()) axis->remove(old);
  for (qsizetype i = 0; i < labels.size(); ++i)
    axis->append(labels[i], at[static_cast<std::size_t>(i)]);
}

QAbstractAxis* make_axis(const std::string& title, bool logarithmic, Range range,
                         const std::vector<double>& data) {
  if (range.empty()) range = logarithmic ? Range{1.0, 10.0} : Range{0.0, 1.0};
  if (logarithmic) {
    // A value axis over log10 of the data with labels at chosen ticks: logarithmic placement,
    // readable labels whatever the range (QLogValueAxis labels only powers of its base).
    double low = std::log10(range.low), high = std::log10(range.high);
    const double pad = high > low ? std::max(0.04 * (high - low), 0.01) : 0.1;
    low -= pad;
    high += pad;
    auto* axis = new QCategoryAxis;
    axis->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
    axis->setStartValue(low - 1.0);
    axis->setRange(low, high);
    set_log_ticks(axis, data, 8);  // fitted to the plot's size once it is laid out
    axis->setTitleText(rich(QString::fromStdString(title)));
    return axis;
  }
  auto* axis = new QValueAxis;
  axis->setLabelFormat("%g");
  double span = range.high - range.low;
  if (span <= 0) span = std::max(1.0, std::abs(range.high));
  // Non-negative data keeps zero as the floor instead of padding below it.
  const double low =
      range.low >= 0 ? std::max(0.0, range.low - 0.05 * span) : range.low - 0.05 * span;
  axis->setRange(low, range.high + 0.05 * span);
  axis->applyNiceNumbers();
  if (axis->min() < 0 && axis->max() > 0 && axis->tickCount() > 1) {
    // Across zero, min + k * step lands a rounding error away from 0 and "%g" prints it
    // (2.77556e-17): print as many decimals as the nice step has (thinning the ticks later takes
    // every k-th, which needs no more).
    const double step = (axis->max() - axis->min()) / (axis->tickCount() - 1);
    int decimals = 0;
    while (decimals < 6 && std::abs(step * std::pow(10.0, decimals) -
                                    std::round(step * std::pow(10.0, decimals))) > 1e-6)
      ++decimals;
    axis->setLabelFormat(QString("%.%1f").arg(decimals));
  }
  axis->setTitleText(rich(QString::fromStdString(title)));
  return axis;
}

QString Overlay::x_title_text(double plot_width) const {
  if (!x_axis || x_title.isEmpty()) return QString();
  return wrapped_rich(x_title, x_axis->titleFont(), 0.85 * plot_width, 2);
}

bool Overlay::x_title_fits(double plot_width) const {
  if (!x_axis || x_title.isEmpty() || plot_width <= 0) return true;
  for (const QString& word : x_title.split(' ', Qt::SkipEmptyParts)) {
    if (qt_text_size(x_axis->titleFont(), rich(word)).width() - 1 > plot_width) return false;
  }
  return true;
}

double Overlay::x_axis_height(const QString& title_text, bool with_title) const {
  if (!x_axis) return 0;
  // Qt Charts: the tick labels' height, a 4 px label padding, 1 px, and the title with a 2 px
  // padding above and below it. One pixel more for rounding.
  double height =
      qt_text_size(x_axis->labelsFont(), QStringLiteral("0123456789")).height() + 4 + 1 + 1;
  if (with_title && !title_text.isEmpty())
    height += qt_text_size(x_axis->titleFont(), title_text).height() + 2 * 2;
  return height;
}

void Overlay::fit_axes() {
  // To the plot's size from the last layout (a change of the plot area calls this again): axis
  // titles wrap onto two lines when longer than the plot's side, log axes get as many labelled
  // ticks as fit, short linear y axes fewer ticks. Wrapping or relabelling the x axis changes
  // only the plot's height and the y axes only its width, so this settles.
  const QRectF plot = chart_->plotArea();
  if (plot.width() <= 0 || plot.height() <= 0) return;
  for (const LogAxis& log : log_axes) {
    const QFontMetricsF metrics(log.axis->labelsFont());
    const bool vertical = log.orientation == Qt::Vertical;
    const double room =
        vertical ? plot.height() / (1.9 * metrics.height())
                 : plot.width() / (metrics.horizontalAdvance("00000") + metrics.height());
    const double low = log.axis->min(), high = log.axis->max();
    const double width = chart_->size().width();
    // An x label centred on a tick near the plot's ends must not stick out of the chart.
    auto inside = [&](double tick, const QString& label) {
      if (vertical || high <= low) return true;
      const double x = plot.left() + (std::log10(tick) - low) / (high - low) * plot.width();
      const double half = metrics.horizontalAdvance(label) / 2;
      return x - half >= 1 && x + half <= width - 1;
    };
    set_log_ticks(log.axis, log.data,
                  static_cast<std::size_t>(std::clamp(room, 2.0, vertical ? 8.0 : 10.0)), inside);
  }
  for (const auto& [axis, nice_ticks] : linear_y_axes) {
    // Keep the nice grid of applyNiceNumbers: every k-th of its ticks, as many as fit.
    const double room = plot.height() / (1.9 * QFontMetricsF(axis->labelsFont()).height());
    int ticks = nice_ticks;
    for (int count = nice_ticks; count >= 2; --count) {
      if ((nice_ticks - 1) % std::max(1, count - 1) == 0 && count <= std::max(2.0, room)) {
        ticks = count;
        break;
      }
    }
    if (axis->tickCount() != ticks) axis->setTickCount(ticks);
  }
  if (x_axis && !x_title.isEmpty()) {
    const QString text = x_title_text(plot.width());
    if (x_axis->titleText() != text) x_axis->setTitleText(text);
  }
  if (y_axis && !y_title.isEmpty()) {
    // Qt truncates a vertical title well before the plot's full height.
    const QString text = wrapped_rich(y_title, y_axis->titleFont(), 0.72 * plot.height(), 2);
    if (y_axis->titleText() != text) y_axis->setTitleText(text);
  }
}

}  // namespace attnres::charts::detail

namespace attnres::charts {

using namespace detail;

QStringList axis_tick_labels(const QChart* chart, Qt::Orientation orientation) {
  QStringList out;
  const Overlay* overlay = overlay_of(chart);
  QAbstractAxis* axis =
      overlay ? (orientation == Qt::Horizontal ? overlay->x_axis : overlay->y_axis) : nullptr;
  if (auto* category = qobject_cast<QCategoryAxis*>(axis)) {
    for (const QString& label : category->categoriesLabels()) {
      const double at = category->endValue(label);
      if (at >= category->min() - 1e-12 && at <= category->max() + 1e-12) out.push_back(label);
    }
  } else if (auto* value = qobject_cast<QValueAxis*>(axis)) {
    const int count = std::max(2, value->tickCount());
    for (int i = 0; i < count; ++i)
      out.push_back(tick_label(value->min() + (value->max() - value->min()) * i / (count - 1)));
  }
  return out;
}

}  // namespace attnres::charts
