// The Training view's form (training_view.hpp; docs/training.md): the inputs (data, model and
// run, the schemes trained side by side, Start / Stop / Save models...), the content grid (status,
// loss, α, output and gradient RMS) and the explanation. The form is a binding of the view's
// TrainingState (training_state.hpp, docs/architecture.md "The GUI's models"): the widgets show it
// and write into it, and the ranges of its fields are the state's. The run lives in
// training_run.cpp, the drawing in training_charts.cpp.
#include "training_view.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <initializer_list>

#include "attnres/cost.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/scenario.hpp"
#include "training_run.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

QSpinBox* spin(int low, int high, int value, const char* name) {
  auto* box = new QSpinBox;
  box->setRange(low, high);
  box->setValue(value);
  box->setObjectName(name);
  return box;
}

QSpinBox* spin(TrainingRange<int> range, int value, const char* name) {
  return spin(range.low, range.high, value, name);
}

QDoubleSpinBox* dspin(TrainingRange<double> range, double value, int decimals, double step,
                      const char* name) {
  auto* box = new QDoubleSpinBox;
  box->setRange(range.low, range.high);
  box->setDecimals(decimals);
  box->setSingleStep(step);
  box->setValue(value);
  box->setObjectName(name);
  return box;
}

}  // namespace

TrainingView::TrainingView(const ViewHost& host, const ViewEntry& table_row)
    : View(table_row, host) {
  QPushButton *browse = nullptr, *builtin = nullptr;
  QWidget* scroll = make_inputs(browse, builtin);
  QWidget* content = make_content();

  auto* panel = new ExplanationPanel(
      "<h3>Training</h3><p><b>What you see.</b> Tiny byte-level models trained side by side on the "
      "same text "
      "from the same initial weights, one AdamW step each in turn. Left: training loss (lines) and "
      "validation loss (markers) in nats per byte; a model that knows nothing scores ln 256 "
      "&asymp; 5.55. "
      "Right: the mean depth-attention weights &alpha; of the chosen AttnRes scheme, updated at "
      "each "
      "validation. Below: each sublayer's output RMS and output-gradient RMS at the latest step "
      "(the "
      "paper's Fig. 5b and 5c).</p><p><b>Try:</b> compare the curves of the three schemes; watch "
      "&alpha; "
      "move away from the uniform start (zero queries give plain means); add layers and see the "
      "standard "
      "residual's outputs shrink relative to its growing sum.</p><p>The defaults train in seconds "
      "on two "
      "cores. <b>Save models...</b> writes one checkpoint directory per scheme (config.json, "
      "model.safetensors, optimizer state, log) that <code>attnres train --resume</code> continues "
      "with the "
      "same data file (the built-in sample lives only in memory). "
      "See docs/training.md.</p>");
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(scroll);
  layout->addWidget(content, 1);
  layout->addWidget(panel);
  set_content(content);

  connect_actions(browse, builtin);
  bind_inputs();
  redraw();
  redraw_alpha();
}

// Inputs (left, scrollable: the form is long).
QWidget* TrainingView::make_inputs(QPushButton*& browse, QPushButton*& builtin) {
  auto* inputs = new QWidget;
  auto* column = new QVBoxLayout(inputs);
  column->setContentsMargins(4, 4, 4, 4);
  column->addWidget(make_data_box(browse, builtin));
  column->addWidget(make_model_box());
  column->addWidget(make_scheme_box());

  start_ = new QPushButton("Start");
  stop_ = new QPushButton("Stop");
  save_ = new QPushButton("Save models...");
  start_->setObjectName("train_start");
  stop_->setObjectName("train_stop");
  save_->setObjectName("train_save");
  stop_->setEnabled(false);
  save_->setEnabled(false);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(start_);
  buttons->addWidget(stop_);
  column->addLayout(buttons);
  column->addWidget(save_);
  column->addStretch(1);
  data_path_->setToolTip("The text to train on: its bytes are the tokens (vocabulary 256)");
  validation_fraction_->setToolTip("The share of the text held out to measure the validation loss");
  layers_->setToolTip("Transformer layers (L = 2 x layers sublayers)");
  d_model_->setToolTip("Width d of the residual stream");
  heads_->setToolTip("Attention heads (must divide d)");
  ffn_->setToolTip("SwiGLU width of each MLP");
  seq_->setToolTip("Tokens per training sequence");
  batch_->setToolTip("Sequences per step");
  steps_->setToolTip("AdamW steps per scheme");
  lr_->setToolTip("Peak learning rate (warm-up, then cosine decay; docs/training.md)");
  seed_->setToolTip("Seed of the initial weights (shared by every scheme) and of the batches");
  seeds_->setToolTip(
      "How many seeds to train, from the seed above upwards, one after another: with two or more, "
      "the schemes are compared paired by seed with 95 % intervals (docs/training.md#statistics)");
  threads_->setToolTip("Worker threads for the forward and backward passes");
  standard_->setToolTip("Train the standard residual (unit-weight sum)");
  full_->setToolTip("Train Full AttnRes (softmax over every earlier output)");
  block_->setToolTip("Train Block AttnRes with the block size S beside it");
  block_size_->setToolTip("Block size S of Block AttnRes (sublayers per block, 1 .. L)");
  other_->setToolTip("Also train the scheme named beside it");

  auto* scroll = new QScrollArea;
  scroll->setObjectName("inputs_scroll");
  scroll->setWidget(inputs);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setMinimumWidth(inputs->minimumSizeHint().width() +
                          scroll->verticalScrollBar()->sizeHint().width() + 4);
  scroll->setMaximumWidth(320);
  return scroll;
}

