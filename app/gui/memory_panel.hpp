// The cost explorer's Memory tab (docs/math.md §3.7): the memory of every pipeline rank split into
// weights, gradients, optimizer states, activations, AttnRes history and KV cache as stacked bars
// against the device's capacity, the verdict of the largest rank, the table of `attnres memory`
// (memory_table) and the assumptions behind the numbers. Internal to app/gui: the cost view owns
// the inputs and fills this.
#pragma once

#include <QString>
#include <QWidget>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/hardware.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/report.hpp"
#include "explorer_results.hpp"
#include "report_table_model.hpp"
#include "widgets.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QTableView;
QT_END_NAMESPACE

namespace attnres::gui {

// Stacked bars (GB per rank) built from the table's component columns (weights .. KV cache), and
// the capacity as a dashed line. At most kMaxBars ranks are drawn: every k-th and the largest.
class MemoryChart : public ChartPanel {
 public:
  static constexpr std::size_t kMaxBars = 64;
  explicit MemoryChart(QWidget* parent = nullptr);
  void set_result(const MemoryResult& result);
  // The ranks drawn, in bar order.
  const std::vector<int>& drawn_ranks() const { return drawn_; }

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;

 private:
  std::vector<int> drawn_;
};

class MemoryPanel : public QWidget {
 public:
  explicit MemoryPanel(QWidget* parent = nullptr);
  QComboBox* workload_combo() const { return workload_; }
  Workload workload() const;
  void set_result(MemoryResult result);
  const MemoryResult& result() const { return result_; }

 private:
  QComboBox* workload_;
  QLabel *verdict_, *assumptions_;
  MemoryChart* chart_;
  QTableView* table_;
  ReportTableModel* model_;
  MemoryResult result_;
};

}  // namespace attnres::gui
