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
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QScatterSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>

#include "attnres/cost.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/scenario.hpp"
#include "attnres/training.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ the built-in sample text

std::string builtin_sample_text() {
  static const char* const subjects[] = {"the little cat", "a happy dog",    "my old friend",
                                         "the teacher",    "a small bird",   "the farmer",
                                         "our neighbour",  "the young girl", "the tall boy",
                                         "a busy bee",     "the baker",      "my sister"};
  static const char* const verbs[] = {"sees",    "likes", "finds", "carries",   "watches", "paints",
                                      "follows", "helps", "draws", "remembers", "opens",   "wants"};
  static const char* const objects[] = {"the red ball",      "a green apple",  "the big house",
                                        "a warm cup of tea", "the blue river", "a long letter",
                                        "the quiet garden",  "a bright star",  "the wooden boat",
                                        "an old book",       "the white door", "a sweet cake"};
  static const char* const endings[] = {"in the morning",  "after school",   "by the sea",
                                        "every day",       "under the tree", "at night",
                                        "with great care", "in the rain",    "near the hill",
                                        "before dinner",   "on sunday",      "all year"};
  static const char* const joins[] = {" and then ", " because ", " while ", ", but "};
  std::uint64_t state = 0x2545F4914F6CDD1DULL;  // xorshift64: the same text everywhere
  auto pick = [&state](std::size_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::size_t>(state % n);
  };
  auto clause = [&] {
    return std::string(subjects[pick(std::size(subjects))]) + " " + verbs[pick(std::size(verbs))] +
           " " + objects[pick(std::size(objects))] + " " + endings[pick(std::size(endings))];
  };
  std::string text;
  int in_paragraph = 0;
  while (text.size() < 16000) {
    std::string sentence = clause();
    if (pick(3) == 0) sentence += joins[pick(std::size(joins))] + clause();
    sentence[0] = static_cast<char>(sentence[0] - 'a' + 'A');
    text += sentence + ".";
    text += ++in_paragraph % 6 == 0 ? "\n\n" : " ";
  }
  return text;
}

namespace {

// ------------------------------------------------------------------ small helpers

QSpinBox* spin(int low, int high, int value, const char* name) {
  auto* box = new QSpinBox;
  box->setRange(low, high);
  box->setValue(value);
  box->setObjectName(name);
  return box;
}

QDoubleSpinBox* dspin(double low, double high, double value, int decimals, double step,
                      const char* name) {
  auto* box = new QDoubleSpinBox;
  box->setRange(low, high);
  box->setDecimals(decimals);
  box->setSingleStep(step);
  box->setValue(value);
  box->setObjectName(name);
  return box;
}

// One colour per scheme (standard, Full, Block, another scheme), the same in every chart.
QColor scheme_colour(std::size_t index) {
  static const QColor colours[] = {QColor(90, 90, 90), QColor(221, 132, 82), QColor(76, 114, 176),
                                   QColor(85, 168, 104)};
  return colours[std::min<std::size_t>(index, std::size(colours) - 1)];
}

struct AlphaMap {
  std::int64_t step = 0;
  std::vector<std::vector<double>> values;  // reads x sources, NaN = not a source of that read
  std::vector<std::string> rows, columns;
};

// Mean depth-attention weights of the trainer's current weights on `window` (worker thread).
AlphaMap alpha_map(const Trainer& trainer, const std::vector<int>& window) {
  const ForwardTrace trace = trainer.forward(window).trace;
  AlphaMap map;
  map.step = trainer.current_step();
  for (const auto& read : trace.reads) {
    for (const auto& source : read.sources) {
      if (std::find(map.columns.begin(), map.columns.end(), source.label()) == map.columns.end()) {
        map.columns.push_back(source.label());
      }
    }
  }
  std::stable_partition(map.columns.begin(), map.columns.end(), [](const std::string& label) {
    return label != "partial" && label != "zero";
  });
  for (const auto& read : trace.reads) {
    std::vector<double> row(map.columns.size(), NAN);
    for (std::size_t j = 0; j < read.sources.size(); ++j) {
      const auto column =
          std::find(map.columns.begin(), map.columns.end(), read.sources[j].label()) -
          map.columns.begin();
      row[static_cast<std::size_t>(column)] = read.alpha_mean(static_cast<Eigen::Index>(j));
    }
    map.values.push_back(std::move(row));
    map.rows.push_back(read.read == trace.sublayers ? "final"
                                                    : "sublayer " + std::to_string(read.read + 1));
  }
  return map;
}

// At most ~`limit` points of a long curve (rows from `first` on): every k-th row, and always the
// last.
template <typename Take>
std::vector<std::pair<double, double>> thinned(const std::vector<TrainLogRow>& rows,
                                               std::size_t first, std::size_t limit, Take take) {
  std::vector<std::pair<double, double>> points;
  const std::size_t count = rows.size() > first ? rows.size() - first : 0;
  const std::size_t stride = std::max<std::size_t>(1, count / limit);
  for (std::size_t i = first; i < rows.size(); ++i) {
    if ((i - first) % stride != 0 && i + 1 != rows.size()) continue;
    const double y = take(rows[i]);
    if (std::isfinite(y)) points.emplace_back(static_cast<double>(rows[i].step), y);
  }
  return points;
}

double latest_validation(const std::vector<TrainLogRow>& rows) {
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    if (std::isfinite(it->val_loss)) return it->val_loss;
  }
  return NAN;
}

