// The pipeline view: the simulated schedule of one training iteration (docs/math.md §3.3 and
// §3.4, time model and schedule simulator; the lesson's steps: docs/teaching.md).
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "attnres/report.hpp"
#include "attnres/sweep.hpp"
#include "explorer_results.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// ------------------------------------------------------------------ pipeline

constexpr double kClaimThreshold = 0.04;

// The integer inputs this view shows, by their CostInputs key (its spin boxes' object names are
// the same but for "batch": "micro_batch").
struct ShownInput {
  const char* key;
  const char* label;
  int low, high;
  const char* tip;
};
constexpr ShownInput kShown[] = {
    {"sublayers", "sublayers L", 1, 100000,
     "Sublayers L of the model (attention and MLP each count)"},
    {"block_size", "block size S", 1, 100000,
     "Block AttnRes block size S (sublayers per block); N = ceil(L / S) blocks"},
    {"d_model", "width d", 1, 1'000'000, "Hidden width d"},
    {"ffn", "dense ffn F", 0, 10'000'000,
     "Dense SwiGLU width F of each MLP (0: round(8d/3)); unused when experts > 0"},
    {"experts", "experts", 0, 100000, "MoE routed experts in all (0: a dense MLP)"},
    {"active", "active experts", 0, 100000, "Routed experts per token (top-k)"},
    {"shared", "shared experts", 0, 100000, "Always-on shared experts"},
    {"expert_ffn", "expert ffn", 0, 10'000'000, "SwiGLU width of one expert"},
    {"tokens", "tokens T", 1, 10'000'000, "Sequence length T (tokens per sequence)"},
    {"batch", "micro-batch size", 1, 1024, "Sequences per micro-batch"},
    {"pp", "ranks P", 1, 256, "Pipeline ranks P (one GPU each)"},
    {"vpp", "virtual stages V", 1, 16,
     "Virtual stages V per rank (V > 1: interleaved 1F1B; V = 1: 1F1B)"}};

