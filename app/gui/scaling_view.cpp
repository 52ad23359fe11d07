// The scaling-law view: the paper's three fits and the compute multiplier. A thin binding of its
// state and results (app/gui/models/scaling_state.hpp): the fields show and write the state, the
// charts and the table show compute_scaling's results.
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QTableView>
#include <QVBoxLayout>

#include "report_table_model.hpp"
#include "scaling_state.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// ------------------------------------------------------------------ scaling law

class ScalingView : public View {
 public:
  ScalingView(const ViewHost& host, const ViewEntry& table_row) : View(table_row, host) {
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    target_ = dspin(kScalingLossMin, kScalingLossMax, state_.target_loss, 3, 0.005);
    target_->setObjectName("target_loss");
    from_ = dspin(kScalingLossMin, kScalingLossMax, state_.loss_from, 3, 0.01);
    to_ = dspin(kScalingLossMin, kScalingLossMax, state_.loss_to, 3, 0.01);
    from_->setObjectName("curve_from");
    to_->setObjectName("curve_to");
    target_->setToolTip(
        "The loss at which the compute multipliers are read (nats/token, the paper's scale)");
    from_->setToolTip("Lowest loss of the curves");
    to_->setToolTip("Highest loss of the curves");
    form->addRow("target loss", target_);
    form->addRow("curve from", from_);
    form->addRow("curve to", to_);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    loss_ = new ChartPanel;
    multiplier_ = new ChartPanel;
    table_ = new QTableView;
    table_->setObjectName("scaling_fits");
    table_->setModel(&fits_);
    table_->verticalHeader()->setVisible(false);
    table_->setMaximumHeight(130);
    column->addWidget(loss_);
    column->addWidget(multiplier_);
    column->addWidget(table_);
    three_columns(
        this, inputs, content,
        "<h3>Scaling law</h3><p><b>What you see.</b> The paper's fits loss = A·C<sup>-a</sup> (C "
        "in "
        "PFLOP/s-days): baseline 1.891·C<sup>-0.057</sup>, Block 1.870·C<sup>-0.058</sup>, Full "
        "1.865·C<sup>-0.057</sup>; and the compute multiplier, baseline compute / scheme compute "
        "at "
        "the same loss.</p><p><b>Reading it.</b> Near loss 1.69-1.70 Block AttnRes is worth about "
        "1.25x compute. The fits come from five model sizes; outside that range they are "
        "extrapolations.</p>");
    on_change(this, {target_, from_, to_}, [this] {
      state_ = {target_->value(), from_->value(), to_->value()};
      recompute();
    });
  }
  void recompute() override {
    const ScalingResult result = compute_scaling(state_);
    if (!result.problem.empty()) {
      show_error(result.problem);
      return;
    }
    clear_error();
    loss_->set_spec(result.charts[0]);
    multiplier_->set_spec(result.charts[1]);
    fits_.set_table(result.fits);
    table_->resizeColumnsToContents();
    set_stale({});  // computed here, not in a run: nothing else clears an earlier veil
  }
  std::vector<ChartSpec> charts() const override { return {loss_->spec(), multiplier_->spec()}; }
  void apply_scenario(const Scenario& s) override {
    state_ = scaling_state(s);
    {
      const QSignalBlocker b1(target_), b2(from_), b3(to_);
      target_->setValue(state_.target_loss);
      from_->setValue(state_.loss_from);
      to_->setValue(state_.loss_to);
    }
    recompute();
  }
  std::string scenario_problem(const Scenario& s) const override {
    return scaling_state_problem(scaling_state(s));
  }
  void save_to(Scenario& s) const override { save_scaling_state(state_, s); }

 private:
  QDoubleSpinBox *target_, *from_, *to_;
  ChartPanel *loss_, *multiplier_;
  QTableView* table_;
  ReportTableModel fits_;
  ScalingState state_;
};

}  // namespace

View* make_scaling_view(const ViewHost& host, const ViewEntry& entry) {
  return new ScalingView(host, entry);
}

}  // namespace attnres::gui
