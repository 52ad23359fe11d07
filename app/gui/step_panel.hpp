// The cost explorer's Step tab (docs/math.md §3.8): one training step of the explorer's setting
// simulated with AttnRes and with the standard residual (evaluate_pipeline) — the headline (what
// AttnRes adds to the step, and how much of it is the mechanism, the pipeline traffic and the
// bubble), the step's parts side by side (step_table), the tool's three overhead numbers and the
// question each answers (reconciliation_table), and the stage layout: the layers of every pipeline
// chunk and the rank it runs on, with the warning when a boundary splits a layer. Internal to
// app/gui: the cost view owns the inputs and fills this.
#pragma once

#include <QWidget>
#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/report.hpp"
#include "explorer_results.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace attnres::gui {

class StepPanel : public QWidget {
 public:
  explicit StepPanel(QWidget* parent = nullptr);
  // The parallel groups whose collectives overlap compute (checkboxes "overlap_tp" ...).
  CommOverlap overlap() const;
  void set_overlap(const CommOverlap& overlap);  // without change signals
  std::vector<QCheckBox*> overlap_boxes() const { return overlap_boxes_; }
  void set_result(StepResult result);
  // The step cannot be simulated (a rule of pipeline_settings_problem): why, in place of the
  // headline; the tables keep the last result.
  void set_problem(const std::string& message);
  const StepResult& result() const { return result_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void changeEvent(QEvent* event) override;

 private:
  std::vector<QCheckBox*> overlap_boxes_;  // tp, cp, ep, dp
  QLabel *headline_, *setting_, *warning_;
  QTableWidget *parts_, *reconciliation_, *stages_;
  StepResult result_;
};

}  // namespace attnres::gui
