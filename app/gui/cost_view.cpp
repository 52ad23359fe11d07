// The cost explorer: the costs of every residual scheme against the number of blocks N
// (docs/math.md §3, docs/scheme-costs.md), and in tabs beside the charts the implementation
// strategies, the block layout, the calibration against public measurements (docs/math.md
// §3.6, docs/calibration.md), the memory per rank of a parallel run (docs/math.md §3.7), the
// simulated training step with its stage layout (docs/math.md §3.8) and the decision: which N
// meets the user's budgets (docs/math.md §3.9).
#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTabBar>
#include <QTableWidget>
#include <QVBoxLayout>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "attnres/block_layout.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/plan.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/strategy.hpp"
#include "attnres/sweep.hpp"
#include "cost_explanation.hpp"
#include "cost_panels.hpp"
#include "cost_sweeps.hpp"
#include "decision_panel.hpp"
#include "memory_panel.hpp"
#include "step_panel.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

class CostView : public View {
 public:
  CostView(const ViewHost& host, const ViewEntry& table_row) : View(table_row, host) {
    auto* inputs = new QWidget;
    auto* form = new QFormLayout(inputs);
    // The cost inputs shown, from the one table of cost inputs (labels, tooltips, ranges), opening
    // on the paper's example setting (docs/math.md §3).
    for (const char* key : kShownInputs) {
      const CostInputField& field = *find_cost_input_field(key);
      const auto value = key == std::string_view("block_layers")
                             ? 0
                             : static_cast<int>(cost_input_value(state_.model, field));
      QSpinBox* box =
          spin(static_cast<int>(field.input_min), static_cast<int>(field.input_max), value);
      box->setObjectName(QString::fromUtf8(field.key.data(), static_cast<int>(field.key.size())));
      box->setToolTip(QString::fromUtf8(field.help.data(), static_cast<int>(field.help.size())));
      fields_[std::string(key)] = box;
    }
    blocks_ = fields_.at("blocks");
    // K: 0 leaves the choice to N; a block list overrides both (CostInputs: one choice).
    block_layers_ = fields_.at("block_layers");
    block_layers_->setSpecialValueText("off (N)");
    block_layers_->setToolTip(block_layers_->toolTip() +
                              "; 0: off, N decides. A block list overrides both");
    block_sizes_ = new QLineEdit;
    block_sizes_->setObjectName("block_sizes");
    block_sizes_->setPlaceholderText("e.g. 6,6,4");
    block_sizes_->setClearButtonEnabled(true);
    block_sizes_->setToolTip(
        "Uneven blocks: sublayers per block in model order, e.g. 6,6,4 (the sum must be L). "
        "Overrides N and K; empty: equal blocks (docs/math.md §3.6)");
    strategy_ = new QComboBox;
    strategy_->setObjectName("strategy");
    for (const auto& entry : kStrategyNames) {
      strategy_->addItem(QString::fromUtf8(entry.name.data(), static_cast<int>(entry.name.size())));
      strategy_->setItemData(strategy_->count() - 1,
                             QString::fromStdString(strategy_summary(entry.value)),
                             Qt::ToolTipRole);
    }
    strategy_->setCurrentText("fused_one_shot");
    strategy_->setToolTip(
        "Implementation strategy of the depth read highlighted in the Strategies tab (docs/math.md "
        "§3.6); the tensors it saves for backward count in the Memory tab (docs/math.md §3.7)");
    dtype_ = choice_combo(*find_cost_input_choice("dtype"));
    hardware_ = hardware_combo();
    hardware_->setObjectName("hardware");
    show_hardware();
    sweep_ = new QComboBox;
    sweep_->addItem("(open a scenario to see its sweeps)");
    // The quality on the right-hand axis of the I/O, history and pipeline charts
    // (docs/quality.md): the published band works for any L, Fig. 6 is the paper's L = 32 model.
    quality_ = new QComboBox;
    quality_->setObjectName("quality_overlay");
    quality_->addItem("published band (share of Full's gain)", QString("published_band"));
    quality_->addItem("paper Fig. 6 losses (L = 32)", QString("paper_fig6"));
    quality_->addItem("none", QString());
    quality_->setToolTip(
        "The right-hand axis of the I/O, history and pipeline charts: the published share of Full "
        "AttnRes's gain that Block recovers at each N (any L; sources under the charts; "
        "docs/quality.md), or the paper's Fig. 6 losses (its 32-sublayer model)");
    // Two scheme pickers (docs/scheme-costs.md): every named scheme of the cost engine.
    scheme_a_ = named_scheme_picker("block");
    scheme_b_ = named_scheme_picker("full");
    for (const char* key : kShownInputs) {
      const CostInputField& field = *find_cost_input_field(key);
      QSpinBox* box = fields_.at(key);
      const QString label =
          QString::fromUtf8(field.label.data(), static_cast<int>(field.label.size()));
      if (box == blocks_) {
        blocks_row_ = with_slider(blocks_, "blocks_slider");
        form->addRow(label, blocks_row_);
      } else {
        form->addRow(label, box);
      }
      if (box == block_layers_) form->addRow("block sizes", block_sizes_);
      if (std::string_view(key) == "batch") form->addRow("dtype", dtype_);
    }
    form->addRow("hardware", hardware_);
    form->addRow("scenario sweep", sweep_);
    form->addRow("quality axis", quality_);
    form->addRow("scheme A", scheme_a_);
    form->addRow("scheme B", scheme_b_);
    form->addRow("strategy", strategy_);
    add_model_and_cluster_inputs(form);
    blocks_->setToolTip(blocks_->toolTip() + "; the charts sweep every N and mark this one");
    hardware_->setToolTip(
        "The GPU of the time, bandwidth and capacity figures: a preset, or an opened scenario's "
        "[hardware] as it is written (its file or overrides)");
    sweep_->setToolTip("A sweep of the opened scenario, drawn instead of the four charts");
    scheme_a_->setToolTip(
        "Scheme A of the comparison table and the I/O chart (docs/scheme-costs.md)");
    scheme_b_->setToolTip(
        "Scheme B of the comparison table and the I/O chart (docs/scheme-costs.md)");
    sweep_->setObjectName("scenario_sweep");
    scheme_a_->setObjectName("scheme_a");
    scheme_b_->setObjectName("scheme_b");
    auto* charts_page = new QWidget;
    charts_page->setObjectName("charts_tab");
    auto* grid = new QGridLayout(charts_page);
    grid->setContentsMargins(0, 0, 0, 0);
    for (int i = 0; i < 4; ++i) {
      panels_.push_back(new ChartPanel);
      panels_.back()->setObjectName(QString("cost_chart_%1").arg(i));
      grid->addWidget(panels_.back(), i / 2, i % 2);
    }
    scenario_panel_ = new ChartPanel;
    scenario_panel_->setVisible(false);
    grid->addWidget(scenario_panel_, 0, 0, 2, 2);
    table_ = new QTableWidget;
    table_->setColumnCount(3);
    table_->setHorizontalHeaderLabels({"quantity", "value", "unit"});
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->setMaximumHeight(190);
    grid->addWidget(table_, 2, 0);
    compare_ = new QTableWidget;
    compare_->setObjectName("scheme_comparison");
    compare_->setColumnCount(3);
    compare_->setHorizontalHeaderLabels({"quantity", "scheme A", "scheme B"});
    compare_->verticalHeader()->setVisible(false);
    compare_->setWordWrap(false);
    compare_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
    compare_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
    compare_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
    compare_->setMaximumHeight(190);
    grid->addWidget(compare_, 2, 1);
    fig6_warning_ = new QLabel;  // the core's caveat of the Fig. 6 overlay on another model
    fig6_warning_->setObjectName("fig6_warning");
    fig6_warning_->setWordWrap(true);
    fig6_warning_->setVisible(false);
    grid->addWidget(fig6_warning_, 3, 0, 1, 2);
    // The tabs on implementations (docs/math.md §3.6, docs/calibration.md) beside the charts.
    strategies_ = new StrategyPanel;
    layout_panel_ = new LayoutPanel;
    calibration_ = new CalibrationPanel;
    memory_ = new MemoryPanel;
    step_ = new StepPanel;
    decision_ = new DecisionPanel;
    // A tab bar over a stack rather than a QTabWidget: the view's error banner and stale marks
    // go over the pages (set_content below), never over the tab bar.
    tabs_ = new QTabBar;
    tabs_->setObjectName("cost_tabs");
    tabs_->setDrawBase(false);
    tabs_->setExpanding(false);
    pages_ = new QStackedWidget;
    pages_->setObjectName("cost_pages");
    pages_->setFrameShape(QFrame::StyledPanel);
    // The pages in the order of the view table's row (its titles).
    QWidget* const pages[] = {charts_page, strategies_, layout_panel_, calibration_,
                              memory_,     step_,       decision_};
    for (std::size_t i = 0; i < std::size(pages); ++i) {
      tabs_->addTab(page_title(table_row, i));
      pages_->addWidget(pages[i]);
    }
    tabs_->setTabToolTip(0, "Costs against the number of blocks N (docs/math.md §3.1–3.3)");
    tabs_->setTabToolTip(1,
                         "The four implementation strategies side by side: bytes, launches, "
                         "memory, time (docs/math.md §3.6)");
    tabs_->setTabToolTip(2, "The blocks against the pipeline's chunks (docs/math.md §3.6)");
    tabs_->setTabToolTip(3, "Modelled against measured overheads (docs/calibration.md)");
    tabs_->setTabToolTip(4,
                         "Memory per GPU of every pipeline rank against the device's capacity: "
                         "does it fit? (docs/math.md §3.7)");
    tabs_->setTabToolTip(5,
                         "One training step simulated with AttnRes and with the standard "
                         "residual: what AttnRes adds, part by part, and the stage layout "
                         "(docs/math.md §3.8)");
    tabs_->setTabToolTip(6,
                         "Which N meets your budgets (overhead, memory, pipeline traffic): "
                         "every N of a grid simulated as one step (docs/math.md §3.9)");
    QObject::connect(tabs_, &QTabBar::currentChanged, pages_, &QStackedWidget::setCurrentIndex);
    // The plan runs while its tab is shown (it simulates every setting of the grid): showing the
    // tab runs it for inputs changed meanwhile.
    QObject::connect(tabs_, &QTabBar::currentChanged, this, [this] {
      if (plan_dirty_ && pages_->currentWidget() == decision_) recompute_plan();
    });
    auto* content = new QWidget;
    auto* content_layout = new QVBoxLayout(content);
    content_layout->setContentsMargins(0, 0, 0, 0);
    content_layout->setSpacing(2);
    content_layout->addWidget(tabs_);
    content_layout->addWidget(pages_, 1);
    three_columns(this, inputs, content, cost_explorer_explanation());
    // The folded groups: open for the width above (the column fits them opened), then folded
    // but Parallelism, which the Memory tab is about.
    for (auto* section : sections_)
      if (section->objectName() != "parallel_inputs") section->set_expanded(false);
    set_content(pages_);
    std::vector<QWidget*> watched = {dtype_,    hardware_,    scheme_a_,
                                     scheme_b_, block_sizes_, quality_};
    for (const auto& entry : lists_) watched.push_back(entry.second);
    for (const auto& entry : fields_) watched.push_back(entry.second);
    for (const auto& entry : choices_) watched.push_back(entry.second);
    on_change(this, watched, [this] { recompute(); });
    QObject::connect(sweep_, &QComboBox::currentIndexChanged, this,
                     [this] { show_scenario_sweep(); });
    // Setting N (the user, a scenario, a lesson step) makes N decide again, as set_cost_input
    // does: the list and K are cleared. (The N shown for a list or K is set with signals
    // blocked.)
    // N's slider runs over 1..L (N > L can still be typed: the message says why it is wrong).
    QSpinBox* sublayers = fields_.at("sublayers");
    const auto follow_l = [this, sublayers] {
      set_slider_range(blocks_, 1, std::max(1, sublayers->value()));
    };
    QObject::connect(sublayers, &QSpinBox::valueChanged, this, follow_l);
    follow_l();
    QObject::connect(blocks_, &QSpinBox::valueChanged, this, [this] {
      const QSignalBlocker list_blocker(block_sizes_), k_blocker(block_layers_);
      block_sizes_->clear();
      block_layers_->setValue(0);
    });
    // The picker moves the highlight and changes the saved tensors of the Memory tab and the
    // kernels that time the step.
    QObject::connect(strategy_, &QComboBox::currentIndexChanged, this, [this] {
      strategies_->highlight(parse_strategy(strategy_->currentText().toStdString(), "strategy"));
      recompute_memory();
      recompute_step();
      recompute_plan();
    });
    QObject::connect(memory_->workload_combo(), &QComboBox::currentIndexChanged, this,
                     [this] { recompute_memory(); });
    // The in-flight count changes the Memory, Step and Decision tabs only.
    QObject::connect(microbatches_, &QSpinBox::valueChanged, this, [this] {
      recompute_memory();
      recompute_step();
      recompute_plan();
    });
    std::vector<QWidget*> overlap;
    for (QCheckBox* box : step_->overlap_boxes()) overlap.push_back(box);
    on_change(this, overlap, [this] {
      recompute_step();
      recompute_plan();
    });
    on_change(this, decision_->inputs(), [this] { recompute_plan(); });
    strategies_->highlight(parse_strategy(strategy_->currentText().toStdString(), "strategy"));
    if (host_.explorer != nullptr) host_.explorer->subscribe(this, [this] { take_shared_state(); });
  }