class PipelineView : public View {
 public:
  PipelineView(const ViewHost& host, const ViewEntry& table_row) : View(table_row, host) {
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    for (const ShownInput& input : kShown) {
      QSpinBox* box = spin(input.low, input.high, 0);
      box->setToolTip(input.tip);
      box->setObjectName(std::string_view(input.key) == "active"   ? "active_experts"
                         : std::string_view(input.key) == "shared" ? "shared_experts"
                         : std::string_view(input.key) == "batch"  ? "micro_batch"
                                                                   : input.key);
      boxes_.push_back(box);
    }
    m_ = spin(1, 4096, 8);
    cache_ = new QComboBox;
    for (const auto& entry : kCachePolicyNames)
      cache_->addItem(QString::fromUtf8(entry.name.data(), static_cast<int>(entry.name.size())));
    cache_->setCurrentText(QString::fromStdString(to_string(CachePolicy::cached)));
    hardware_ = hardware_combo();
    link_ = new QComboBox;
    link_->addItem("where the stages sit", "placed");
    link_->addItem("scale-out network", "scale_out");
    link_->addItem("intra-node (NVLink)", "intra_node");
    bandwidth_ = dspin(0.1, 10000, 200, 1, 5);
    overlap_ = new QCheckBox("transfers overlap compute");
    overlap_->setChecked(true);
    ideal_ = new QCheckBox("ideal links (free transfers)");
    m_->setToolTip(
        "Micro-batches m per iteration: more of them hide transfers and shrink the bubble");
    cache_->setToolTip(
        "AttnRes block history between stages: cached sends each summary once and keeps what was "
        "received (the paper's cross-stage cache); naive resends every earlier summary at every "
        "boundary; cached_own also keeps a rank's own summaries (docs/math.md §3.3)");
    hardware_->setToolTip(
        "GPU preset: peak FLOP/s, HBM and link bandwidths, efficiencies (docs/math.md §3.4)");
    link_->setToolTip(
        "Which link the pipeline transfers use (sets the bandwidth below to the preset's)");
    bandwidth_->setToolTip("Link bandwidth per direction in GB/s (overrides the preset's)");
    overlap_->setToolTip(
        "On: a rank computes while its transfers are in flight; off: the sender waits for them");
    ideal_->setToolTip("Transfers cost nothing: what is left is the schedule's own bubble");
    bandwidth_->setObjectName("link_bandwidth");
    m_->setObjectName("microbatches");
    cache_->setObjectName("cache");
    hardware_->setObjectName("hardware");
    link_->setObjectName("link");
    overlap_->setObjectName("overlap");
    ideal_->setObjectName("ideal_links");
    for (std::size_t i = 0; i < boxes_.size(); ++i) {
      form->addRow(kShown[i].label, boxes_[i]);
      if (std::string_view(kShown[i].key) == "batch") break;  // then m, and P and V after it
    }
    form->addRow("micro-batches m", with_slider(m_, "microbatches_slider"));
    form->addRow(kShown[10].label, boxes_[10]);
    form->addRow(kShown[11].label, boxes_[11]);
    form->addRow("history cache", cache_);
    form->addRow("hardware", hardware_);
    form->addRow("link", link_);
    form->addRow("link GB/s", bandwidth_);
    form->addRow(overlap_);
    form->addRow(ideal_);
    if (auto* slider = inputs->findChild<QSlider*>("microbatches_slider")) slider->setMaximum(128);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    summary_ = new QLabel;
    summary_->setObjectName("pipeline_summary");
    summary_->setWordWrap(true);
    summary_->setTextFormat(Qt::RichText);
    gantt_ = new GanttWidget;
    auto* row = new QHBoxLayout;
    overhead_ = new ChartPanel;
    memory_ = new ChartPanel;
    row->addWidget(overhead_, 1);
    row->addWidget(memory_, 1);
    column->addWidget(summary_);
    // What the simulation takes from the state that has no input here (an opened scenario's
    // attention, parallel degrees, dense layers, ...): said, not dropped.
    taken_ = new QLabel;
    taken_->setObjectName("pipeline_taken");
    taken_->setWordWrap(true);
    column->addWidget(taken_);
    column->addWidget(gantt_, 3);
    column->addLayout(row, 2);
    three_columns(
        this, inputs, content,
        "<h3>Does the AttnRes traffic hide?</h3><p><b>What you see.</b> One training iteration on "
        "every rank: forward (blue) and backward (orange) chunks, and the transfers of activations "
        "plus the AttnRes block history (thin bars); hover a bar for its times, zoom with the "
        "wheel. "
        "Below left: the AttnRes overhead against the link bandwidth with the paper's 4 % claim "
        "and "
        "your bandwidth marked; right: each rank's live memory.</p>"
        "<p><b>Numbers.</b> The overhead compares the same schedule with the standard residual. "
        "The "
        "bubble is the busiest rank's idle time over its compute time; the closed form, 1F1B "
        "(P-1)/m and interleaved (P-1)/(V·m), is the same ratio for equal stages and free "
        "transfers "
        "(a dense model with L = 56, S = 7 and ideal links: 18.2 % simulated against 18.75 %). "
        "Unequal stages and "
        "transfers move the simulated one away from it.</p>"
        "<p><b>The model.</b> The paper's Kimi-Linear-like MoE model (27 layers, d = 2304, 8 of "
        "256 "
        "experts + 1 shared, Block AttnRes with S = 6) on H100s: at 200 GB/s the overhead is under "
        "4 % (docs/teaching.md).</p><p><b>Try:</b> lower the link bandwidth to 50 GB/s: the "
        "overhead passes 4 %; then raise m to 32 and it drops back under 4 %, or switch the cache "
        "to "
        "naive and it grows; turn overlap off; set experts to 0 for a dense model (less compute "
        "per byte of history sent: the traffic shows more).</p>");
    std::vector<QWidget*> watched(boxes_.begin(), boxes_.end());
    for (QWidget* w :
         std::initializer_list<QWidget*>{m_, cache_, hardware_, bandwidth_, overlap_, ideal_})
      watched.push_back(w);
    on_change(this, watched, [this] { recompute(); });
    // m moves in multiples of P where the interleaved schedule needs them (V > 1).
    const auto m_step = [this] {
      set_spin_step(m_, box("vpp")->value() > 1 ? box("pp")->value() : 1);
    };
    QObject::connect(box("pp"), &QSpinBox::valueChanged, this, m_step);
    QObject::connect(box("vpp"), &QSpinBox::valueChanged, this, m_step);
    show_state();
    m_step();
    QObject::connect(link_, &QComboBox::currentIndexChanged, this,
                     [this] { use_preset_bandwidth(); });
    QObject::connect(hardware_, &QComboBox::currentIndexChanged, this,
                     [this] { use_preset_bandwidth(); });
    // Another view changed the opened scenario's state: show it and simulate it.
    if (host_.explorer != nullptr) {
      host_.explorer->subscribe(this, [this] {
        state_ = host_.explorer->state();
        show_state();
        recompute();
      });
    }
  }

