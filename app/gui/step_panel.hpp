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

QT_BEGIN_NAMESPACE
class QCheckBox;
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace attnres::gui {

// One pipeline chunk of the stage layout (stage_last_sublayers): chunk c runs on rank c mod P and
// holds sublayers first..last (1-based, inclusive; layer k is sublayers 2k-1 and 2k).
struct StageChunk {
  std::int64_t chunk = 0, rank = 0;
  std::int64_t first_sublayer = 1, last_sublayer = 0;
  bool splits_layer = false;  // it starts on an MLP or ends on an attention before the last
  std::int64_t sublayers() const { return last_sublayer - first_sublayer + 1; }
};
std::vector<StageChunk> stage_chunks(const CostInputs& resolved);

// "AttnRes adds 0.4 % to the step (mechanism 0.2 %, pipeline traffic 0.19 %, bubble 0.02 %)":
// the step overhead and its split (StepReconciliation), each as the step table shows a percent;
// the gradient collectives and the rest are named only where they are not 0.
std::string step_headline(const PipelineReport& report);
// A fraction as the report tables show a percent, with its unit: "0.404 %".
std::string shown_percent(double fraction);

// Everything the tab shows for one setting, computed off the GUI thread.
struct StepResult {
  PipelineReport report;
  ReportTable parts;           // step_table
  ReportTable reconciliation;  // reconciliation_table
  std::vector<StageChunk> chunks;
  std::string headline;  // step_headline
  std::string setting;   // what was simulated, in one line
};
// Throws attnres::Error on settings the simulation refuses (check pipeline_settings_problem
// first) and attnres::Cancelled when settings.progress says stop.
StepResult compute_step(const PipelineSettings& settings);

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