  // The inputs as set; throws attnres::Error on a block list that does not parse. N, K and the
  // list are one choice: a list overrides K, K overrides N.
  CostInputs inputs() const { return read_inputs(nullptr); }

  // As inputs(); a list that does not parse names its line edit in `culprit`.
  CostInputs read_inputs(QWidget** culprit) const {
    CostInputs in;
    for (const auto& [key, box] : fields_) in.*find_cost_input_field(key)->member = box->value();
    for (const auto& [key, combo] : choices_)
      find_cost_input_choice(key)->set(in, combo->currentText().toStdString(), key);
    for (const auto& [key, edit] : lists_) {
      if (culprit) *culprit = edit;
      const CostInputList& list = *find_cost_input_list(key);
      const std::string text = edit->text().trimmed().toStdString();
      if (!text.empty()) in.*list.member = parse_block_list(text, std::string(list.label));
    }
    if (culprit) *culprit = block_sizes_;
    const std::string list = block_sizes_->text().trimmed().toStdString();
    if (!list.empty()) {
      in.block_sizes = parse_block_list(list, "block sizes");
      in.blocks = 0;
      in.block_layers = 0;
    } else if (in.block_layers > 0) {
      in.blocks = 0;
    }
    return in;
  }

  void recompute() override {
    CostInputs in;
    last_ = false;  // the Memory tab's picks recompute only from valid inputs
    QWidget* culprit = nullptr;
    try {
      in = read_inputs(&culprit);
    } catch (const Error& error) {
      show_error(error.what(), {culprit});
      return;
    }
    const bool n_decides = in.blocks != 0;
    if (auto problem = try_resolve_cost_inputs(in)) {
      // The engine's message (CostInputError's field and text), at the input it names: a folded
      // group opens to show it.
      QWidget* input = field(problem->field);
      if (input) reveal_in_sections(input);
      show_error(problem->message, {input});
      return;
    }
    clear_error();
    // N follows a list or K (shown, not editable, while one of them decides).
    blocks_row_->setEnabled(n_decides);
    if (!n_decides && blocks_->value() != in.blocks && in.blocks <= blocks_->maximum()) {
      const QSignalBlocker blocker(blocks_);
      blocks_->setValue(static_cast<int>(in.blocks));
    }
    set_slider_range(blocks_, 1, std::max(1, fields_.at("sublayers")->value()));  // and its handle
    // The state takes what the inputs say: the model (V changed: its schedule with it), the picked
    // preset (the scenario's own hardware stays until another is picked), m, strategy, overlap.
    if (in.vpp != state_.model.vpp) state_.pipeline.schedule = default_pipeline_schedule(in.vpp);
    state_.model = in;
    try {
      take_hardware(hardware_, state_);
    } catch (const Error& error) {
      show_error(error.what(), {hardware_});
      return;
    }
    take_pickers();
    const Hardware hw = state_.hardware;
    last_ = true;
    recompute_memory();
    recompute_step();
    recompute_plan();
    // The strategies and the layout: closed forms, but Full's kernel lists grow with L.
    run("strategies and layout", [this, in, hw](const Progress& progress) -> std::function<void()> {
      StrategyComparison comparison = compare_strategies(in, hw);
      if (progress && !progress(0, 0)) return {};
      std::vector<LayoutBlockRow> rows =
          layout_rows(block_layout_of(in), in.pp, in.vpp, stage_last_sublayers(in));
      return [this, comparison = std::move(comparison), rows = std::move(rows), in]() mutable {
        strategies_->set_comparison(std::move(comparison));
        layout_panel_->set_rows(rows, in);
      };
    });
    // The four sweeps and the table off the GUI thread (a large L makes many settings).
    const std::string scheme_a = scheme_a_->currentData().toString().toStdString();
    const std::string scheme_b = scheme_b_->currentData().toString().toStdString();
    const std::string quality = quality_->currentData().toString().toStdString();
    run("cost sweeps",
        [this, in, hw, scheme_a, scheme_b,
         quality](const Progress& progress) -> std::function<void()> {
          CostSweepResult result =
              cost_explorer_sweeps(in, hw, scheme_a, scheme_b, quality, progress);
          return [this, result = std::move(result)]() mutable {
            fig6_warning_->setText(QString::fromStdString(result.warning));
            fig6_warning_->setVisible(!result.warning.empty());
            charts_ = std::move(result.charts);
            for (std::size_t i = 0; i < panels_.size(); ++i) panels_[i]->set_spec(charts_[i]);
            table_->setRowCount(0);
            for (const auto& row : result.rows) {
              const int r = table_->rowCount();
              table_->insertRow(r);
              for (int c = 0; c < 3; ++c) {
                table_->setItem(
                    r, c,
                    new QTableWidgetItem(QString::fromStdString(row[static_cast<std::size_t>(c)])));
              }
            }
            table_->resizeColumnsToContents();
            compare_->setRowCount(0);
            for (const auto& row : result.compared) {
              const int r = compare_->rowCount();
              compare_->insertRow(r);
              for (int c = 0; c < 3; ++c) {
                auto* item =
                    new QTableWidgetItem(QString::fromStdString(row[static_cast<std::size_t>(c)]));
                item->setToolTip(item->text());  // long formulas and reasons are elided in the cell
                compare_->setItem(r, c, item);
              }
            }
          };
        });
  }

