// The Magnitudes by depth view (the paper's Fig. 5b question): the RMS of each sublayer's input
// h_l and output v_l for the picked scheme and, with "compare with", a second one on the same
// weights of the lesson model, beside the standard residual for reference. The charts are the
// core's (magnitude_charts).
#include <QFormLayout>
#include <QVBoxLayout>
#include <algorithm>
#include <array>

#include "attnres/model_charts.hpp"
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
    const Picks picks = this->picks();
    run("magnitudes: forward passes",
        [this, snapshot, picks](const Progress& progress) -> std::function<void()> {
          const auto built = snapshot.build();
          const ModelWeights<double>& model = *built;
          const auto tokens = snapshot.token_ids(model.config);
          std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
          const std::size_t picked = runs.size();
          if (std::none_of(runs.begin(), runs.end(), [](const SchemeOnModel& r) {
                return r.scheme.mode == ResidualMode::standard;
              })) {
            SchemeOnModel reference;
            reference.name = reference.scheme.describe() + " (reference)";
            reference.model = convert_scheme(model, reference.scheme);
            runs.push_back(std::move(reference));
          }
          std::vector<ForwardTrace> traces;
          for (std::size_t m = 0; m < runs.size(); ++m) {
            traces.push_back(
                scheme_trace(runs[m].model, tokens, step(progress, m, runs.size()), false));
          }
          std::vector<MagnitudeCurve> curves;
          for (std::size_t m = 0; m < runs.size(); ++m)
            curves.push_back({runs[m].name, &traces[m], m >= picked});
          // Legends name the schemes; the titles say whose weights (a trained or loaded model's).
          const std::string weights =
              snapshot.origin.empty()
                  ? std::string()
                  : snapshot.origin + " " + model.config.attn_res.describe() + " model";
          const std::array<ChartSpec, 2> figures = magnitude_charts(curves, weights);
          const ChartSpec& inputs = figures[0];
          const ChartSpec& outputs = figures[1];
          return [this, inputs, outputs] {
            input_panel_->set_spec(inputs);
            output_panel_->set_spec(outputs);
            clear_error();
          };
        });
  }
  std::vector<ChartSpec> charts() const override {
    return {input_panel_->spec(), output_panel_->spec()};
  }

 private:
  ChartPanel *input_panel_, *output_panel_;
};

}  // namespace

View* make_magnitudes_view(const ViewHost& host, const ViewEntry& entry) {
  return new MagnitudesView(host, entry);
}

}  // namespace attnres::gui
