// Widgets shared by the attnres-lab views: a heatmap (QImage through viridis, colour bar, axis
// labels, hover values), a Gantt chart (the report's painter), and a chart panel that keeps the
// core ChartSpec it shows so that exports match the CLI's figures exactly.
#pragma once

#include <QLabel>
#include <QWidget>
#include <QtCharts/QChartView>
#include <filesystem>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"

namespace attnres::gui {

class HeatmapWidget : public QWidget {
 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);
  // values (rows x cols), NaN = no value (grey); colours scale from `low` to `high`.
  void set_data(std::string title, std::vector<std::vector<double>> values, std::vector<std::string> row_labels,
                std::vector<std::string> column_labels, double low = 0.0, double high = 1.0);
  const std::vector<std::vector<double>>& values() const { return values_; }
  const std::string& title() const { return title_; }
  // Centre of cell (row, col) in widget coordinates, and the cell under a point (-1 if none).
  QPointF cell_center(int row, int col) const;
  std::pair<int, int> cell_at(QPointF point) const;
  std::string csv() const;
  // PNG or SVG by extension.
  void export_image(const std::filesystem::path& path);
  QSize sizeHint() const override { return {460, 380}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  QRectF plot_rect() const;
  // Height of the title, wrapped to the widget's width (long scheme names take two lines).
  int title_height() const;
  std::string title_;
  std::vector<std::vector<double>> values_;
  std::vector<std::string> rows_, columns_;
  double low_ = 0, high_ = 1;
};

class GanttWidget : public QWidget {
 public:
  explicit GanttWidget(QWidget* parent = nullptr) : QWidget(parent) { setMinimumHeight(220); }
  void set_spec(ChartSpec spec);
  const ChartSpec& spec() const { return spec_; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  ChartSpec spec_;
};

class ChartPanel : public QChartView {
 public:
  explicit ChartPanel(QWidget* parent = nullptr);
  void set_spec(ChartSpec spec);
  const ChartSpec& spec() const { return spec_; }

 private:
  ChartSpec spec_;
};

// Long-format CSV of a chart's data: series, x, y.
std::string chart_csv(const ChartSpec& spec);

}  // namespace attnres::gui
