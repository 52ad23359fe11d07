// What the Training view draws (docs/training.md): the three charts built from the log rows the
// GUI thread has taken so far (training_charts, no widget needed), restyled one colour per scheme,
// the depth-attention map of the chosen scheme, and the status line.
#include <QComboBox>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "attnres/format.hpp"
#include "training_run.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// One colour per scheme (standard, Full, Block, another scheme), the same in every chart.
QColor scheme_colour(std::size_t index) {
  static const QColor colours[] = {QColor(90, 90, 90), QColor(221, 132, 82), QColor(76, 114, 176),
                                   QColor(85, 168, 104)};
  return colours[std::min<std::size_t>(index, std::size(colours) - 1)];
}

// At most ~`limit` points of a long curve (rows from `first` on): every k-th row, and always the
// last.
template <typename Take>
std::vector<std::pair<double, double>> thinned(const std::vector<TrainLogRow>& rows,
                                               std::size_t first, std::size_t limit, Take take) {
  std::vector<std::pair<double, double>> points;
  const std::size_t count = rows.size() > first ? rows.size() - first : 0;
  const std::size_t stride = std::max<std::size_t>(1, count / limit);
  for (std::size_t i = first; i < rows.size(); ++i) {
    if ((i - first) % stride != 0 && i + 1 != rows.size()) continue;
    const double y = take(rows[i]);
    if (std::isfinite(y)) points.emplace_back(static_cast<double>(rows[i].step), y);
  }
  return points;
}

double latest_validation(const std::vector<TrainLogRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (std::isfinite(it->val_loss)) return it->val_loss;
  }
  return NAN;
}

// One colour per scheme (`colours`: each scheme's index into scheme_colour); the validation dots
// share their scheme's colour and its legend entry.
void restyle(ChartPanel* panel, std::size_t per_scheme, const std::vector<std::size_t>& colours) {
  const auto series = panel->chart()->series();
  for (qsizetype k = 0; k < series.size(); ++k) {
    const auto scheme = static_cast<std::size_t>(k) / per_scheme;
    if (scheme >= colours.size()) break;
    const QColor colour = scheme_colour(colours[scheme]);
    if (auto* scatter = qobject_cast<QScatterSeries*>(series[k])) {
      // Distinct shapes, so that curves lying on top of each other stay apart.
      static const QScatterSeries::MarkerShape shapes[] = {QScatterSeries::MarkerShapeCircle,
                                                           QScatterSeries::MarkerShapeRectangle,
                                                           QScatterSeries::MarkerShapeTriangle};
      scatter->setMarkerShape(
          shapes[std::min<std::size_t>(colours[scheme], std::size(shapes) - 1)]);
      scatter->setMarkerSize(8.0);
      scatter->setColor(colour);
      scatter->setBorderColor(colour.darker(130));
      for (QLegendMarker* marker : panel->chart()->legend()->markers(scatter))
        marker->setVisible(false);
    } else if (auto* line = qobject_cast<QLineSeries*>(series[k])) {
      QColor see_through = colour;
      if (per_scheme == 2) see_through.setAlpha(170);  // overlapping training curves stay visible
      QPen pen(see_through);
      pen.setWidthF(per_scheme == 2 ? 1.2 : 2.0);
      line->setPen(pen);
      line->setColor(see_through);
    }
  }
}

}  // namespace