  // The link's bandwidth from the hardware preset (after a change of link or hardware).
  void use_preset_bandwidth() {
    try {
      ExplorerState picked = state_;
      take_hardware(hardware_, picked);
      const Hardware& hw = picked.hardware;
      const double bw = link_->currentData().toString() == "intra_node" ? hw.intra_node_bandwidth
                                                                        : hw.scale_out_bandwidth;
      bandwidth_->setValue(bw / 1e9);
    } catch (const Error& error) {
      show_error(error.what(), {hardware_});
    }
  }

  // The simulation's settings: the state's (an opened scenario's every key, explorer_state.hpp)
  // with the inputs shown here as set. An input still at the state's value leaves the state's
  // model as it is (a block list stays a list); a changed one is set as set_cost_input sets it.
  ExplorerState current_state() const {
    ExplorerState st = state_;
    // The model as given again, its derived fields cleared (layers from L, K and S from N or the
    // list): a changed input is then set as the only choice of its group (set_cost_input).
    CostInputs in = state_.model;
    in.layers = 0;
    in.block_layers = 0;
    in.block_size = 0;
    if (!in.block_sizes.empty()) in.blocks = 0;
    bool changed = false;
    for (std::size_t i = 0; i < boxes_.size(); ++i) {
      const CostInputField& field = *find_cost_input_field(kShown[i].key);
      if (boxes_[i]->value() == cost_input_value(state_.model, field)) continue;
      set_cost_input(in, kShown[i].key, boxes_[i]->value());
      changed = true;
    }
    if (changed) {
      if (in.experts == 0) in.active = in.shared = in.expert_ffn = in.dense_layers = 0;
      st.model = resolve_cost_inputs(in);
    }
    PipelineSettings& p = st.pipeline;
    if (st.model.vpp != state_.model.vpp) p.schedule = default_pipeline_schedule(st.model.vpp);
    take_hardware(hardware_, st);
    p.microbatches = m_->value();
    p.cache = parse_cache_policy(cache_->currentText().toStdString(), "cache");
    p.link = parse_enum(kPipelineLinkNames, link_->currentData().toString().toStdString(), "link",
                        "unknown link");
    // The bandwidth as shown (one decimal): an override only where it is not the state's.
    if (std::abs(bandwidth_->value() - shown_bandwidth(st) / 1e9) > 0.05)
      p.link_bandwidth = bandwidth_->value() * 1e9;
    p.overlap = overlap_->isChecked();
    p.ideal_links = ideal_->isChecked();
    return st;
  }
  PipelineSettings settings() const { return step_settings(current_state()); }
  // The state with the inputs as set; while they are invalid (the banner says why), the last
  // valid one.
  const ExplorerState* cost_state() const override {
    try {
      shown_state_ = current_state();
    } catch (const Error&) {
      shown_state_ = state_;
    }
    return &shown_state_;
  }
  nlohmann::json state_json() const override { return explorer_state_json(*cost_state()); }