constexpr auto kUpdateInterval = std::chrono::milliseconds(100);  // at most ~10 updates a second

}  // namespace

// ------------------------------------------------------------------ the run

struct TrainingView::Scheme {
  std::string key;   // subdirectory of "Save models...": standard, full, block_S2
  std::string name;  // legend: standard, Full AttnRes, Block AttnRes (S = 2)
  ResidualMode mode = ResidualMode::standard;
  int block_size = 0;
  std::size_t colour = 0;
  std::optional<AttnResConfig>
      scheme;  // any other scheme: the model is converted to it (docs/schemes.md)
};

// Everything the worker needs, copied out of the widgets on the GUI thread.
struct TrainingView::Settings {
  std::string data_path;
  bool builtin = false;
  double validation_fraction = 0.1;
  ModelConfig config;
  std::uint64_t seed = 1;
  TrainOptions options;
  std::vector<Scheme> schemes;
};

// Shared by the GUI thread and the worker. The worker publishes under `mutex`; the GUI thread
// takes what is new when a posted update arrives. The trainers belong to the worker until it has
// published its end (`end` != running), then to the GUI thread (Save models...).
struct TrainingView::Run {
  int id = 0;
  Settings settings;
  CancelToken stop;
  std::atomic<std::int64_t> steps{0};  // steps taken, every scheme together

  std::mutex mutex;
  std::vector<std::vector<TrainLogRow>> rows;  // per scheme, every row published so far
  std::vector<std::optional<AlphaMap>> alpha;  // per scheme, the latest map (AttnRes schemes)
  int alpha_version = 0;
  double tokens_per_second = 0.0;
  State end = State::running;
  bool update_posted = false;
  Clock::time_point last_post{};
  std::vector<std::unique_ptr<Trainer>> trainers;

  // Worker side: asks the GUI thread to draw, at most one pending update and ~10 a second
  // (`force`: always, for the end of the run).
  void post(TrainingView* view, const std::shared_ptr<Run>& self, bool force) {
    {
      std::lock_guard lock(mutex);
      const auto now = Clock::now();
      if (!force && (update_posted || now - last_post < kUpdateInterval)) return;
      update_posted = true;
      last_post = now;
    }
    QMetaObject::invokeMethod(
        view, [view, self] { view->apply_update(self); }, Qt::QueuedConnection);
  }
};

// ------------------------------------------------------------------ the view