std::array<ChartSpec, 3> training_charts(
    const std::vector<std::string>& names,
    const std::vector<std::vector<TrainLogRow>>& rows_by_scheme) {
  ChartSpec loss;
  loss.id = "training_loss";
  loss.title = "Loss: training (lines) and validation (markers)";
  loss.x_label = "step";
  loss.y_label = "loss (nats/token)";
  ChartSpec rms, grad;
  rms.id = "training_output_rms";
  grad.id = "training_output_grad_rms";
  std::int64_t latest = 0;
  for (const auto& rows : rows_by_scheme) {
    if (!rows.empty()) latest = std::max(latest, rows.back().step);
  }
  const std::string at = latest > 0 ? " (step " + std::to_string(latest) + ")" : "";
  rms.title = "Output RMS by sublayer" + at;
  grad.title = "Output-gradient RMS by sublayer" + at;
  rms.x_label = grad.x_label = "sublayer l";
  rms.y_label = "RMS of output v_l";
  grad.y_label = "RMS of dloss/dv_l";
  for (std::size_t i = 0; i < names.size() && i < rows_by_scheme.size(); ++i) {
    const auto& rows = rows_by_scheme[i];
    ChartSeries train{names[i], {}, ChartSeries::Style::line, false};
    // Row 0 (step 0) has no training loss.
    train.points = thinned(rows, 1, 1500, [](const TrainLogRow& r) { return r.train_loss; });
    ChartSeries val{names[i] + " validation", {}, ChartSeries::Style::scatter, false};
    for (const auto& row : rows) {
      if (std::isfinite(row.val_loss))
        val.points.emplace_back(static_cast<double>(row.step), row.val_loss);
    }
    loss.series.push_back(std::move(train));
    loss.series.push_back(std::move(val));
    ChartSeries out{names[i], {}, ChartSeries::Style::line_and_points, false}, out_grad = out;
    if (!rows.empty() && rows.back().step > 0) {
      const auto& row = rows.back();
      for (std::size_t l = 0; l < row.output_rms.size(); ++l)
        out.points.emplace_back(double(l + 1), row.output_rms[l]);
      for (std::size_t l = 0; l < row.output_grad_rms.size(); ++l) {
        out_grad.points.emplace_back(double(l + 1), row.output_grad_rms[l]);
      }
    }
    rms.series.push_back(std::move(out));
    grad.series.push_back(std::move(out_grad));
  }
  return {loss, rms, grad};
}

void TrainingView::redraw() {
  const std::vector<Scheme> schemes = run_ ? run_->settings.schemes : std::vector<Scheme>{};
  std::vector<std::string> names;
  std::vector<std::size_t> colours;
  for (const Scheme& scheme : schemes) {
    names.push_back(scheme.name);
    colours.push_back(scheme.colour);
  }
  const auto [loss, rms, grad] = training_charts(names, rows_);
  loss_->set_spec(loss);
  rms_->set_spec(rms);
  grad_rms_->set_spec(grad);
  restyle(loss_, 2, colours);
  if (run_) {
    // The whole run on the step axis: the curves grow across it as the run goes.
    for (QAbstractAxis* axis : loss_->chart()->axes(Qt::Horizontal)) {
      if (auto* value = qobject_cast<QValueAxis*>(axis)) {
        value->setRange(0.0, static_cast<double>(run_->settings.options.steps));
        value->applyNiceNumbers();
      }
    }
  }
  restyle(rms_, 1, colours);
  restyle(grad_rms_, 1, colours);
  update_status();
}

void TrainingView::redraw_alpha() {
  const std::string chosen = alpha_scheme_->currentText().toStdString();
  std::optional<AlphaMap> map;
  int frames = 0;
  if (run_) {
    std::lock_guard lock(run_->mutex);
    for (std::size_t i = 0; i < run_->settings.schemes.size(); ++i) {
      if (run_->settings.schemes[i].name != chosen) continue;
      const auto& history =
          i < run_->alpha_history.size() ? run_->alpha_history[i] : std::vector<AlphaMap>{};
      frames = static_cast<int>(history.size());
      // The chosen evaluation, or the newest while the picker follows the run.
      const int frame = alpha_live_ ? frames - 1 : std::min(alpha_frame_->value(), frames - 1);
      if (frame >= 0) map = history[static_cast<std::size_t>(frame)];
      if (!map) map = run_->alpha[i];
    }
  }
  {
    const QSignalBlocker blocker(alpha_frame_);
    set_spin_range(alpha_frame_, 0, std::max(0, frames - 1));
    if (alpha_live_) alpha_frame_->setValue(std::max(0, frames - 1));
  }
  if (!map) {
    alpha_->set_data(chosen.empty() ? "α: train a Full or Block AttnRes scheme" : "α of " + chosen,
                     {}, {}, {});
    return;
  }
  std::string title = "α of ";
  title += chosen;
  title += ", step ";
  title += std::to_string(map->step);
  if (frames > 0) {
    title += " (evaluation ";
    title += std::to_string(std::min(alpha_frame_->value(), frames - 1) + 1);
    title += " of ";
    title += std::to_string(frames);
    title += "; mean over a validation window)";
  } else {
    title += " (mean over a validation window)";
  }
  alpha_->set_data(title, map->values, map->rows, map->columns, 0.0, 1.0);
}