QWidget* TrainingView::make_data_box(QPushButton*& browse, QPushButton*& builtin) {
  auto* data_box = new QGroupBox("Data (bytes = tokens)");
  auto* data_layout = new QVBoxLayout(data_box);
  data_path_ = new QLineEdit;
  data_path_->setObjectName("train_data");
  data_path_->setPlaceholderText("a text file, or the built-in sample");
  browse = new QPushButton("Browse...");
  builtin = new QPushButton("Use built-in sample text");
  builtin->setObjectName("train_builtin");
  auto* path_row = new QHBoxLayout;
  path_row->addWidget(data_path_, 1);
  path_row->addWidget(browse);
  data_layout->addLayout(path_row);
  data_layout->addWidget(builtin);
  data_info_ = new QLabel("no data chosen yet");
  data_info_->setWordWrap(true);
  data_layout->addWidget(data_info_);
  auto* data_form = new QFormLayout;
  validation_fraction_ = dspin(kTrainValidationFraction, inputs_.validation_fraction, 2, 0.01,
                               "train_validation_fraction");
  data_form->addRow("validation fraction", validation_fraction_);
  data_layout->addLayout(data_form);
  return data_box;
}

QWidget* TrainingView::make_model_box() {
  auto* model_box = new QGroupBox("Model and run");
  auto* form = new QFormLayout(model_box);
  // The ranges are the state's (training_state.hpp): a scenario beyond them is refused, not
  // clamped (scenario_problem).
  layers_ = spin(kTrainLayers, inputs_.layers, "train_layers");
  d_model_ = spin(kTrainDModel, inputs_.d_model, "train_d_model");
  heads_ = spin(kTrainHeads, inputs_.heads, "train_heads");
  ffn_ = spin(kTrainFfn, inputs_.ffn, "train_ffn");
  seq_ = spin(kTrainSeq, inputs_.seq, "train_seq");
  batch_ = spin(kTrainBatch, inputs_.batch, "train_batch");
  steps_ = spin(kTrainSteps, inputs_.steps, "train_steps");
  lr_ = dspin(kTrainLr, inputs_.lr, 5, 1e-3, "train_lr");
  seed_ = spin(kTrainSeed, static_cast<int>(inputs_.seed), "train_seed");
  seeds_ = spin(kTrainSeeds, inputs_.seeds, "train_seeds");
  threads_ = spin(kTrainThreads, inputs_.threads, "train_threads");
  threads_->setSpecialValueText("all cores");
  // bf16 first where it is the default (native bf16 units), as `attnres train` chooses.
  precision_ = new QComboBox;
  precision_->setObjectName("train_precision");
  const MatrixUnits units = matrix_units();
  const bool bf16_default = default_training_precision() == Precision::bf16;
  const QString bf16_text = QString("bf16 products, f32 weights (%1%2)")
                                .arg(QString::fromStdString(units.isa))
                                .arg(units.native_bf16 ? "" : ", emulated");
  precision_->addItem(bf16_default ? bf16_text : QString("f32"), bf16_default ? "bf16" : "f32");
  precision_->addItem(bf16_default ? QString("f32") : bf16_text, bf16_default ? "f32" : "bf16");
  precision_->setCurrentIndex(precision_->findData(QString::fromStdString(inputs_.precision)));
  precision_->setToolTip(
      "bf16: the weight products take bf16 inputs with f32 accumulation (mixed precision, as "
      "production training runs); f32 weights, AdamW state, norms, softmax and loss "
      "(docs/training.md). The default is bf16 where the CPU has native bf16 units.");
  form->addRow("layers (L = 2 x layers)", layers_);
  form->addRow("d_model", d_model_);
  form->addRow("heads", heads_);
  form->addRow("ffn", ffn_);
  form->addRow("sequence length", seq_);
  form->addRow("batch (sequences)", batch_);
  form->addRow("steps", steps_);
  form->addRow("peak learning rate", lr_);
  form->addRow("seed (weights, batches)", seed_);
  form->addRow("seeds (one after another)", seeds_);
  form->addRow("threads", threads_);
  form->addRow("precision", precision_);
  return model_box;
}

