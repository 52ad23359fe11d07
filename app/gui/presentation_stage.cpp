// The presentation stage (presentation_stage.hpp).
#include "presentation_stage.hpp"

#include <QEvent>
#include <QLabel>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "chart_render.hpp"
#include "widgets.hpp"

namespace attnres::gui {

PresentationStage::PresentationStage(QWidget* parent) : QWidget(parent) {
  setObjectName("presentation_stage");
  setAutoFillBackground(true);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  chart_ = new ChartPanel;
  chart_->setObjectName("stage_chart");
  heatmap_ = new HeatmapWidget;
  heatmap_->setObjectName("stage_heatmap");
  layout->addWidget(chart_, 1);
  layout->addWidget(heatmap_, 1);
  callout_ = new QLabel(this);
  callout_->setObjectName("stage_callout");
  callout_->setWordWrap(true);
  callout_->setTextFormat(Qt::PlainText);
  callout_->setStyleSheet(
      "QLabel { background: rgba(255, 244, 214, 235); color: #4a3200; padding: 6px; border: 2px "
      "solid #d8a640; border-radius: 4px; }");
  hide();
}

void PresentationStage::cover(QWidget* view, QWidget* content) {
  if (content_ != content) {
    if (content_) content_->removeEventFilter(this);
    content_ = content;
    if (content_) content_->installEventFilter(this);
  }
  if (parentWidget() != view) setParent(view);
  follow();
  show();
  raise();
}

void PresentationStage::follow() {
  if (content_ && parentWidget())
    setGeometry(QRect(content_->mapTo(parentWidget(), QPoint(0, 0)), content_->size()));
}

void PresentationStage::show_chart(QWidget* view, QWidget* content, const ChartSpec& spec,
                                   const QString& callout) {
  heatmap_->hide();
  chart_->show();
  chart_->set_spec(spec);
  callout_->setText(callout);
  cover(view, content);
  place_callout();
}

void PresentationStage::show_heatmap(QWidget* view, QWidget* content, const HeatmapSpec& map,
                                     const QString& callout) {
  chart_->hide();
  heatmap_->show();
  heatmap_->set_spec(map);
  callout_->setText(callout);
  cover(view, content);
  place_callout();
}

void PresentationStage::hide_stage() {
  hide();
  if (content_) content_->removeEventFilter(this);
  content_ = nullptr;
}

bool PresentationStage::eventFilter(QObject* watched, QEvent* event) {
  if (watched == content_ && isVisible() &&
      (event->type() == QEvent::Resize || event->type() == QEvent::Move))
    follow();
  return false;
}

void PresentationStage::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  place_callout();
}

// Where it hides the least of what the step is about: inside the plot area (never over the axes,
// their tick labels or titles), never over the marker's readout, and covering the fewest drawn
// points and line segments (each segment sampled, so a line crossing the box counts, not only its
// dots). Candidates: beside the marker (right or left of it, at three heights) when the chart has
// one, the plot's corners and the middles of its edges. A heatmap: the stage's top right.
void PresentationStage::place_callout() {
  const int width = std::max(200, std::min(this->width() / 3, 420));
  callout_->setFixedWidth(width);
  const int height = callout_->heightForWidth(width);
  std::vector<QPoint> candidates;
  std::vector<QPointF> drawn;  // the points and samples of the segments between them
  QRectF plot(0, 0, this->width(), this->height());
  QRectF readout;
  if (chart_->isVisible()) {
    const ChartSpec& spec = chart_->spec();
    for (std::size_t s = 0; s < spec.series.size(); ++s) {
      const bool joined = spec.series[s].style != ChartSeries::Style::scatter;
      QPointF previous;
      for (std::size_t i = 0; i < spec.series[s].points.size(); ++i) {
        const QPointF at = chart_->mapTo(this, chart_->point_position(s, i).toPoint());
        if (joined && i > 0) {
          for (int k = 1; k < 8; ++k) drawn.push_back(previous + (at - previous) * (k / 8.0));
        }
        drawn.push_back(at);
        previous = at;
      }
    }
    const QPointF origin = chart_->mapTo(this, QPoint(0, 0));
    plot = chart_->chart()->plotArea().translated(origin);
    readout = charts::marker_readout_rect(chart_->chart()).translated(origin);
    if (spec.marker_x && !spec.series.empty() && !spec.series[0].points.empty()) {
      std::size_t nearest = 0;
      double best = std::numeric_limits<double>::infinity();
      const auto& first = spec.series[0].points;
      for (std::size_t i = 0; i < first.size(); ++i) {
        const double d = std::abs(first[i].first - *spec.marker_x);
        if (d < best) best = d, nearest = i;
      }
      const int x =
          static_cast<int>(chart_->mapTo(this, chart_->point_position(0, nearest).toPoint()).x());
      for (const double fraction : {0.3, 0.5, 0.7}) {
        const int y = static_cast<int>(plot.top() + fraction * plot.height() - height / 2.0);
        candidates.emplace_back(x + 24, y);
        candidates.emplace_back(x - 24 - width, y);
      }
    }
    const int left = static_cast<int>(plot.left()) + 12,
              right = static_cast<int>(plot.right()) - width - 12,
              middle = static_cast<int>(plot.center().x()) - width / 2;
    const int top = static_cast<int>(plot.top()) + 12,
              bottom = static_cast<int>(plot.bottom()) - height - 12,
              centre = static_cast<int>(plot.center().y()) - height / 2;
    candidates.insert(
        candidates.end(),
        {QPoint(right, top), QPoint(left, top), QPoint(right, bottom), QPoint(left, bottom),
         QPoint(middle, top), QPoint(middle, bottom), QPoint(left, centre), QPoint(right, centre)});
  } else {
    candidates.emplace_back(this->width() - width - 16, 40);
  }
  // Inside the plot where it fits (else inside the stage), clear of the readout, then the fewest
  // drawn samples.
  const QRect area = plot.toAlignedRect().intersected(rect().adjusted(8, 8, -8, -8));
  QPoint at = candidates.front();
  long best = std::numeric_limits<long>::max();
  for (QPoint c : candidates) {
    c.setX(std::clamp(c.x(), area.left(), std::max(area.left(), area.right() - width)));
    c.setY(std::clamp(c.y(), area.top(), std::max(area.top(), area.bottom() - height)));
    const QRect box(c, QSize(width, height));
    long score = static_cast<long>(std::count_if(drawn.begin(), drawn.end(), [&](const QPointF& p) {
      return box.adjusted(-6, -6, 6, 6).contains(p.toPoint());
    }));
    if (!readout.isEmpty() && QRectF(box).intersects(readout)) score += 100000;
    if (!area.contains(box)) score += 10000;  // over an axis: only when nothing else fits
    if (score < best) best = score, at = c;
  }
  callout_->setGeometry(at.x(), at.y(), width, height);
  callout_->raise();
}

}  // namespace attnres::gui