TrainingView::TrainingView(const ViewHost& host) : View("training", "Training", host) {
  // Inputs (left, scrollable: the form is long).
  auto* inputs = new QWidget;
  auto* column = new QVBoxLayout(inputs);
  column->setContentsMargins(4, 4, 4, 4);

  auto* data_box = new QGroupBox("Data (bytes = tokens)");
  auto* data_layout = new QVBoxLayout(data_box);
  data_path_ = new QLineEdit;
  data_path_->setObjectName("train_data");
  data_path_->setPlaceholderText("a text file, or the built-in sample");
  auto* browse = new QPushButton("Browse...");
  auto* builtin = new QPushButton("Use built-in sample text");
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
  validation_fraction_ = dspin(0.01, 0.5, 0.1, 2, 0.01, "train_validation_fraction");
  data_form->addRow("validation fraction", validation_fraction_);
  data_layout->addLayout(data_form);
  column->addWidget(data_box);

  auto* model_box = new QGroupBox("Model and run");
  auto* form = new QFormLayout(model_box);
  layers_ = spin(1, 32, 2, "train_layers");
  d_model_ = spin(4, 512, 32, "train_d_model");
  heads_ = spin(1, 32, 2, "train_heads");
  ffn_ = spin(1, 2048, 64, "train_ffn");
  seq_ = spin(2, 4096, 32, "train_seq");
  batch_ = spin(1, 256, 4, "train_batch");
  steps_ = spin(1, 10'000'000, 200, "train_steps");
  lr_ = dspin(1e-5, 1.0, 3e-3, 5, 1e-3, "train_lr");
  seed_ = spin(0, 1'000'000, 1, "train_seed");
  threads_ = spin(0, 256, 0, "train_threads");
  threads_->setSpecialValueText("all cores");
  form->addRow("layers (L = 2 x layers)", layers_);
  form->addRow("d_model", d_model_);
  form->addRow("heads", heads_);
  form->addRow("ffn", ffn_);
  form->addRow("sequence length", seq_);
  form->addRow("batch (sequences)", batch_);
  form->addRow("steps", steps_);
  form->addRow("peak learning rate", lr_);
  form->addRow("seed (weights, batches)", seed_);
  form->addRow("threads", threads_);
  column->addWidget(model_box);

  auto* scheme_box = new QGroupBox("Schemes, trained side by side");
  auto* scheme_layout = new QFormLayout(scheme_box);
  standard_ = new QCheckBox("standard residual");
  full_ = new QCheckBox("Full AttnRes");
  block_ = new QCheckBox("Block AttnRes, block size S");
  standard_->setObjectName("train_standard");
  full_->setObjectName("train_full");
  block_->setObjectName("train_block");
  for (QCheckBox* box : {standard_, full_, block_}) box->setChecked(true);
  block_size_ = spin(1, 4, 2, "train_block_size");
  scheme_layout->addRow(standard_);
  scheme_layout->addRow(full_);
  scheme_layout->addRow(block_, block_size_);
  // Any other scheme of the zoo (docs/schemes.md): a named scheme, or a spec such as
  // "full:gate=sigmoid,heads=4". Named Block schemes use the block size above.
  other_ = new QCheckBox("another scheme");
  other_->setObjectName("train_other");
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
  other_scheme_->setCurrentText("mhc");
  other_scheme_->setToolTip(
      "a named scheme or NAME:key=value,... (docs/schemes.md), e.g. full:gate=sigmoid,heads=4");
  scheme_layout->addRow(other_, other_scheme_);
  column->addWidget(scheme_box);

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

  // Content (middle): status, then loss | alpha over output RMS | gradient RMS.
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
  alpha_column->addWidget(alpha_, 1);
  grid->addWidget(status_, 0, 0, 1, 2);
  grid->addWidget(loss_, 1, 0);
  grid->addWidget(alpha_panel, 1, 1);
  grid->addWidget(rms_, 2, 0);
  grid->addWidget(grad_rms_, 2, 1);
  grid->setRowStretch(1, 1);
  grid->setRowStretch(2, 1);
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);

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

  QObject::connect(browse, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Training text", {}, "Text (*.txt *.md);;All files (*)");
    if (!path.isEmpty()) data_path_->setText(path);
  });
  QObject::connect(builtin, &QPushButton::clicked, this, [this] { use_builtin_sample(); });
  QObject::connect(data_path_, &QLineEdit::textChanged, this, [this](const QString& path) {
    if (path.isEmpty() && builtin_) return;
    builtin_ = false;
    data_info_->setText(path.isEmpty() ? "no data chosen yet"
                                       : "the file above (read when you press Start)");
  });
  QObject::connect(layers_, &QSpinBox::valueChanged, this,
                   [this](int layers) { block_size_->setMaximum(2 * layers); });
  QObject::connect(start_, &QPushButton::clicked, this, [this] { start(); });
  QObject::connect(stop_, &QPushButton::clicked, this, [this] { stop(); });
  QObject::connect(save_, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, "Save one model directory per scheme into");
    if (!dir.isEmpty()) save_models(dir.toStdString());
  });
  QObject::connect(alpha_scheme_, &QComboBox::currentIndexChanged, this,
                   [this] { redraw_alpha(); });
  redraw();
  redraw_alpha();
}