QWidget* TrainingView::make_scheme_box() {
  auto* scheme_box = new QGroupBox("Schemes, trained side by side");
  auto* scheme_layout = new QFormLayout(scheme_box);
  standard_ = new QCheckBox("standard residual");
  full_ = new QCheckBox("Full AttnRes");
  block_ = new QCheckBox("Block AttnRes, block size S");
  standard_->setObjectName("train_standard");
  full_->setObjectName("train_full");
  block_->setObjectName("train_block");
  standard_->setChecked(inputs_.standard);
  full_->setChecked(inputs_.full);
  block_->setChecked(inputs_.block);
  block_size_ =
      spin(kTrainBlockSizeMin, 2 * inputs_.layers, inputs_.block_size, "train_block_size");
  scheme_layout->addRow(standard_);
  scheme_layout->addRow(full_);
  scheme_layout->addRow(block_, block_size_);
  // Any other scheme of the zoo (docs/schemes.md): a named scheme, or a spec such as
  // "full:gate=sigmoid,heads=4". Named Block schemes use the block size above.
  other_ = new QCheckBox("another scheme");
  other_->setObjectName("train_other");
  other_->setChecked(inputs_.other);
  other_scheme_ = new QComboBox;
  other_scheme_->setObjectName("train_other_scheme");
  other_scheme_->setEditable(true);
  other_scheme_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  other_scheme_->setMinimumContentsLength(10);
  for (const auto& name : scheme_names()) {
    if (name == "standard" || name == "full" || name == "block") continue;
    other_scheme_->addItem(QString::fromStdString(name));
    other_scheme_->setItemData(other_scheme_->count() - 1,
                               QString::fromStdString(scheme_summary(name)), Qt::ToolTipRole);
  }
  other_scheme_->setCurrentText(QString::fromStdString(inputs_.other_spec));
  other_scheme_->setToolTip(
      "a named scheme or NAME:key=value,... (docs/schemes.md), e.g. full:gate=sigmoid,heads=4");
  scheme_layout->addRow(other_, other_scheme_);
  return scheme_box;
}

// Content (middle): status, then loss | alpha over output RMS | gradient RMS.
QWidget* TrainingView::make_content() {
  auto* content = new QWidget;
  auto* grid = new QGridLayout(content);
  grid->setContentsMargins(0, 0, 0, 0);
  status_ = new QLabel("Choose a text file or the built-in sample, then press Start.");
  status_->setObjectName("train_status");
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::PlainText);
  status_->setMinimumHeight(36);
  status_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  loss_ = new ChartPanel;
  rms_ = new ChartPanel;
  grad_rms_ = new ChartPanel;
  alpha_ = new HeatmapWidget;
  // The charts draw a run as it trains and as it stopped, not the form's inputs: never veiled
  // ("computing…" over a live run, "cancelled" over a stopped one, or a failed Start's "invalid"
  // would all be wrong); the status line and the error banner say what happened.
  for (QWidget* chart : std::initializer_list<QWidget*>{loss_, rms_, grad_rms_, alpha_})
    chart->setProperty("attnres_inputs_independent", true);
  alpha_scheme_ = new QComboBox;
  alpha_scheme_->setObjectName("train_alpha_scheme");
  alpha_scheme_->setToolTip("Which trained scheme's depth-attention weights the map shows");
  auto* alpha_panel = new QWidget;
  auto* alpha_column = new QVBoxLayout(alpha_panel);
  alpha_column->setContentsMargins(0, 0, 0, 0);
  auto* alpha_row = new QHBoxLayout;
  alpha_row->addWidget(new QLabel("depth attention of"));
  alpha_row->addWidget(alpha_scheme_, 1);
  alpha_column->addLayout(alpha_row);
  // The α map over the run's evaluations: a frame picker (the last: the newest, followed while
  // the run trains) and a player from the first evaluation to the newest.
  auto* frame_row = new QHBoxLayout;
  alpha_frame_ = spin(0, 0, 0);
  alpha_frame_->setObjectName("train_alpha_frame");
  alpha_frame_->setToolTip(
      "Which evaluation's map (0: the first); the last follows the newest while the run trains");
  alpha_player_ = new Player(
      "train_alpha_player", "Play the α map over the run's evaluations, from the first",
      [this] {
        alpha_live_ = false;
        alpha_frame_->setValue(0);
      },
      [this] {
        if (alpha_frame_->value() >= alpha_frame_->maximum()) {
          alpha_live_ = true;  // back at the newest: follow the run again
          return false;
        }
        alpha_frame_->setValue(alpha_frame_->value() + 1);
        return true;
      });
  frame_row->addWidget(new QLabel("evaluation"));
  frame_row->addWidget(with_slider(alpha_frame_, "train_alpha_frame_slider"), 1);
  frame_row->addWidget(alpha_player_);
  alpha_column->addLayout(frame_row);
  alpha_column->addWidget(alpha_, 1);
  grid->addWidget(status_, 0, 0, 1, 2);
  grid->addWidget(loss_, 1, 0);
  grid->addWidget(alpha_panel, 1, 1);
  grid->addWidget(rms_, 2, 0);
  grid->addWidget(grad_rms_, 2, 1);
  paired_ = new QLabel;
  paired_->setObjectName("train_paired");
  paired_->setWordWrap(true);
  paired_->setTextFormat(Qt::PlainText);
  paired_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  grid->addWidget(paired_, 3, 0, 1, 2);
  grid->setRowStretch(1, 1);
  grid->setRowStretch(2, 1);
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);
  return content;
}

