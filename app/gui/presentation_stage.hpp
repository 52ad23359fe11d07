// Presentation mode's stage (docs/teaching.md "On a projector"): while the lesson runs in
// presentation mode, the one chart a step is about fills its tab's content, with the step's "look
// for" as a callout beside the chart's marker (or at its top right when it has none); the tab's
// other charts and tables stay underneath until the lesson ends or presentation mode is left.
// Internal to app/gui: the main window places it over the current view's content.
#pragma once

#include <QPointer>
#include <QString>
#include <QWidget>

#include "attnres/chart_spec.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
QT_END_NAMESPACE

namespace attnres::gui {

class ChartPanel;
class HeatmapWidget;

class PresentationStage : public QWidget {
 public:
  explicit PresentationStage(QWidget* parent = nullptr);
  // Shows `spec` (or `map`) in `view`, over `content` (its middle column), with the callout; the
  // stage follows the content's geometry.
  void show_chart(QWidget* view, QWidget* content, const ChartSpec& spec, const QString& callout);
  void show_heatmap(QWidget* view, QWidget* content, const HeatmapSpec& map,
                    const QString& callout);
  void hide_stage();
  ChartPanel* chart() const { return chart_; }
  HeatmapWidget* heatmap() const { return heatmap_; }
  QLabel* callout() const { return callout_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void cover(QWidget* view, QWidget* content);
  void follow();
  void place_callout();
  QPointer<QWidget> content_;
  ChartPanel* chart_;
  HeatmapWidget* heatmap_;
  QLabel* callout_;
};

}  // namespace attnres::gui