  // The link bandwidth the state simulates with: its override, else the hardware's link.
  static double shown_bandwidth(const ExplorerState& st) {
    const PipelineSettings& p = st.pipeline;
    return p.link_bandwidth > 0          ? p.link_bandwidth
           : pipeline_link_intra_node(p) ? st.hardware.intra_node_bandwidth
                                         : st.hardware.scale_out_bandwidth;
  }

  // The state into the inputs (without change signals).
  void show_state() {
    std::vector<QSignalBlocker> blockers;
    for (QWidget* w : std::initializer_list<QWidget*>{m_, cache_, hardware_, link_, bandwidth_,
                                                      overlap_, ideal_})
      blockers.emplace_back(w);
    for (std::size_t i = 0; i < boxes_.size(); ++i) {
      blockers.emplace_back(boxes_[i]);
      boxes_[i]->setValue(
          static_cast<int>(cost_input_value(state_.model, *find_cost_input_field(kShown[i].key))));
    }
    show_state_hardware(hardware_, state_);
    const PipelineSettings& p = state_.pipeline;
    m_->setValue(p.microbatches);
    cache_->setCurrentText(QString::fromStdString(to_string(p.cache)));
    link_->setCurrentIndex(
        link_->findData(QString::fromStdString(enum_name(kPipelineLinkNames, p.link))));
    bandwidth_->setValue(shown_bandwidth(state_) / 1e9);
    overlap_->setChecked(p.overlap);
    ideal_->setChecked(p.ideal_links);
    blockers.clear();
    set_spin_step(m_, box("vpp")->value() > 1 ? box("pp")->value() : 1);
  }

