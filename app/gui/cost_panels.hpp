// The cost explorer's tabs on implementations (docs/math.md §3.6, docs/calibration.md): the four
// implementation strategies of the depth read side by side for the current inputs, the block
// layout against the pipeline's chunks, and the calibration table of public measurements with the
// modelled value of each. Internal to app/gui: the cost view owns the inputs and fills these.
#pragma once

#include <QString>
#include <QWidget>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "attnres/block_layout.hpp"
#include "attnres/calibration.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"
#include "attnres/strategy.hpp"
#include "strategy_comparison.hpp"
#include "widgets.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace attnres::gui {

// The comparison table (8 rows: Block's strategies, then Full's) and a summary of the highlighted
// strategy. Byte columns are per micro-batch, in MB or GB (one unit for the table, in the
// headers).
class StrategyPanel : public QWidget {
 public:
  explicit StrategyPanel(QWidget* parent = nullptr);
  void set_comparison(StrategyComparison comparison);
  void highlight(Strategy strategy);
  const StrategyComparison& comparison() const { return comparison_; }
  // "MB" or "GB": the unit of the byte columns now.
  const QString& unit() const { return unit_; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void fill();
  QTableWidget *bytes_, *time_;  // bytes and memory; launches and time
  QLabel* summary_;
  StrategyComparison comparison_;
  Strategy highlighted_ = Strategy::fused_one_shot;
  QString unit_ = "MB";
};

// One row per block of the layout against the pipeline (layout_rows), at most kMaxShownBlocks.
class LayoutPanel : public QWidget {
 public:
  static constexpr std::size_t kMaxShownBlocks = 2000;
  explicit LayoutPanel(QWidget* parent = nullptr);
  void set_rows(const std::vector<LayoutBlockRow>& rows, const CostInputs& resolved);

 private:
  QTableWidget* table_;
  QLabel* summary_;
};

// The calibration chart (modelled against measured, log-log, each point labelled with its id) and
// table, from builtin_calibration(). Built once: it does not depend on the view's inputs.
class CalibrationChart : public ChartPanel {
 public:
  struct Label {
    std::size_t series = 0, point = 0;
    QString text;
  };
  explicit CalibrationChart(QWidget* parent = nullptr) : ChartPanel(parent) {}
  void set_labels(std::vector<Label> labels);
  const std::vector<Label>& labels() const { return labels_; }
  // Where the label of entry `index` was last drawn (scene coordinates; empty before a paint).
  QRectF label_rect(std::size_t index) const;

 protected:
  void drawForeground(QPainter* painter, const QRectF& rect) override;

 private:
  std::vector<Label> labels_;
  std::vector<QRectF> drawn_;
};

class CalibrationPanel : public QWidget {
 public:
  explicit CalibrationPanel(QWidget* parent = nullptr);
  const ChartSpec& spec() const;
  const std::vector<CalibrationRow>& rows() const { return rows_; }

 private:
  std::vector<CalibrationRow> rows_;
  CalibrationChart* chart_;
};

// The calibration chart's data: |measured| against |modelled| per point (log-log; a throughput
// change is negative), measured, fitted and bound points as separate series, and y = x.
ChartSpec calibration_chart(const std::vector<CalibrationRow>& rows,
                            std::vector<CalibrationChart::Label>* labels = nullptr);

}  // namespace attnres::gui