TrainingView::~TrainingView() {
  // The main window waits for its runs before its views go; a view alone stops its worker here.
  if (run_) run_->stop.cancel();
}

void TrainingView::use_builtin_sample() {
  builtin_ = true;
  data_path_->clear();
  data_info_->setText(
      QString("the built-in sample: %1 KB of simple English sentences, made in memory")
          .arg(static_cast<double>(builtin_sample_text().size()) / 1000.0, 0, 'f', 1));
}

void TrainingView::apply_scenario(const Scenario& scenario) {
  if (!scenario.training) return;
  const ScenarioTraining& t = *scenario.training;
  if (!t.data_path.empty()) data_path_->setText(QString::fromStdString(t.data_path.string()));
  layers_->setValue(t.layers);
  d_model_->setValue(t.d_model);
  heads_->setValue(t.heads);
  ffn_->setValue(t.model_config().intermediate_size);
  seq_->setValue(t.seq);
  batch_->setValue(t.batch);
  steps_->setValue(t.steps);
  lr_->setValue(t.lr);
  if (!t.seeds.empty()) seed_->setValue(static_cast<int>(t.seeds.front()));
  threads_->setValue(t.threads);
  // The schemes: standard, Full and the first Block N as the boxes; the first other as "another".
  standard_->setChecked(false);
  full_->setChecked(false);
  block_->setChecked(!t.blocks.empty());
  if (!t.blocks.empty()) block_size_->setValue(t.sublayers() / t.blocks.front());
  other_->setChecked(false);
  for (const auto& spec : t.schemes) {
    if (spec == "standard") {
      standard_->setChecked(true);
    } else if (spec == "full") {
      full_->setChecked(true);
    } else if (!other_->isChecked()) {
      other_->setChecked(true);
      other_scheme_->setCurrentText(QString::fromStdString(spec));
    }
  }
}

TrainingView::Settings TrainingView::settings() const {
  Settings s;
  s.data_path = data_path_->text().trimmed().toStdString();
  s.builtin = builtin_ && s.data_path.empty();
  if (!s.builtin && s.data_path.empty()) {
    throw Error("training: choose a text file (Browse...) or press \"Use built-in sample text\"");
  }
  s.validation_fraction = validation_fraction_->value();
  s.config.num_hidden_layers = layers_->value();
  s.config.hidden_size = d_model_->value();
  s.config.num_attention_heads = heads_->value();
  s.config.num_key_value_heads = heads_->value();
  s.config.intermediate_size = ffn_->value();
  s.config.vocab_size = kByteVocabulary;
  s.config.validate("training: invalid model shape", [](const std::string& key) -> std::string {
    if (key == "hidden_size") return "d_model";
    if (key == "num_hidden_layers") return "layers";
    if (key == "num_attention_heads" || key == "num_key_value_heads") return "heads";
    if (key == "intermediate_size") return "ffn";
    return key;
  });
  s.seed = static_cast<std::uint64_t>(seed_->value());
  s.options.steps = steps_->value();
  s.options.sequence_length = seq_->value();
  s.options.batch = batch_->value();
  s.options.lr = lr_->value();
  s.options.seed = s.seed;
  s.options.validation_fraction = s.validation_fraction;
  s.options.engine.threads = threads_->value();
  s.options.validate();
  if (standard_->isChecked())
    s.schemes.push_back({"standard", "standard", ResidualMode::standard, 0, 0, std::nullopt});
  if (full_->isChecked())
    s.schemes.push_back({"full", "Full AttnRes", ResidualMode::full, 0, 1, std::nullopt});
  if (block_->isChecked()) {
    const int size = block_size_->value();
    s.schemes.push_back({"block_S" + std::to_string(size),
                         "Block AttnRes (S = " + std::to_string(size) + ")", ResidualMode::block,
                         size, 2, std::nullopt});
  }
  if (other_->isChecked()) {
    const std::string spec = other_scheme_->currentText().trimmed().toStdString();
    CostInputs sizes;
    sizes.sublayers = s.config.sublayers();
    sizes.d_model = s.config.hidden_size;
    sizes.block_size = block_size_->value();
    AttnResConfig scheme;
    try {
      scheme = parse_scheme_spec(spec, sizes);
    } catch (const Error& error) {
      throw Error(std::string("training: another scheme '") + spec + "': " + error.what());
    }
    ModelConfig checked = s.config;
    checked.attn_res = scheme;
    checked.validate("training: another scheme '" + spec + "'");
    Scheme other{
        scheme_file_name(spec), scheme.describe(), scheme.mode, scheme.block_size, 3, scheme};
    s.schemes.push_back(other);
  }
  if (s.schemes.empty()) {
    throw Error(
        "training: check at least one scheme (standard, Full AttnRes, Block AttnRes or another "
        "scheme)");
  }
  return s;
}