  void recompute() override {
    taken_->setText(taken_text());
    PipelineSettings s;
    try {
      const ExplorerState shown = current_state();
      s = step_settings(shown);
      // The opened scenario's one state: the cost explorer computes what this view now shows.
      if (host_.explorer != nullptr) host_.explorer->publish(shown, this);
    } catch (const CostInputError& error) {
      show_error(error.what(), {field(error.field)});
      return;
    } catch (const Error& error) {
      show_error(error.what());
      return;
    }
    if (const auto problem =
            pipeline_settings_problem(s)) {  // the core's rules, on the input they name
      show_error(problem->message, {field(problem->field)});
      return;
    }
    run("pipeline simulation",
        [this, s](const Progress& progress) mutable -> std::function<void()> {
          // The bar: the simulation shown is the first half of the run, the bandwidth sweep the
          // second.
          PipelineSettings shown = s;
          shown.progress = step(progress, 0, 2);
          shown.record_timeline = true;  // the Gantt chart and the live memory draw it
          const PipelineReport report = evaluate_pipeline(shown);
          const ChartSpec gantt = pipeline_gantt_chart(report),
                          memory = pipeline_memory_chart(report);
          // The overhead against the link bandwidth, the paper's claim as a threshold line.
          ScenarioInputs base;
          base.cost = s.model;
          base.hardware = s.hardware;
          base.pipeline = s;
          base.pipeline->record_timeline = false;
          base.pipeline->progress =
              check_only(progress);  // each setting's simulation can be cancelled
          SweepSpec sweep;
          sweep.name = "pipeline_overhead_vs_link";
          sweep.title = "Overhead against link bandwidth";
          sweep.x = {"link_bandwidth_gbps", {3, 6, 12, 25, 50, 100, 200, 400, 800}};
          const auto current = static_cast<std::int64_t>(std::llround(s.link_bandwidth / 1e9));
          if (!s.ideal_links && current >= 1 &&
              std::find(sweep.x.values.begin(), sweep.x.values.end(), current) ==
                  sweep.x.values.end()) {
            sweep.x.values.push_back(current);
            std::sort(sweep.x.values.begin(), sweep.x.values.end());
          }
          sweep.metrics = {"pipeline.attnres_overhead_fraction"};
          sweep.log_x = true;
          sweep.log_y = true;  // from 1 % to 100 %: the 4 % line stays readable
          sweep.threshold = kClaimThreshold;
          sweep.claim = "training overhead < 4%";
          const ChartSpec overhead =
              sweep_chart(run_sweep(base, sweep, step(progress, 1, 2)), base);
          const bool over = report.attnres_overhead_fraction >= kClaimThreshold;
          const RankMemory peak = largest_rank(report.memory);
          const QString summary =
              QString(
                  "<b>step</b> %1 ms (standard residual %2 ms; pipeline iteration %12 ms) &nbsp; "
                  "<b>AttnRes overhead</b> "
                  "<span style='color:%3'><b>%4 %</b></span> (%5 the paper's 4 %) &nbsp; "
                  "<b>bubble</b> %6 % of the "
                  "busiest rank's compute (closed form for equal stages %7 %) &nbsp; <b>exposed "
                  "comm</b> %8 ms "
                  "&nbsp; <b>peak memory/rank</b> %9 GB: <span style='color:%10'>%13</span> (%11)")
                  .arg(report.step_time_s * 1e3, 0, 'g', 4)
                  .arg((report.standard.iteration_seconds + report.step_standard.dp) * 1e3, 0, 'g',
                       4)
                  .arg(over ? "#b03a2e" : "#1e7b34")
                  .arg(report.attnres_overhead_fraction * 100, 0, 'f', 2)
                  .arg(over ? "above" : "under")
                  .arg(report.bubble_fraction * 100, 0, 'f', 2)
                  .arg(report.closed_form_bubble * 100, 0, 'f', 2)
                  .arg(report.exposed_comm_s * 1e3, 0, 'g', 4)
                  .arg(simulated_peak_bytes(report) / 1e9, 0, 'g', 4)
                  .arg(peak.fits() ? "#1e7b34" : "#b03a2e")
                  .arg(QString::fromUtf8(kSimulatedMemory))
                  .arg(report.iteration_time_s * 1e3, 0, 'g', 4)
                  .arg(QString::fromStdString(fit_verdict(peak)).toHtmlEscaped());
          const double fraction = report.attnres_overhead_fraction;
          return [this, gantt, memory, overhead, summary, fraction] {
            gantt_->set_spec(gantt);
            memory_->set_spec(memory);
            overhead_->set_spec(overhead);
            summary_->setText(summary);
            overhead_fraction_ = fraction;
          };
        });
  }
  std::vector<ChartSpec> charts() const override {
    return {gantt_->spec(), overhead_->spec(), memory_->spec()};
  }
  // The overhead of the last result (the lesson test reads it).
  double overhead_fraction() const { return overhead_fraction_; }

  std::string scenario_problem(const Scenario& s) const override {
    if (!s.has_model) return {};
    std::vector<std::pair<const QSpinBox*, std::pair<std::int64_t, std::string>>> fields;
    for (std::size_t i = 0; i < boxes_.size(); ++i)
      fields.push_back(
          {boxes_[i],
           {cost_input_value(s.inputs, *find_cost_input_field(kShown[i].key)), kShown[i].key}});
    fields.push_back(
        {m_, {s.pipeline ? s.pipeline->microbatches : m_->value(), "[pipeline] microbatches"}});
    for (const auto& [box, value] : fields) {
      const std::string problem = range_problem(box, value.first, value.second);
      if (!problem.empty()) return std::string("pipeline: ") + problem;
    }
    return {};
  }

  bool set_state(const ExplorerState& state) override {
    state_ = state;
    show_state();
    recompute();
    return true;
  }

  void apply_scenario(const Scenario& s) override {
    if (!s.has_model) return;
    state_ = explorer_state(s);  // the one state the cost explorer opens too
    if (host_.explorer != nullptr) host_.explorer->open(state_);
    show_state();
    recompute();
  }