// The buttons' and fields' actions.
void TrainingView::connect_actions(QPushButton* browse, QPushButton* builtin) {
  QObject::connect(browse, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Training text", {}, "Text (*.txt *.md);;All files (*)");
    if (!path.isEmpty()) data_path_->setText(path);
  });
  QObject::connect(builtin, &QPushButton::clicked, this, [this] { use_builtin_sample(); });
  QObject::connect(start_, &QPushButton::clicked, this, [this] { start(); });
  QObject::connect(stop_, &QPushButton::clicked, this, [this] { stop(); });
  QObject::connect(save_, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, "Save one model directory per scheme into");
    if (!dir.isEmpty()) save_models(dir.toStdString());
  });
  QObject::connect(alpha_scheme_, &QComboBox::currentIndexChanged, this,
                   [this] { redraw_alpha(); });
  QObject::connect(alpha_frame_, &QSpinBox::valueChanged, this, [this] {
    if (!alpha_player_->playing()) alpha_live_ = alpha_frame_->value() >= alpha_frame_->maximum();
    redraw_alpha();
  });
}

TrainingView::~TrainingView() {
  // The main window waits for its runs before its views go; a view alone stops its worker here.
  if (run_) run_->stop.cancel();
}

// Every edit writes its field into the state; the state, not the widgets, is what Start trains and
// what File > Save scenario writes.
void TrainingView::bind_inputs() {
  QObject::connect(data_path_, &QLineEdit::textChanged, this, [this](const QString& path) {
    inputs_.data_path = path.toStdString();
    if (!path.isEmpty()) inputs_.builtin = false;  // a typed file replaces the built-in sample
    show_data_info();
  });
  QObject::connect(validation_fraction_, &QDoubleSpinBox::valueChanged, this,
                   [this](double value) { inputs_.validation_fraction = value; });
  QObject::connect(layers_, &QSpinBox::valueChanged, this, [this](int layers) {
    inputs_.layers = layers;
    block_size_->setMaximum(2 * layers);  // S takes 1 .. L
  });
  const std::pair<QSpinBox*, int TrainingState::*> ints[] = {
      {d_model_, &TrainingState::d_model},
      {heads_, &TrainingState::heads},
      {ffn_, &TrainingState::ffn},
      {seq_, &TrainingState::seq},
      {batch_, &TrainingState::batch},
      {steps_, &TrainingState::steps},
      {seeds_, &TrainingState::seeds},
      {threads_, &TrainingState::threads},
      {block_size_, &TrainingState::block_size}};
  for (const auto& [box, field] : ints) {
    QObject::connect(box, &QSpinBox::valueChanged, this,
                     [this, field = field](int value) { inputs_.*field = value; });
  }
  QObject::connect(seed_, &QSpinBox::valueChanged, this,
                   [this](int value) { inputs_.seed = static_cast<std::uint64_t>(value); });
  QObject::connect(lr_, &QDoubleSpinBox::valueChanged, this,
                   [this](double value) { inputs_.lr = value; });
  QObject::connect(precision_, &QComboBox::currentIndexChanged, this, [this] {
    inputs_.precision = precision_->currentData().toString().toStdString();
  });
  const std::pair<QCheckBox*, bool TrainingState::*> boxes[] = {
      {standard_, &TrainingState::standard},
      {full_, &TrainingState::full},
      {block_, &TrainingState::block},
      {other_, &TrainingState::other}};
  for (const auto& [box, field] : boxes) {
    QObject::connect(box, &QCheckBox::toggled, this,
                     [this, field = field](bool checked) { inputs_.*field = checked; });
  }
  // Typed or picked: the editable box says both.
  auto take_spec = [this] { inputs_.other_spec = other_scheme_->currentText().toStdString(); };
  QObject::connect(other_scheme_, &QComboBox::currentTextChanged, this, take_spec);
  QObject::connect(other_scheme_, &QComboBox::editTextChanged, this, take_spec);
}