void TrainingView::set_running(bool running) {
  start_->setEnabled(!running);
  stop_->setEnabled(running);
  for (QWidget* w : std::initializer_list<QWidget*>{
           data_path_, validation_fraction_, layers_, d_model_, heads_, ffn_, seq_, batch_, steps_,
           lr_, seed_, threads_, standard_, full_, block_, block_size_, other_, other_scheme_}) {
    w->setEnabled(!running);
  }
  save_->setEnabled(!running && steps_done() > 0);
}

std::int64_t TrainingView::steps_done() const {
  return run_ ? run_->steps.load() : 0;
}

void TrainingView::start() {
  if (state_ == State::running) return;
  Settings s;
  try {
    s = settings();
  } catch (const Error& error) {
    show_error(error.what());
    return;
  }
  clear_error();
  auto run = std::make_shared<Run>();
  run->id = ++next_run_;
  run->settings = s;
  run->rows.resize(s.schemes.size());
  run->alpha.resize(s.schemes.size());
  run_ = run;
  rows_.assign(s.schemes.size(), {});
  saved_.clear();
  state_ = State::running;
  {
    const QSignalBlocker blocker(alpha_scheme_);
    const QString keep = alpha_scheme_->currentText();
    alpha_scheme_->clear();
    for (const auto& scheme : s.schemes) {
      if (scheme.mode != ResidualMode::standard)
        alpha_scheme_->addItem(QString::fromStdString(scheme.name));
    }
    const int index = alpha_scheme_->findText(keep);
    alpha_scheme_->setCurrentIndex(index >= 0 ? index : 0);
  }
  set_running(true);
  redraw();
  redraw_alpha();

  View::run("training", [this, run](const Progress& progress) -> std::function<void()> {
    const Settings& setup = run->settings;
    // Inside a step: only "go on?" (the step's own sublayer counts would make the bar jump).
    const Progress check = [stop = run->stop, progress](std::size_t, std::size_t) {
      return !stop.cancelled() && (!progress || progress(0, 0));
    };
    std::vector<std::unique_ptr<Trainer>> trainers;
    auto finish = [&](State end) {
      {
        std::lock_guard lock(run->mutex);
        run->trainers = std::move(trainers);
        run->end = end;
      }
      run->post(this, run, true);
    };
    auto publish = [&](std::size_t index, const TrainLogRow& row, std::optional<AlphaMap> alpha) {
      std::lock_guard lock(run->mutex);
      run->rows[index].push_back(row);
      if (alpha) {
        run->alpha[index] = std::move(alpha);
        ++run->alpha_version;
      }
    };
    try {
      const TextData text =
          setup.builtin
              ? text_data_from_bytes(builtin_sample_text(), "built-in sample",
                                     setup.validation_fraction, setup.options.sequence_length)
              : load_text_data(setup.data_path, setup.validation_fraction,
                               setup.options.sequence_length);
      const auto window = validation_windows(text, setup.options.sequence_length, 1).front();
      // Every scheme starts from the same weights and sees the same batches (same seed).
      const ModelWeights<double> initial = random_model(setup.config, {.seed = setup.seed});
      for (std::size_t i = 0; i < setup.schemes.size(); ++i) {
        report_progress(check, 0, 0, "training");
        TrainOptions options = setup.options;
        if (setup.schemes[i].scheme) {
          trainers.push_back(std::make_unique<Trainer>(
              convert_scheme(initial, *setup.schemes[i].scheme), text, options));
        } else {
          options.forward.mode = setup.schemes[i].mode;
          if (setup.schemes[i].mode == ResidualMode::block)
            options.forward.block_size = setup.schemes[i].block_size;
          trainers.push_back(std::make_unique<Trainer>(initial, text, options));
        }
        std::optional<AlphaMap> alpha;
        if (setup.schemes[i].mode != ResidualMode::standard)
          alpha = alpha_map(*trainers.back(), window);
        publish(i, trainers.back()->log().back(), std::move(alpha));
      }
      run->post(this, run, true);
      const auto begin = Clock::now();
      const std::int64_t total = setup.options.steps * static_cast<std::int64_t>(trainers.size());
      std::int64_t tokens = 0;
      for (bool more = true; more;) {
        more = false;
        for (std::size_t i = 0; i < trainers.size();
             ++i) {  // round-robin: the curves grow together
          Trainer& trainer = *trainers[i];
          if (trainer.finished()) continue;
          const TrainLogRow& row = trainer.step(check);  // Stop abandons the step in flight
          tokens += static_cast<std::int64_t>(setup.options.batch) * setup.options.sequence_length;
          std::optional<AlphaMap> alpha;
          if (std::isfinite(row.val_loss) && setup.schemes[i].mode != ResidualMode::standard)
            alpha = alpha_map(trainer, window);
          publish(i, row, std::move(alpha));
          const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
          {
            std::lock_guard lock(run->mutex);
            run->tokens_per_second = seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
          }
          const std::int64_t done = ++run->steps;
          report_progress(progress, static_cast<std::size_t>(done), static_cast<std::size_t>(total),
                          "training");
          run->post(this, run, false);
          more = more || !trainer.finished();
        }
      }
      finish(State::finished);
      return [] {};
    } catch (const Cancelled&) {
      finish(State::stopped);
      throw;
    } catch (...) {
      finish(State::failed);
      throw;  // the host shows the message in the banner
    }
  });
}