  // The pipeline settings (the model is the cost explorer's, the scenario's one [model]).
  void save_to(Scenario& s) const override {
    const PipelineSettings p = settings();
    // The scenario's one [model]: the cost explorer's when it wrote one, else this view's.
    if (!s.has_model) {
      s.inputs = p.model;
      s.has_model = true;
    }
    s.hardware = p.hardware;
    PipelineSettings saved = p;
    saved.model = s.has_model ? s.inputs : p.model;
    saved.link_bandwidth =
        std::round(bandwidth_->value() * 10.0) / 10.0 * 1e9;  // as shown: no 1.9999999 GB/s
    saved.progress = {};
    s.pipeline = saved;
    for (const char* section : {"time", "pipeline_sim"}) {
      if (std::find(s.sections.begin(), s.sections.end(), section) == s.sections.end())
        s.sections.emplace_back(section);
    }
  }
  // The model this tab simulates, as the cost explorer would take it.
  CostInputs model() const { return settings().model; }

 private:
  // "<span>of 80 GB: does not fit</span>" against the device memory ("" when it is unknown).
  // The settings the simulation takes from the state with no input here, in words: every cost
  // input not shown whose value differs from the engine's default, the strategy and the groups
  // whose collectives overlap compute.
  QString taken_text() const {
    // The engine's defaults for the same shape (what a field derives from L, d and N when unset).
    CostInputs shape;
    shape.sublayers = state_.model.sublayers;
    shape.d_model = state_.model.d_model;
    shape.blocks = state_.model.blocks;
    const CostInputs defaults = resolve_cost_inputs(shape);
    QStringList parts;
    for (const CostInputField& f : cost_input_fields()) {
      if (f.derived || box(f.key) || f.key == "blocks" || f.key == "block_layers") continue;
      // (0 is "as derived": kv_heads 0 = heads.)
      if (state_.model.*f.member != 0 && state_.model.*f.member != defaults.*f.member)
        parts << QString::fromUtf8(f.label.data(), static_cast<int>(f.label.size())) + " " +
                     QString::number(state_.model.*f.member);
    }
    for (const CostInputChoice& c : cost_input_choices()) {
      const std::string value = c.get(state_.model);
      if (value != c.get(defaults))
        parts << QString::fromUtf8(c.label.data(), static_cast<int>(c.label.size())) + " " +
                     QString::fromStdString(value);
    }
    if (!state_.model.block_sizes.empty()) parts << "uneven block list";
    parts << "strategy " + QString::fromStdString(to_string(state_.strategy));
    return "Also simulated (no input here; the cost explorer shows them): " + parts.join(", ") +
           ". Hardware: " + QString::fromStdString(state_.hardware_origin) + ".";
  }

  QSpinBox* box(std::string_view key) const {
    for (std::size_t i = 0; i < boxes_.size(); ++i)
      if (kShown[i].key == key) return boxes_[i];
    return nullptr;
  }
  QWidget* field(const std::string& key) const {
    if (key == "microbatches") return m_;
    if (QSpinBox* shown = box(key)) return shown;
    const CostInputField* input = find_cost_input_field(key);
    return input && !input->alternative.empty() ? box(input->alternative) : nullptr;
  }
  std::vector<QSpinBox*> boxes_;  // kShown's, in its order
  QSpinBox* m_;
  QLabel* taken_;
  // The one state the inputs start from (an opened scenario's, else the lesson's MoE model).
  ExplorerState state_ = pipeline_lesson_state();
  mutable ExplorerState shown_state_;  // cost_state(): the state with the inputs as set
  QComboBox *cache_, *hardware_, *link_;
  QDoubleSpinBox* bandwidth_;
  QCheckBox *overlap_, *ideal_;
  QLabel* summary_;
  GanttWidget* gantt_;
  ChartPanel *overhead_, *memory_;
  double overhead_fraction_ = 0.0;
};

}  // namespace

View* make_pipeline_view(const ViewHost& host, const ViewEntry& entry) {
  return new PipelineView(host, entry);
}

}  // namespace attnres::gui
