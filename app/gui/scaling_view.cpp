// The scaling-law view: the paper's three fits and the compute multiplier.
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QTableWidget>
#include <QVBoxLayout>

#include "attnres/report.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// ------------------------------------------------------------------ scaling law

class ScalingView : public View {
 public:
  ScalingView(const ViewHost& host, const ViewEntry& table_row) : View(table_row, host) {
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    target_ = dspin(1.0, 3.0, 1.695, 3, 0.005);
    target_->setObjectName("target_loss");
    from_ = dspin(0.5, 3.0, 1.60, 3, 0.01);
    to_ = dspin(0.5, 3.0, 1.90, 3, 0.01);
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
    table_ = new QTableWidget;
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
    on_change(this, {target_, from_, to_}, [this] { recompute(); });
  }
  void recompute() override {
    if (!(from_->value() < to_->value())) {
      show_error("scaling: the curve needs from < to");
      return;
    }
    clear_error();
    Report report;
    add_scaling_section({target_->value(), from_->value(), to_->value()}, report);
    loss_->set_spec(report.charts[0]);
    multiplier_->set_spec(report.charts[1]);
    const ReportTable& fits = report.tables[0];
    table_->setColumnCount(static_cast<int>(fits.header.size()));
    table_->setRowCount(static_cast<int>(fits.rows.size()));
    QStringList header;
    for (const auto& h : fits.header) header << QString::fromStdString(h);
    table_->setHorizontalHeaderLabels(header);
    for (std::size_t r = 0; r < fits.rows.size(); ++r) {
      for (std::size_t c = 0; c < fits.rows[r].size(); ++c) {
        table_->setItem(static_cast<int>(r), static_cast<int>(c),
                        new QTableWidgetItem(QString::fromStdString(fits.rows[r][c])));
      }
    }
    table_->resizeColumnsToContents();
    set_stale({});  // computed here, not in a run: nothing else clears an earlier veil
  }
  std::vector<ChartSpec> charts() const override { return {loss_->spec(), multiplier_->spec()}; }
  void apply_scenario(const Scenario& s) override {
    const QSignalBlocker b1(target_), b2(from_), b3(to_);
    target_->setValue(s.scaling.target_loss);
    from_->setValue(s.scaling.loss_from);
    to_->setValue(s.scaling.loss_to);
    recompute();
  }
  ScenarioScaling scaling() const { return {target_->value(), from_->value(), to_->value()}; }
  void save_to(Scenario& s) const override { s.scaling = scaling(); }

 private:
  QDoubleSpinBox *target_, *from_, *to_;
  ChartPanel *loss_, *multiplier_;
  QTableWidget* table_;
};

}  // namespace

View* make_scaling_view(const ViewHost& host, const ViewEntry& entry) {
  return new ScalingView(host, entry);
}

}  // namespace attnres::gui