void TrainingView::stop() {
  if (run_ && state_ == State::running) {
    run_->stop.cancel();
    stop_->setEnabled(false);
    status_->setText("stopping...");
  }
}

// GUI thread: takes what the worker published since the last update and draws it.
void TrainingView::apply_update(const std::shared_ptr<Run>& run) {
  if (run != run_) return;  // an update of an older run
  State end;
  bool alpha_changed = false;
  {
    std::lock_guard lock(run->mutex);
    run->update_posted = false;
    for (std::size_t i = 0; i < run->rows.size(); ++i) {
      rows_[i].insert(rows_[i].end(),
                      run->rows[i].begin() + static_cast<std::ptrdiff_t>(rows_[i].size()),
                      run->rows[i].end());
    }
    end = run->end;
    alpha_changed = run->alpha_version != 0;
  }
  if (state_ == State::running && end != State::running) {
    state_ = end;
    set_running(false);
  }
  redraw();
  if (alpha_changed) redraw_alpha();
}

void TrainingView::redraw() {
  const std::vector<Scheme> schemes = run_ ? run_->settings.schemes : std::vector<Scheme>{};
  ChartSpec loss;
  loss.id = "training_loss";
  loss.title = "Loss: training (lines) and validation (markers)";
  loss.x_label = "step";
  loss.y_label = "loss (nats/token)";
  ChartSpec rms, grad;
  rms.id = "training_output_rms";
  grad.id = "training_output_grad_rms";
  std::int64_t latest = 0;
  for (const auto& rows : rows_) {
    if (!rows.empty()) latest = std::max(latest, rows.back().step);
  }
  const std::string at = latest > 0 ? " (step " + std::to_string(latest) + ")" : "";
  rms.title = "Output RMS by sublayer" + at;
  grad.title = "Output-gradient RMS by sublayer" + at;
  rms.x_label = grad.x_label = "sublayer l";
  rms.y_label = "RMS of output v_l";
  grad.y_label = "RMS of dloss/dv_l";
  for (std::size_t i = 0; i < schemes.size() && i < rows_.size(); ++i) {
    const auto& rows = rows_[i];
    ChartSeries train{schemes[i].name, {}, ChartSeries::Style::line, false};
    // Row 0 (step 0) has no training loss.
    train.points = thinned(rows, 1, 1500, [](const TrainLogRow& r) { return r.train_loss; });
    ChartSeries val{schemes[i].name + " validation", {}, ChartSeries::Style::scatter, false};
    for (const auto& row : rows) {
      if (std::isfinite(row.val_loss))
        val.points.emplace_back(static_cast<double>(row.step), row.val_loss);
    }
    loss.series.push_back(std::move(train));
    loss.series.push_back(std::move(val));
    ChartSeries out{schemes[i].name, {}, ChartSeries::Style::line_and_points, false},
        out_grad = out;
    if (!rows.empty() && rows.back().step > 0) {
      const auto& row = rows.back();
      for (std::size_t l = 0; l < row.output_rms.size(); ++l)
        out.points.emplace_back(double(l + 1), row.output_rms[l]);
      for (std::size_t l = 0; l < row.output_grad_rms.size(); ++l) {
        out_grad.points.emplace_back(double(l + 1), row.output_grad_rms[l]);
      }
    }
    rms.series.push_back(std::move(out));
    grad.series.push_back(std::move(out_grad));
  }
  loss_->set_spec(loss);
  rms_->set_spec(rms);
  grad_rms_->set_spec(grad);
  // One colour per scheme; the validation dots share their scheme's colour and its legend entry.
  auto restyle = [](ChartPanel* panel, std::size_t per_scheme, const std::vector<Scheme>& all) {
    const auto series = panel->chart()->series();
    for (qsizetype k = 0; k < series.size(); ++k) {
      const auto scheme = static_cast<std::size_t>(k) / per_scheme;
      if (scheme >= all.size()) break;
      const QColor colour = scheme_colour(all[scheme].colour);
      if (auto* scatter = qobject_cast<QScatterSeries*>(series[k])) {
        // Distinct shapes, so that curves lying on top of each other stay apart.
        static const QScatterSeries::MarkerShape shapes[] = {QScatterSeries::MarkerShapeCircle,
                                                             QScatterSeries::MarkerShapeRectangle,
                                                             QScatterSeries::MarkerShapeTriangle};
        scatter->setMarkerShape(
            shapes[std::min<std::size_t>(all[scheme].colour, std::size(shapes) - 1)]);
        scatter->setMarkerSize(8.0);
        scatter->setColor(colour);
        scatter->setBorderColor(colour.darker(130));
        for (QLegendMarker* marker : panel->chart()->legend()->markers(scatter))
          marker->setVisible(false);
      } else if (auto* line = qobject_cast<QLineSeries*>(series[k])) {
        QColor see_through = colour;
        if (per_scheme == 2) see_through.setAlpha(170);  // overlapping training curves stay visible
        QPen pen(see_through);
        pen.setWidthF(per_scheme == 2 ? 1.2 : 2.0);
        line->setPen(pen);
        line->setColor(see_through);
      }
    }
  };
  restyle(loss_, 2, schemes);
  if (run_) {
    // The whole run on the step axis: the curves grow across it as the run goes.
    for (QAbstractAxis* axis : loss_->chart()->axes(Qt::Horizontal)) {
      if (auto* value = qobject_cast<QValueAxis*>(axis)) {
        value->setRange(0.0, static_cast<double>(run_->settings.options.steps));
        value->applyNiceNumbers();
      }
    }
  }
  restyle(rms_, 1, schemes);
  restyle(grad_rms_, 1, schemes);
  update_status();
}

