// The cost explorer's Decision tab (docs/math.md §3.9): which N, at what cost. The user's budgets
// (AttnRes step overhead, fit in memory, pipeline traffic, step time) and the grid to try (block
// counts N, optionally parallel degrees t, c, e, P, V); the plan (make_plan) simulated for the
// explorer's setting: its summary, one line per N and the table of `attnres plan` (plan_table).
// Internal to app/gui: the cost view owns the setting and runs the plan.
#pragma once

#include <QWidget>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnres/plan.hpp"
#include "attnres/scenario.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QTableWidget;
QT_END_NAMESPACE

namespace attnres::gui {

// What the inputs ask for, or why they cannot be used.
struct PlanRequest {
  PlanGrid grid;
  PlanBudgets budgets;
  std::string problem;         // "" when the request is fine
  QWidget* culprit = nullptr;  // the input the problem is about
};

class DecisionPanel : public QWidget {
 public:
  explicit DecisionPanel(QWidget* parent = nullptr);
  // The inputs (budgets and grid) whose changes re-run the plan.
  std::vector<QWidget*> inputs() const;
  // The grid and budgets typed for a model of `sublayers` L (an empty N list: plan_default_blocks;
  // an empty degree list: the setting's degree; the strategies, hardware and world size of the
  // scenario's [plan]), checked by the engine's rules; the N input shows the default list as its
  // placeholder.
  PlanRequest request(std::int64_t sublayers) const;
  // A scenario's [plan] table into the inputs (without change signals); ScenarioPlan{} resets
  // them. The block counts that are the defaults for `sublayers` L stay the default.
  void apply_plan(const ScenarioPlan& plan, std::int64_t sublayers);
  // The request cannot be used: the message under the inputs, the input framed; the last plan
  // stays, marked as not current.
  void set_problem(const std::string& message, QWidget* culprit = nullptr);
  void set_result(PlanResult plan);
  const PlanResult& result() const { return result_; }
  // The row of the plan table that holds the recommended setting (-1: none).
  int recommended_row() const;

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void clear_problem();
  QLineEdit *max_overhead_, *max_traffic_, *max_step_, *blocks_;
  std::vector<QLineEdit*> degrees_;  // t, c, e, P, V
  QCheckBox* must_fit_;
  QLabel *problem_, *summary_, *constant_, *extras_label_;
  QPlainTextEdit* by_blocks_;
  PlanGrid extras_;  // the scenario's strategies, hardware and GPUs (no inputs of their own)
  QTableWidget* table_;
  QWidget* framed_ = nullptr;
  PlanResult result_;
};

}  // namespace attnres::gui