void TrainingView::update_status() {
  if (!run_) return;
  const auto& schemes = run_->settings.schemes;
  const char* what = state_ == State::running    ? "running"
                     : state_ == State::finished ? "finished"
                     : state_ == State::stopped  ? "stopped"
                     : state_ == State::failed   ? "failed"
                                                 : "";
  std::string text = what;
  if (state_ == State::running && rows_.empty()) text += " (reading the data)";
  if (run_->settings.seeds > 1) {
    text += ", seed " + std::to_string(run_->settings.seed + static_cast<std::uint64_t>(round_)) +
            " (" + std::to_string(round_ + 1) + " of " + std::to_string(run_->settings.seeds) + ")";
  }
  double tokens_per_second = 0.0;
  {
    std::lock_guard lock(run_->mutex);
    tokens_per_second = run_->tokens_per_second;
  }
  text += ", " + format_number(std::round(tokens_per_second)) + " tokens/s";
  for (std::size_t i = 0; i < schemes.size() && i < rows_.size(); ++i) {
    const auto& rows = rows_[i];
    const std::int64_t step = rows.empty() ? 0 : rows.back().step;
    text += "\n" + schemes[i].name + ": step " + std::to_string(step) + " / " +
            std::to_string(run_->settings.options.steps);
    const double val = latest_validation(rows);
    if (std::isfinite(val))
      text += ", validation loss " + format_number(std::round(val * 1000.0) / 1000.0);
    if (!rows.empty() && rows.back().step > 0) {
      text +=
          ", training loss " + format_number(std::round(rows.back().train_loss * 1000.0) / 1000.0);
    }
  }
  if (!saved_.empty()) text += "\n" + saved_;
  status_->setText(QString::fromStdString(text));
  update_paired();
}

std::vector<PairedComparison> TrainingView::paired() const {
  if (!run_) return {};
  const Settings& setup = run_->settings;
  const int L = setup.config.sublayers();
  std::vector<SchemeLosses> losses;
  for (std::size_t i = 0; i < setup.schemes.size() && i < finals_.size(); ++i) {
    const Scheme& scheme = setup.schemes[i];
    const int S = scheme.mode == ResidualMode::block  ? scheme.block_size
                  : scheme.mode == ResidualMode::full ? 1
                                                      : 0;
    // Standard, Full and Block as the boxes train them are the paper's; another scheme is
    // compared along N only when it is too (docs/schemes.md).
    const bool paper = !scheme.scheme || scheme.scheme->paper_defaults();
    losses.push_back({scheme.name, scheme.mode, S > 0 ? (L + S - 1) / S : 0, paper, finals_[i]});
  }
  return paired_comparisons(losses);
}

void TrainingView::update_paired() {
  if (!run_ || run_->settings.seeds < 2) {
    paired_->setText(
        "Seeds: with two or more, the schemes are compared paired by seed, with 95 % intervals "
        "and what they resolve (docs/training.md#statistics).");
    return;
  }
  const auto comparisons = paired();
  std::size_t done = 0;
  for (const auto& finals : finals_) done = std::max(done, finals.size());
  // Appended piece by piece (GCC 12 reports a false -Wstringop-overflow on the chained +).
  std::string text = "Paired by seed, 95 % (Student t; docs/training.md#statistics), over ";
  text += std::to_string(done);
  text += done == 1 ? " finished seed:" : " finished seeds:";
  if (comparisons.empty()) {
    text += " train two or more schemes to compare them.";
  } else if (done < 2) {
    text += " waiting for a second seed to finish.";
  } else {
    for (const auto& c : comparisons) {
      text += '\n';
      text += paired_sentence(c);
    }
  }
  paired_->setText(QString::fromStdString(text));
}

std::vector<ChartSpec> TrainingView::charts() const {
  return {loss_->spec(), rms_->spec(), grad_rms_->spec()};
}

std::vector<HeatmapWidget*> TrainingView::heatmaps() {
  return {alpha_};
}

}  // namespace attnres::gui