void TrainingView::show_state(const TrainingState& state) {
  // A copy: the widgets' signals write into inputs_ (which `state` may be) as they change.
  const TrainingState wanted = state;
  inputs_.builtin = wanted.builtin;
  data_path_->setText(QString::fromStdString(wanted.data_path));
  validation_fraction_->setValue(wanted.validation_fraction);
  layers_->setValue(wanted.layers);  // first: it sets the block size's range
  d_model_->setValue(wanted.d_model);
  heads_->setValue(wanted.heads);
  ffn_->setValue(wanted.ffn);
  seq_->setValue(wanted.seq);
  batch_->setValue(wanted.batch);
  steps_->setValue(wanted.steps);
  lr_->setValue(wanted.lr);
  seed_->setValue(static_cast<int>(
      std::min<std::uint64_t>(wanted.seed, static_cast<std::uint64_t>(kTrainSeed.high))));
  seeds_->setValue(wanted.seeds);
  threads_->setValue(wanted.threads);
  const int precision = precision_->findData(QString::fromStdString(wanted.precision));
  if (precision >= 0) precision_->setCurrentIndex(precision);
  standard_->setChecked(wanted.standard);
  full_->setChecked(wanted.full);
  block_->setChecked(wanted.block);
  block_size_->setValue(wanted.block_size);
  other_->setChecked(wanted.other);
  other_scheme_->setCurrentText(QString::fromStdString(wanted.other_spec));
  inputs_ = wanted;
  show_data_info();
}

void TrainingView::show_data_info() {
  if (inputs_.builtin && inputs_.data_path.empty()) {
    data_info_->setText(
        QString("the built-in sample: %1 KB of simple English sentences, made in memory")
            .arg(static_cast<double>(builtin_sample_text().size()) / 1000.0, 0, 'f', 1));
  } else {
    data_info_->setText(inputs_.data_path.empty() ? "no data chosen yet"
                                                  : "the file above (read when you press Start)");
  }
}

void TrainingView::use_builtin_sample() {
  inputs_.builtin = true;
  data_path_->clear();
  show_data_info();
}

std::string TrainingView::scenario_problem(const Scenario& scenario) const {
  if (!scenario.training) return {};
  return training_state_problem(training_state(scenario));
}

void TrainingView::save_to(Scenario& scenario) const {
  save_training_state(inputs_, scenario, opened_ ? &*opened_ : nullptr);
}

void TrainingView::apply_scenario(const Scenario& scenario) {
  if (!scenario.training) return;
  opened_ = scenario;  // saved as read while the form is unchanged (save_training_state)
  const TrainingState state = training_state(scenario);
  // What the tab cannot take as it is, said where the run's status goes (not silently dropped).
  std::string note;
  for (const std::string& line : state.not_taken) {
    if (!note.empty()) note += "\n";
    note += line;
  }
  if (state_ != State::running) status_->setText(QString::fromStdString(note));
  show_state(state);
}

void TrainingView::set_running(bool running) {
  start_->setEnabled(!running);
  stop_->setEnabled(running);
  for (QWidget* w : std::initializer_list<QWidget*>{data_path_, validation_fraction_,
                                                    layers_,    d_model_,
                                                    heads_,     ffn_,
                                                    seq_,       batch_,
                                                    steps_,     lr_,
                                                    seed_,      seeds_,
                                                    threads_,   precision_,
                                                    standard_,  full_,
                                                    block_,     block_size_,
                                                    other_,     other_scheme_}) {
    w->setEnabled(!running);
  }
  save_->setEnabled(!running && steps_done() > 0);
}

View* make_training_view(const ViewHost& host, const ViewEntry& entry) {
  return new TrainingView(host, entry);
}

}  // namespace attnres::gui