void TrainingView::redraw_alpha() {
  const std::string chosen = alpha_scheme_->currentText().toStdString();
  std::optional<AlphaMap> map;
  if (run_) {
    std::lock_guard lock(run_->mutex);
    for (std::size_t i = 0; i < run_->settings.schemes.size(); ++i) {
      if (run_->settings.schemes[i].name == chosen) map = run_->alpha[i];
    }
  }
  if (!map) {
    alpha_->set_data(chosen.empty() ? "α: train a Full or Block AttnRes scheme" : "α of " + chosen,
                     {}, {}, {});
    return;
  }
  alpha_->set_data(
      "α of " + chosen + ", step " + std::to_string(map->step) + " (mean over a validation window)",
      map->values, map->rows, map->columns, 0.0, 1.0);
}

void TrainingView::update_status() {
  if (!run_) return;
  const auto& schemes = run_->settings.schemes;
  const char* what = state_ == State::running    ? "running"
                     : state_ == State::finished ? "finished"
                     : state_ == State::stopped  ? "stopped"
                     : state_ == State::failed   ? "failed"
                                                 : "";
  std::string text = what;
  if (state_ == State::running && rows_.empty()) text += " (reading the data)";
  double tokens_per_second = 0.0;
  {
    std::lock_guard lock(run_->mutex);
    tokens_per_second = run_->tokens_per_second;
  }
  text += ", " + format_number(std::round(tokens_per_second)) + " tokens/s";
  for (std::size_t i = 0; i < schemes.size() && i < rows_.size(); ++i) {
    const auto& rows = rows_[i];
    const std::int64_t step = rows.empty() ? 0 : rows.back().step;
    text += "\n" + schemes[i].name + ": step " + std::to_string(step) + " / " +
            std::to_string(run_->settings.options.steps);
    const double val = latest_validation(rows);
    if (std::isfinite(val))
      text += ", validation loss " + format_number(std::round(val * 1000.0) / 1000.0);
    if (!rows.empty() && rows.back().step > 0) {
      text +=
          ", training loss " + format_number(std::round(rows.back().train_loss * 1000.0) / 1000.0);
    }
  }
  if (!saved_.empty()) text += "\n" + saved_;
  status_->setText(QString::fromStdString(text));
}

