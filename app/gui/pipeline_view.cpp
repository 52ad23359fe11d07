// The pipeline view: the simulated schedule of one training iteration (docs/math.md §3.3,
// docs/pipeline.md).
#include "view_kit.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward.hpp"
#include "attnres/layers.hpp"
#include "attnres/model.hpp"
#include "attnres/model_config.hpp"
#include "attnres/paper_reference.hpp"
#include "attnres/report.hpp"
#include "attnres/sweep.hpp"
#include "training_view.hpp"

namespace attnres::gui {

namespace {

// ------------------------------------------------------------------ pipeline

class PipelineView : public View {
 public:
  explicit PipelineView(const ViewHost& host) : View("pipeline", "Pipeline schedule", host) {
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    sublayers_ = spin(1, 100000, 54);
    block_size_ = spin(1, 100000, 6);
    d_model_ = spin(1, 1'000'000, 2304);
    tokens_ = spin(1, 10'000'000, 4096);
    micro_ = spin(1, 1024, 1);
    m_ = spin(1, 4096, 8);
    pp_ = spin(1, 256, 4);
    vpp_ = spin(1, 16, 2);
    cache_ = new QComboBox;
    cache_->addItems({"cached", "naive", "cached_own"});
    hardware_ = hardware_combo();
    bandwidth_ = dspin(0.1, 10000, 50, 1, 5);
    bandwidth_->setObjectName("link_bandwidth");
    sublayers_->setObjectName("sublayers");
    m_->setObjectName("microbatches");
    pp_->setObjectName("pp");
    vpp_->setObjectName("vpp");
    overlap_ = new QCheckBox("transfers overlap compute");
    overlap_->setChecked(true);
    ideal_ = new QCheckBox("ideal links (free transfers)");
    form->addRow("sublayers L", sublayers_);
    form->addRow("block size S", block_size_);
    form->addRow("width d", d_model_);
    form->addRow("tokens T", tokens_);
    form->addRow("micro-batch size", micro_);
    form->addRow("micro-batches m", m_);
    form->addRow("ranks P", pp_);
    form->addRow("virtual stages V", vpp_);
    form->addRow("history cache", cache_);
    form->addRow("hardware", hardware_);
    form->addRow("link GB/s", bandwidth_);
    form->addRow(overlap_);
    form->addRow(ideal_);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    summary_ = new QLabel;
    summary_->setObjectName("pipeline_summary");
    summary_->setWordWrap(true);
    gantt_ = new GanttWidget;
    memory_ = new ChartPanel;
    column->addWidget(summary_);
    column->addWidget(gantt_, 3);
    column->addWidget(memory_, 2);
    three_columns(this, inputs, content,
                  "<h3>Does the AttnRes traffic hide?</h3><p><b>What you see.</b> One training iteration on "
                  "every rank: forward (blue) and backward (orange) chunks, and the transfers of activations "
                  "plus the AttnRes block history (thin bars). Below: each rank's live memory.</p>"
                  "<p><b>Numbers.</b> The overhead compares the same schedule with the standard residual. "
                  "Bubble: 1F1B (P-1)/m, interleaved (P-1)/(V·m) of the ideal time.</p><p><b>Try:</b> lower the "
                  "link bandwidth until the overhead passes 4%; raise m; switch the cache to naive with V = 2; "
                  "turn overlap off.</p>");
    on_change(this, {sublayers_, block_size_, d_model_, tokens_, micro_, m_, pp_, vpp_, cache_, hardware_, bandwidth_,
                     overlap_, ideal_},
              [this] { recompute(); });
  }

  PipelineSettings settings() const {
    PipelineSettings s;
    CostInputs in;
    in.sublayers = sublayers_->value();
    in.block_size = block_size_->value();
    in.d_model = d_model_->value();
    in.tokens = tokens_->value();
    in.batch = micro_->value();
    in.pp = pp_->value();
    in.vpp = vpp_->value();
    s.model = resolve_cost_inputs(in);
    s.microbatches = m_->value();
    s.schedule = in.vpp > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
    s.cache = parse_cache_policy(cache_->currentText().toStdString(), "cache");
    s.hardware = load_hardware(hardware_->currentText().toStdString());
    s.link_bandwidth = bandwidth_->value() * 1e9;
    s.overlap = overlap_->isChecked();
    s.ideal_links = ideal_->isChecked();
    return s;
  }

  void recompute() override {
    PipelineSettings s;
    try {
      s = settings();
    } catch (const Error& error) {
      show_error(error.what());
      return;
    }
    run("pipeline simulation", [this, s](const Progress& progress) mutable -> std::function<void()> {
      s.progress = progress;
      const PipelineReport report = evaluate_pipeline(s);
      const ChartSpec gantt = pipeline_gantt_chart(report), memory = pipeline_memory_chart(report);
      const QString summary = QString("<b>iteration</b> %1 ms (standard %2 ms) &nbsp; <b>AttnRes overhead</b> %3% "
                                      "&nbsp; <b>bubble</b> %4% (closed form %5%) &nbsp; <b>exposed comm</b> %6 ms "
                                      "&nbsp; <b>peak memory/rank</b> %7 GB")
                                  .arg(report.iteration_time_s * 1e3, 0, 'g', 4)
                                  .arg(report.standard.iteration_seconds * 1e3, 0, 'g', 4)
                                  .arg(report.attnres_overhead_fraction * 100, 0, 'f', 2)
                                  .arg(report.bubble_fraction * 100, 0, 'f', 2)
                                  .arg(report.closed_form_bubble * 100, 0, 'f', 2)
                                  .arg(report.exposed_comm_s * 1e3, 0, 'g', 4)
                                  .arg(report.peak_memory_bytes_per_rank / 1e9, 0, 'g', 4);
      return [this, gantt, memory, summary] {
        gantt_->set_spec(gantt);
        memory_->set_spec(memory);
        summary_->setText(summary);
      };
    });
  }
  std::vector<ChartSpec> charts() const override { return {gantt_->spec(), memory_->spec()}; }
  void apply_scenario(const Scenario& s) override {
    if (!s.has_model) return;
    const QSignalBlocker b1(sublayers_), b2(block_size_), b3(d_model_), b4(tokens_), b5(pp_), b6(vpp_), b7(m_), b8(micro_);
    sublayers_->setValue(static_cast<int>(s.inputs.sublayers));
    block_size_->setValue(static_cast<int>(s.inputs.block_size));
    d_model_->setValue(static_cast<int>(s.inputs.d_model));
    tokens_->setValue(static_cast<int>(s.inputs.tokens));
    micro_->setValue(static_cast<int>(s.inputs.batch));
    pp_->setValue(static_cast<int>(s.inputs.pp));
    vpp_->setValue(static_cast<int>(s.inputs.vpp));
    if (s.pipeline) m_->setValue(s.pipeline->microbatches);
    recompute();
  }

 private:
  QSpinBox *sublayers_, *block_size_, *d_model_, *tokens_, *micro_, *m_, *pp_, *vpp_;
  QComboBox *cache_, *hardware_;
  QDoubleSpinBox* bandwidth_;
  QCheckBox *overlap_, *ideal_;
  QLabel* summary_;
  GanttWidget* gantt_;
  ChartPanel* memory_;
};


}  // namespace

View* make_pipeline_view(const ViewHost& host) { return new PipelineView(host); }

}  // namespace attnres::gui
