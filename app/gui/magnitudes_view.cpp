// The Magnitudes by depth view (the paper's Fig. 5b question): the RMS of each sublayer's input
// h_l and output v_l for the picked scheme and, with "compare with", a second one on the same
// weights of the lesson model, beside the standard residual for reference. The charts are the
// core's (magnitude_charts).
#include <QFormLayout>
#include <QVBoxLayout>
#include <algorithm>
#include <array>

#include "attnres/model_charts.hpp"
#include "model_results.hpp"
#include "model_view.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

class MagnitudesView : public ModelView {
 public:
  MagnitudesView(const ViewHost& host, const ViewEntry& table_row) : ModelView(table_row, host) {
    QFormLayout* form = nullptr;
    QWidget* inputs = make_inputs(form);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    input_panel_ = new ChartPanel;
    output_panel_ = new ChartPanel;
    column->addWidget(input_panel_);
    column->addWidget(output_panel_);
    three_columns(
        this, inputs, content,
        "<h3>Magnitudes by depth</h3><p><b>What you see.</b> The RMS of each sublayer's input "
        "h<sub>l</sub> and output v<sub>l</sub> for the picked scheme and, with <i>compare "
        "with</i>, a "
        "second one on the same weights (the paper's Fig. 5b question). The thin line is the "
        "standard "
        "residual on the same weights, for reference, unless one of the two is standard.</p>"
        "<p><b>Why.</b> The standard residual sums every output with weight one, so h<sub>l</sub> "
        "grows "
        "with depth and each new output matters less; AttnRes forms a convex combination, so the "
        "input "
        "stays on the scale of a single output. DenseFormer, sigmoid gates and mHC need not.</p>"
        "<p><b>Model.</b> By default the shipped trained Full AttnRes model (docs/training.md); a "
        "curve "
        "marked <i>trained</i> is the scheme it was trained with, the others read the same weights "
        "(shared tensors kept, new ones at their start). The random model brings back the spin "
        "boxes.</p><p><b>Try:</b> compare with standard; the trained standard model with Full; "
        "mHC; "
        "the random model with more layers; query std 0 (means) against 1.</p>");
    on_change(this, model_inputs(), [this] { recompute(); });
  }

  void recompute() override {
    const auto snapshot = lesson_->snapshot();
    picks_ = picks();
    run("magnitudes: forward passes",
        [this, snapshot, picks = picks_](const Progress& progress) -> std::function<void()> {
          const std::array<ChartSpec, 2> figures = magnitudes_result(snapshot, picks, progress);
          return [this, figures] {
            input_panel_->set_spec(figures[0]);
            output_panel_->set_spec(figures[1]);
            clear_error();
          };
        });
  }
  std::vector<ChartSpec> charts() const override {
    return {input_panel_->spec(), output_panel_->spec()};
  }

 private:
  ChartPanel *input_panel_, *output_panel_;
  SchemePicks picks_;  // the view's state beside the lesson model's (model_results.hpp)
};

}  // namespace

View* make_magnitudes_view(const ViewHost& host, const ViewEntry& entry) {
  return new MagnitudesView(host, entry);
}

}  // namespace attnres::gui