std::vector<ChartSpec> TrainingView::charts() const {
  return {loss_->spec(), rms_->spec(), grad_rms_->spec()};
}

std::vector<HeatmapWidget*> TrainingView::heatmaps() {
  return {alpha_};
}

void TrainingView::save_models(const fs::path& directory) {
  try {
    if (!run_ || state_ == State::running)
      throw Error("save models: wait until the run has stopped or finished");
    if (steps_done() == 0) throw Error("save models: no scheme has trained a step yet");
    std::vector<std::pair<fs::path, const Trainer*>> targets;
    OutputDirectoryOptions output;
    output.owner = "model";
    output.flag = "save models";
    const fs::path root = clean_output_path(directory.string(), "save models");
    {
      std::lock_guard lock(run_->mutex);
      for (std::size_t i = 0; i < run_->trainers.size(); ++i) {
        const fs::path target = root / run_->settings.schemes[i].key;
        check_output_directory(target, output);  // refuse before writing any of them
        targets.emplace_back(target, run_->trainers[i].get());
      }
    }
    clear_error();
    // The trainers stay alive with `run` while another run may start.
    run("saving models",
        [this, run = run_, targets, output,
         root](const Progress& progress) -> std::function<void()> {
          OutputDirectoryOptions options = output;
          options.progress = progress;
          for (const auto& [target, trainer] : targets) {
            write_output_directory(target, options, [trainer = trainer](const fs::path& staging) {
              trainer->write_checkpoint(staging);
            });
          }
          const std::string note = "saved " + std::to_string(targets.size()) + " model director" +
                                   (targets.size() == 1 ? "y" : "ies") + " into " + root.string();
          return [this, run, note] {
            if (run != run_) return;
            saved_ = note;
            update_status();
          };
        });
  } catch (const Error& error) {
    show_error(error.what());
  }
}

}  // namespace attnres::gui