  std::vector<ChartSpec> charts() const override {
    std::vector<ChartSpec> all = charts_;
    if (showing_scenario_) all.insert(all.begin(), scenario_panel_->spec());
    if (!all.empty()) all.push_back(calibration_->spec());
    return all;
  }

  std::string scenario_problem(const Scenario& s) const override {
    if (!s.has_model) return {};
    for (const char* key : kShownInputs) {                    // in the form's order: L first
      if (std::string_view(key) == "block_layers") continue;  // set to 0: N decides
      const std::string problem = range_problem(
          fields_.at(key), cost_input_value(s.inputs, *find_cost_input_field(key)), key);
      if (!problem.empty()) return std::string("cost explorer: ") + problem;
    }
    if (s.pipeline) {
      const std::string problem =
          range_problem(microbatches_, s.pipeline->microbatches, "[pipeline] microbatches");
      if (!problem.empty()) return std::string("cost explorer: ") + problem;
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
    scenario_ = s;
    // The one state of the opened scenario (explorer_state: what `attnres report` computes with);
    // without [model] the explorer keeps its model and takes the scenario's hardware.
    if (s.has_model) {
      state_ = explorer_state(s);
      if (host_.explorer != nullptr) host_.explorer->open(state_);
    } else if (s.hardware) {
      state_.hardware = *s.hardware;
      state_.hardware_preset = matching_preset(*s.hardware);
      state_.hardware_origin = "scenario [hardware]";
    }
    show_state();
    {
      const QSignalBlocker blocker(sweep_);
      sweep_->clear();
      sweep_->addItem("(none: the four charts)");
      for (const auto& sweep : s.sweeps) sweep_->addItem(QString::fromStdString(sweep.name));
    }
    recompute();
    show_scenario_sweep();
  }

  // The state into the inputs (without change signals): the model, the hardware, m, the
  // overlapped groups, the strategy and the [plan] budgets and grid.
  void show_state() {
    {
      const QSignalBlocker dtype_blocker(dtype_);
      for (const auto& [key, box] : fields_) {
        const QSignalBlocker blocker(box);
        box->setValue(
            static_cast<int>(cost_input_value(state_.model, *find_cost_input_field(key))));
      }
      for (const auto& [key, combo] : choices_) {
        const QSignalBlocker blocker(combo);
        combo->setCurrentText(
            QString::fromStdString(find_cost_input_choice(key)->get(state_.model)));
      }
      for (const auto& [key, edit] : lists_) {
        const QSignalBlocker list_blocker(edit);
        QStringList values;
        for (const std::int64_t v : state_.model.*find_cost_input_list(key)->member)
          values << QString::number(v);
        edit->setText(values.join(","));
      }
      // The resolved inputs carry N (and the list when there is one): K stays off.
      const QSignalBlocker k_blocker(block_layers_), list_blocker(block_sizes_);
      block_layers_->setValue(0);
      QStringList sizes;
      for (const std::int64_t size : state_.model.block_sizes) sizes << QString::number(size);
      block_sizes_->setText(sizes.join(","));
    }
    {
      const QSignalBlocker blocker(microbatches_);
      microbatches_->setValue(state_.pipeline.microbatches);
    }
    step_->set_overlap(state_.pipeline.comm_overlap);
    decision_->apply_plan(state_.plan ? *state_.plan : ScenarioPlan{}, state_.model.sublayers);
    show_hardware();
    const QSignalBlocker blocker(strategy_);
    strategy_->setCurrentText(QString::fromStdString(to_string(state_.strategy)));
    strategies_->highlight(state_.strategy);
  }

  void show_hardware() { show_state_hardware(hardware_, state_); }

  // The scenario's own sweep, drawn by the same core builder as `attnres report`.
  void show_scenario_sweep() {
    const int index = sweep_->currentIndex() - 1;
    const bool show = scenario_ && index >= 0 && index < static_cast<int>(scenario_->sweeps.size());
    showing_scenario_ = show;
    if (show) tabs_->setCurrentIndex(0);
    scenario_panel_->setVisible(show);
    for (auto* panel : panels_) panel->setVisible(!show);
    if (!show) return;
    ScenarioInputs inputs;
    try {
      inputs = scenario_->scenario_inputs();
    } catch (const Error& error) {
      show_error(error.what());
      return;
    }
    const SweepSpec spec = scenario_->sweeps[static_cast<std::size_t>(index)];
    run("scenario sweep",
        [this, inputs, spec](const Progress& progress) mutable -> std::function<void()> {
          // A sweep of pipeline metrics simulates a schedule per setting: let Cancel stop inside
          // one.
          if (inputs.pipeline) inputs.pipeline->progress = check_only(progress);
          const ChartSpec chart = sweep_chart(run_sweep(inputs, spec, progress), inputs);
          return [this, chart] { scenario_panel_->set_spec(chart); };
        });
  }

  void show_page(int index) override { tabs_->setCurrentIndex(index); }

  void save_to(Scenario& s) const override {
    // The opened scenario's other tables stay; the [train] table is the Training view's to write
    // (save_training_state: as read while its form is unchanged, the data path made absolute).
    if (scenario_) s = *scenario_;
    ExplorerState state = state_;
    state.model = resolve_cost_inputs(inputs());
    state.strategy = parse_strategy(strategy_->currentText().toStdString(), "strategy");
    state.pipeline.microbatches = microbatches_->value();
    state.pipeline.comm_overlap = step_->overlap();
    save_explorer_state(state, s);
  }
  // The state the tabs computed with last (after recompute()): what the dump writes.
  nlohmann::json state_json() const override { return explorer_state_json(state_); }
  const ExplorerState* cost_state() const override { return &state_; }

  // The Memory tab for the last valid inputs: the workload and strategy pickers change it alone.
  // The tabs' own inputs into the state: m, the overlapped groups and the strategy (they recompute
  // the Memory, Step and Decision tabs alone).
  void take_pickers() {
    state_.pipeline.microbatches = microbatches_->value();
    state_.pipeline.comm_overlap = step_->overlap();
    state_.strategy = parse_strategy(strategy_->currentText().toStdString(), "strategy");
    // The opened scenario's one state: the Pipeline view computes what this view now shows.
    if (host_.explorer != nullptr) host_.explorer->publish(state_, this);
  }

  // Another view changed the opened scenario's state: show it and compute it.
  void take_shared_state() {
    state_ = host_.explorer->state();
    show_state();
    recompute();
  }

  void recompute_memory() {
    if (!last_) return;
    take_pickers();
    ExplorerState state = state_;
    state.workload = memory_->workload();
    run("memory per rank", [this, state](const Progress&) -> std::function<void()> {
      MemoryResult result = compute_memory(state);
      return
          [this, result = std::move(result)]() mutable { memory_->set_result(std::move(result)); };
    });
  }

  // The simulated step of the state (docs/math.md §3.8), as `attnres report` simulates it: the
  // scenario's [pipeline] table (else the engine's defaults) with the explorer's model, hardware,
  // m, strategy and overlapped groups.
  PipelineSettings step_settings() const { return gui::step_settings(state_); }

  // The Step tab for the last valid inputs; the simulation's own rules (m x P·V, ...) are said
  // in the tab, the rest of the explorer stays usable.
  void recompute_step() {
    if (!last_) return;
    take_pickers();
    PipelineSettings settings = step_settings();
    if (const auto problem = pipeline_settings_problem(settings)) {
      step_->set_problem(problem->message);
      return;
    }
    run("training step",
        [this, settings](const Progress& progress) mutable -> std::function<void()> {
          settings.progress = progress;
          StepResult result = compute_step(settings);
          return [this, result = std::move(result)]() mutable {
            step_->set_result(std::move(result));
          };
        });
  }

  // The Decision tab's plan (docs/math.md §3.9) while the tab is shown; else it runs when shown.
  void recompute_plan() {
    if (pages_->currentWidget() != decision_) {
      plan_dirty_ = true;
      return;
    }
    plan_dirty_ = false;
    if (!last_) return;
    take_pickers();
    PlanRequest request = decision_->request(state_.model.sublayers);
    if (!request.problem.empty()) {
      decision_->set_problem(request.problem, request.culprit);
      return;
    }
    const PipelineSettings base = step_settings();
    if (const auto problem = pipeline_settings_problem(base)) {
      decision_->set_problem("the step cannot be simulated: " + problem->message);
      return;
    }
    run("decision plan",
        [this, base,
         request = std::move(request)](const Progress& progress) -> std::function<void()> {
          PlanResult plan = make_plan(base, request.grid, request.budgets, progress);
          return
              [this, plan = std::move(plan)]() mutable { decision_->set_result(std::move(plan)); };
        });
  }

 private:
  // A combo box of one choice input of the table (names, tooltip from its help); the object name is
  // its key.
  QComboBox* choice_combo(const CostInputChoice& choice) {
    auto* combo = new QComboBox;
    combo->setObjectName(QString::fromUtf8(choice.key.data(), static_cast<int>(choice.key.size())));
    for (const auto& name : choice.names) combo->addItem(QString::fromStdString(name));
    combo->setCurrentText(QString::fromStdString(choice.get(CostInputs{})));
    combo->setToolTip(QString::fromUtf8(choice.help.data(), static_cast<int>(choice.help.size())));
    choices_[std::string(choice.key)] = combo;
    return combo;
  }

  // The other cost inputs (docs/math.md §3.7), generated from the two tables: every integer field
  // and every choice the form above does not show, in folding groups by their TOML table, each
  // table's choices first, at the engine's defaults.
  void add_model_and_cluster_inputs(QFormLayout* form) {
    std::set<std::string_view> shown;
    for (const char* key : kShownInputs) shown.insert(key);
    struct Group {
      const char* title;
      const char* name;
      std::vector<std::string_view> tables;
    };
    const Group groups[] = {{"Architecture", "architecture_inputs", {"model", "attention"}},
                            {"Mixture of experts", "moe_inputs", {"moe"}},
                            {"Parallelism", "parallel_inputs", {"parallel", "sequence"}}};
    const CostInputs defaults;
    auto text = [](std::string_view s) {
      return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
    };
    for (const Group& group : groups) {
      auto* section = new CollapsibleSection(group.title, group.name);
      sections_.push_back(section);
      QFormLayout* rows = section->form();
      for (const std::string_view table : group.tables) {
        for (const CostInputChoice& choice : cost_input_choices()) {
          if (choice.section != table || choices_.count(std::string(choice.key))) continue;
          rows->addRow(text(choice.label), choice_combo(choice));
        }
        for (const CostInputField& f : cost_input_fields()) {
          if (f.section != table || shown.count(f.key) || shown.count(f.alternative)) continue;
          QSpinBox* box = spin(static_cast<int>(f.input_min), static_cast<int>(f.input_max),
                               static_cast<int>(defaults.*f.member));
          box->setObjectName(text(f.key));
          box->setToolTip(text(f.help));
          fields_[std::string(f.key)] = box;
          rows->addRow(text(f.label), box);
        }
        // The lists of the table (the hybrid by list, the stage layout); the block list has its
        // own input beside K above.
        for (const CostInputList& list : cost_input_lists()) {
          if (list.section != table || list.key == "block_sizes") continue;
          auto* edit = new QLineEdit;
          edit->setObjectName(text(list.key));
          edit->setPlaceholderText("e.g. " + text(list.example));
          edit->setClearButtonEnabled(true);
          QString help = text(list.help);
          if (!help.isEmpty()) help[0] = help[0].toUpper();
          edit->setToolTip(help + " (docs/math.md " + (table == "parallel" ? "§3.3" : "§3.7") +
                           ")");
          lists_[std::string(list.key)] = edit;
          rows->addRow(text(list.label), edit);
        }
        if (table == "parallel") {
          microbatches_ = spin(1, kMaxMicrobatches, MemorySettings{}.microbatches);
          microbatches_->setObjectName("microbatches");
          microbatches_->setToolTip(
              "Micro-batches m per step: how many the pipeline schedule keeps in flight, whose "
              "activations the Memory tab counts (docs/math.md §3.7), and how many the Step tab "
              "simulates (docs/math.md §3.8)");
          rows->addRow("micro-batches m", microbatches_);
        }
      }
      form->addRow(section);
    }
  }

  // The integer inputs shown in the form (they open on default_explorer_state()).
  static constexpr const char* kShownInputs[] = {
      "sublayers", "blocks", "block_layers", "d_model",    "tokens", "batch",
      "pp",        "vpp",    "streams",      "seq_shards", "chunk"};

  // The input behind a CostInputs field named by an error (or behind its alternative: block_size
  // is set through N here, layers through L).
  QWidget* field(const std::string& key) const {
    if (key == "block_sizes") return block_sizes_;
    if (auto it = lists_.find(key); it != lists_.end()) return it->second;
    if (auto it = fields_.find(key); it != fields_.end()) return it->second;
    if (auto it = choices_.find(key); it != choices_.end()) return it->second;
    const CostInputField* input = find_cost_input_field(key);
    if (!input || input->alternative.empty()) return nullptr;
    auto it = fields_.find(std::string(input->alternative));
    return it == fields_.end() ? nullptr : it->second;
  }
  std::map<std::string, QSpinBox*> fields_;    // CostInputs key -> its input
  std::map<std::string, QComboBox*> choices_;  // choice key (dtype, attention, ...) -> its input
  std::vector<CollapsibleSection*> sections_;  // Architecture, Mixture of experts, Parallelism
  std::map<std::string, QLineEdit*> lists_;    // list key (full_attention_layers, stage_layers)
  QSpinBox* microbatches_ = nullptr;           // the Memory and Step tabs' m
  QSpinBox* blocks_;                           // fields_["blocks"], with its slider
  QWidget* blocks_row_ = nullptr;              // blocks_ and its slider
  QSpinBox* block_layers_;                     // fields_["block_layers"]: K, 0 = off
  QLineEdit* block_sizes_;                     // an uneven list "6,6,4"
  QComboBox *dtype_, *hardware_, *sweep_, *scheme_a_, *scheme_b_, *strategy_;
  QTabBar* tabs_;
  QStackedWidget* pages_;
  StrategyPanel* strategies_;
  LayoutPanel* layout_panel_;
  CalibrationPanel* calibration_;
  MemoryPanel* memory_;
  StepPanel* step_;
  DecisionPanel* decision_;
  bool plan_dirty_ = true;  // the inputs changed while the Decision tab was hidden
  // The one state the tabs compute from (explorer_state.hpp): the inputs write into it, an opened
  // scenario replaces it. `last_`: it holds valid inputs (the tabs' own pickers recompute then).
  ExplorerState state_ = default_explorer_state();
  bool last_ = false;
  std::vector<ChartPanel*> panels_;
  ChartPanel* scenario_panel_;
  QTableWidget *table_, *compare_;
  QLabel* fig6_warning_;  // the quality axis's note: the Fig. 6 caveat or the band's sources
  QComboBox* quality_;
  std::vector<ChartSpec> charts_;
  std::optional<Scenario> scenario_;
  bool showing_scenario_ = false;
};

}  // namespace

View* make_cost_view(const ViewHost& host, const ViewEntry& entry) {
  return new CostView(host, entry);
}

}  // namespace attnres::gui
