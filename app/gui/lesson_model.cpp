#include "lesson_model.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/token_ids.hpp"
#include "attnres/trainer.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

std::string byte_token_ids(const std::string& text) {
  std::string ids;
  for (unsigned char c : text) {
    if (!ids.empty()) ids += ' ';
    ids += std::to_string(static_cast<int>(c));
  }
  return ids;
}

}  // namespace

std::string training_log_summary(const std::filesystem::path& train_log_csv,
                                 const std::string& data) {
  std::vector<TrainLogRow> rows;
  try {
    rows = read_train_log(train_log_csv);
  } catch (const std::exception&) {
    return {};  // missing, or not a log the trainer wrote: nothing to say about it
  }
  std::optional<double> first_val, last_val;
  long long steps = -1;
  for (const TrainLogRow& row : rows) {
    steps = std::max<long long>(steps, row.step);
    if (!std::isnan(row.val_loss)) {
      if (!first_val) first_val = row.val_loss;
      last_val = row.val_loss;
    }
  }
  if (!last_val || steps < 0) return {};
  char loss[96];
  if (first_val && *first_val != *last_val) {
    std::snprintf(loss, sizeof loss, "validation loss %.2f \u2192 %.2f nats/token", *first_val,
                  *last_val);
  } else {
    std::snprintf(loss, sizeof loss, "validation loss %.2f nats/token", *last_val);
  }
  return "trained " + std::to_string(steps) + " steps" + (data.empty() ? "" : " on " + data) +
         ", " + loss;
}

double LessonModel::weight_bytes(const ModelConfig& c) {
  const double d = c.hidden_size, layers = c.num_hidden_layers, vocab = c.vocab_size,
               ffn = c.intermediate_size;
  const double kv =
      c.num_attention_heads > 0 ? d * c.num_key_value_heads / c.num_attention_heads : d;
  const double per_layer = 2 * d * d + 2 * d * kv + 3 * d * ffn + 4 * d;
  return 8.0 * (2 * vocab * d + layers * per_layer + d);
}

LessonModel::LessonModel() : cache_(std::make_shared<ModelCache>()) {
  group_ = new QGroupBox("Lesson model");
  group_->setObjectName("lesson_model");
  group_->setToolTip(
      "One model for Depth attention, Magnitudes and Duality: a change here shows in all three");
  auto* form = new QFormLayout(group_);
  form->setContentsMargins(6, 6, 6, 6);
  choice = new QComboBox;
  choice->setObjectName("model_choice");
  choice->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  choice->setMinimumContentsLength(14);
  choice->setToolTip(
      "The model the three model views show: a shipped trained model (docs/training.md), the "
      "random "
      "model made from the settings below, or a directory opened with File > Open model directory");
  for (const auto& model : available_shipped_models())
    add_entry(model.label, Kind::trained, model.directory.string());
  add_entry("random model (the settings below)", Kind::random, "");
  random_button = new QPushButton("back to random");
  random_button->setObjectName("back_to_random");
  random_button->setToolTip("Show the random model again, with the settings it had");
  about = new QLabel;
  about->setObjectName("model_about");
  about->setWordWrap(true);
  about->setTextInteractionFlags(Qt::TextSelectableByMouse);
  size = new QLabel;
  size->setObjectName("model_size");
  size->setWordWrap(true);
  layers = spin(1, 64, 4);
  d_model = spin(8, 8192, 64);
  heads = spin(1, 64, 4);
  kv_heads = spin(1, 64, 2);
  ffn = spin(1, 32768, 172);
  vocab = spin(2, 262144, 256);
  seed = spin(0, 1'000'000, 1);
  seed->setSpecialValueText("n/a (trained)");
  block_size = spin(1, 8, 2);
  query_std = dspin(0, 10, 0.5, 2, 0.05);
  tokens = new QLineEdit(kRandomTokens);
  layers->setToolTip("Transformer layers; the model has L = 2 x layers sublayers (attention, MLP)");
  d_model->setToolTip("Width d of the residual stream (channels)");
  heads->setToolTip(
      "Attention heads over the sequence (must divide d; d / heads must be even for RoPE)");
  kv_heads->setToolTip("Key/value heads (grouped-query attention; must divide the heads)");
  ffn->setToolTip("SwiGLU width F of each MLP");
  vocab->setToolTip("Vocabulary size (token ids 0 .. vocab - 1)");
  seed->setToolTip("Seed of the random weights and pseudo-queries");
  query_std->setToolTip(
      "Standard deviation of the random pseudo-queries w_l (0: every read is a plain mean; 2: "
      "sharp, input-dependent rows). For a trained model: the RMS of its learned queries");
  block_size->setToolTip(
      "Block size S (sublayers per block) of the Block AttnRes reads, 1 .. L. S = 1 makes Block "
      "equal to Full AttnRes. A trained Block model keeps its own S");
  tokens->setToolTip(
      "Token ids separated by spaces (a trained byte-level model reads the bytes of a sentence)");
  layers->setObjectName("layers");
  d_model->setObjectName("d_model");
  heads->setObjectName("heads");
  kv_heads->setObjectName("kv_heads");
  ffn->setObjectName("ffn");
  vocab->setObjectName("vocab");
  seed->setObjectName("seed");
  query_std->setObjectName("query_std");
  block_size->setObjectName("block_size");
  tokens->setObjectName("tokens");
  auto* model_row = new QWidget;
  auto* model_layout = new QHBoxLayout(model_row);
  model_layout->setContentsMargins(0, 0, 0, 0);
  model_layout->addWidget(choice, 1);
  form->addRow("model", model_row);
  form->addRow(random_button);
  form->addRow(about);
  form->addRow("layers", layers);
  form->addRow("d_model", d_model);
  form->addRow("heads", heads);
  form->addRow("kv heads", kv_heads);
  form->addRow("ffn", ffn);
  form->addRow("vocab", vocab);
  form->addRow("seed", seed);
  form->addRow(size);
  // Play buttons: query std 0 -> 2 (the rows sharpen), S 1 -> L (the columns merge into block
  // summaries); each frame sets the field, and the open view redraws as for a hand-set value.
  QWidget* query_row = with_slider(query_std, 3.0, "query_std_slider");
  query_player_ = new Player(
      "animate_query_std", "Play query std from 0 to 2 in steps of 0.1: the rows sharpen",
      [this] { query_std->setValue(0.0); },
      [this] {
        if (!query_std->isEnabled() || query_std->value() >= 2.0 - 1e-9) return false;
        query_std->setValue(std::min(2.0, query_std->value() + 0.1));
        return true;
      });
  query_row->layout()->addWidget(query_player_);
  QWidget* block_row = with_slider(block_size, "block_size_slider");
  block_player_ = new Player(
      "animate_block_size", "Play the block size S from 1 to L: the columns merge into blocks",
      [this] { block_size->setValue(1); },
      [this] {
        if (!block_size->isEnabled() || block_size->value() >= block_size->maximum()) return false;
        block_size->setValue(block_size->value() + 1);
        return true;
      });
  block_row->layout()->addWidget(block_player_);
  form->addRow("query std", query_row);
  form->addRow("block size S", block_row);
  form->addRow("tokens", tokens);
  random_ = spin_values();
  accepted_ = random_;
  confirm = [this](const QString& question) {
    return QMessageBox::question(group_, "A large model", question,
                                 QMessageBox::Yes | QMessageBox::No,
                                 QMessageBox::No) == QMessageBox::Yes;
  };
  QObject::connect(tokens, &QLineEdit::textEdited, tokens, [this] { tokens_edited_ = true; });
  QObject::connect(choice, &QComboBox::currentIndexChanged, choice, [this](int index) {
    const Entry& entry = entries_.at(static_cast<std::size_t>(index));
    if (entry.kind == Kind::loaded && read_elsewhere && shown_ >= 0) {
      const std::string dir = entry.directory;
      {
        const QSignalBlocker blocker(choice);
        choice->setCurrentIndex(shown_);  // until the model is read (use_directory)
      }
      read_elsewhere(dir);
      return;
    }
    apply_choice();
    notify();
  });
  QObject::connect(random_button, &QPushButton::clicked, random_button,
                   [this] { back_to_random(); });
  // Shape changes are checked for size first; the other knobs go straight to the views.
  on_change(group_, {layers, d_model, heads, kv_heads, ffn, vocab}, [this] { shape_changed(); });
  on_change(group_, {seed, block_size, query_std, tokens}, [this] { notify(); });
  // Default: the trained Full AttnRes model when it ships, else the random model.
  const int full = choice->findText("trained: Full AttnRes");
  {
    const QSignalBlocker blocker(choice);
    choice->setCurrentIndex(full >= 0 ? full : random_index());
  }
  apply_choice();
}

LessonModel::~LessonModel() {
  // The panel may still be in a view's layout; the widgets it owns go with it. Nothing of ours
  // may answer their signals afterwards.
  choice->disconnect(choice);
  tokens->disconnect(tokens);
  random_button->disconnect(random_button);
  if (group_->parent() == nullptr) delete group_;
}

QWidget* LessonModel::panel() const {
  return group_;
}

void LessonModel::show_in(QWidget* slot) {
  if (slot == nullptr || slot == slot_) return;
  slot_ = slot;
  if (auto* layout = qobject_cast<QVBoxLayout*>(slot->layout())) {
    layout->insertWidget(0, group_);
  } else {
    group_->setParent(slot);
  }
  group_->show();
}

void LessonModel::subscribe(std::function<void()> on_change) {
  listeners_.push_back(std::move(on_change));
}

void LessonModel::notify() {
  for (const auto& listener : listeners_) listener();
}

QWidget* LessonModel::field(const std::string& key) const {
  if (key == "tokens") return tokens;
  if (key == "layers" || key == "num_hidden_layers") return layers;
  if (key == "hidden_size" || key == "d_model") return d_model;
  if (key == "num_attention_heads" || key == "heads") return heads;
  if (key == "num_key_value_heads") return kv_heads;
  if (key == "intermediate_size") return ffn;
  if (key == "vocab_size") return vocab;
  if (key == "block_size") return block_size;
  return nullptr;
}

int LessonModel::random_index() const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].kind == Kind::random) return static_cast<int>(i);
  }
  return -1;
}

AttnResConfig LessonModel::own_scheme() const {
  if (kind_ != Kind::random && config_) return config_->attn_res;
  AttnResConfig full;
  full.mode = ResidualMode::full;
  return full;
}

// The one read of a model directory (read_model_directory); an error is kept for the views to
// show.
std::shared_ptr<const OpenedModel> LessonModel::read_directory(const std::string& dir) {
  return directory_reader(dir)({});
}

std::function<std::shared_ptr<const OpenedModel>(const Progress&)> LessonModel::directory_reader(
    const std::string& dir) {
  ++directory_reads_;
  return [dir](const Progress& progress) { return read_model_directory(dir, progress); };
}

std::shared_ptr<const OpenedModel> LessonModel::open_directory(const std::string& dir) {
  auto opened = read_directory(dir);
  if (opened->error) std::rethrow_exception(opened->error);
  return opened;
}

void LessonModel::use_directory(std::shared_ptr<const OpenedModel> model) {
  const std::string& dir = model->directory;
  {
    const QSignalBlocker blocker(choice);
    int loaded = -1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].kind == Kind::loaded) loaded = static_cast<int>(i);
    }
    if (loaded < 0) {
      add_entry("", Kind::loaded, dir);
      loaded = choice->count() - 1;
    }
    entries_[static_cast<std::size_t>(loaded)].label = "loaded: " + dir;
    entries_[static_cast<std::size_t>(loaded)].directory = dir;
    choice->setItemText(loaded, QString::fromStdString("loaded: " + dir));
    choice->setCurrentIndex(loaded);
  }
  apply_choice(std::move(model));
  notify();
}

void LessonModel::back_to_random() {
  if (kind_ == Kind::random) return;
  choice->setCurrentIndex(random_index());  // applies and notifies
}

LessonModel::Snapshot LessonModel::snapshot() const {
  Snapshot s;
  s.opened = opened_;
  s.origin = kind_ == Kind::trained ? "trained" : kind_ == Kind::loaded ? "loaded" : "";
  if (kind_ != Kind::random && config_) {
    s.config = *config_;
  } else {
    s.config.num_hidden_layers = layers->value();
    s.config.hidden_size = d_model->value();
    s.config.num_attention_heads = heads->value();
    s.config.num_key_value_heads = kv_heads->value();
    s.config.intermediate_size = ffn->value();
    s.config.vocab_size = vocab->value();
    s.config.attn_res = own_scheme();
  }
  s.random.seed = static_cast<std::uint64_t>(std::max(0, seed->value()));
  s.random.query_std = query_std->value();
  s.block_size = block_size->value();
  s.tokens = tokens->text().toStdString();
  s.cache = cache_;
  return s;
}

std::vector<QSpinBox*> LessonModel::shape_spins() const {
  return {layers, d_model, heads, kv_heads, ffn, vocab, seed};
}

LessonModel::SpinValues LessonModel::spin_values() const {
  SpinValues values;
  values.query_std = query_std->value();
  for (QSpinBox* box : shape_spins()) values.ints.push_back(box->value());
  values.ints.push_back(block_size->value());
  return values;
}

void LessonModel::add_entry(const std::string& label, Kind entry_kind, const std::string& dir) {
  entries_.push_back({label, entry_kind, dir});
  choice->addItem(QString::fromStdString(label));
}

ModelConfig LessonModel::shape_config(const std::vector<int>* ints) const {
  // The random model's shape from its spin boxes, or from saved values in shape_spins() order.
  const auto spins = shape_spins();
  auto value = [&](std::size_t i) { return ints != nullptr ? (*ints)[i] : spins[i]->value(); };
  ModelConfig config;
  config.num_hidden_layers = value(0);
  config.hidden_size = value(1);
  config.num_attention_heads = value(2);
  config.num_key_value_heads = value(3);
  config.intermediate_size = value(4);
  config.vocab_size = value(5);
  return config;
}

void LessonModel::shape_changed() {
  if (kind_ != Kind::random) return;
  const double bytes = weight_bytes(shape_config());
  if (bytes > 1e9 && weight_bytes(shape_config(&accepted_.ints)) <= 1e9) {
    char question[300];
    std::snprintf(
        question, sizeof question,
        "This random model needs about %.1f GB of memory for its weights (double precision), and "
        "every forward pass will take long. Build it?",
        bytes / 1e9);
    if (!confirm || !confirm(QString::fromUtf8(question))) {
      // Back to the last accepted shape, without a recompute.
      std::vector<QSignalBlocker> blockers;
      blockers.reserve(8);
      const auto spins = shape_spins();
      for (QSpinBox* box : spins) blockers.emplace_back(box);
      for (std::size_t i = 0; i < spins.size(); ++i) spins[i]->setValue(accepted_.ints[i]);
      update_block_range();
      return;
    }
  }
  accepted_ = spin_values();
  update_block_range();
  notify();
}

void LessonModel::update_block_range() {
  const int sublayers =
      kind_ != Kind::random && config_ ? config_->sublayers() : 2 * layers->value();
  set_spin_range(block_size, 1, std::max(1, sublayers));
  char text[160];
  const double bytes = weight_bytes(shape_config());
  std::snprintf(text, sizeof text, "L = %d sublayers; weights about %.3g MB", 2 * layers->value(),
                bytes / 1e6);
  size->setText(QString::fromUtf8(text));
  size->setStyleSheet(bytes > 1e9 ? "QLabel { color: #8a1c1c; }" : "");
}

// Applies the combo's entry: the directory read once (or `opened`, already read), every field
// from the model's config (disabled), or the random model's own settings back; default tokens and
// the line about the model. No notify.
void LessonModel::apply_choice(std::shared_ptr<const OpenedModel> opened) {
  shown_ = choice->currentIndex();
  const Entry& entry = entries_.at(static_cast<std::size_t>(shown_));
  if (kind_ == Kind::random && entry.kind != Kind::random)
    random_ = spin_values();  // back when random returns
  kind_ = entry.kind;
  choice->setToolTip(choice->currentText());  // a long "loaded: DIR" does not fit the box
  config_.reset();
  opened_.reset();  // the last model's weights go before the next one's are read
  if (kind_ != Kind::random) opened_ = opened ? std::move(opened) : read_directory(entry.directory);
  std::vector<QSignalBlocker> blockers;
  blockers.reserve(16);
  for (QSpinBox* box : shape_spins()) blockers.emplace_back(box);
  blockers.emplace_back(block_size);
  blockers.emplace_back(query_std);
  blockers.emplace_back(tokens);
  random_button->setEnabled(kind_ != Kind::random);
  if (kind_ == Kind::random) {
    show_random_model();
  } else {
    show_directory_model();
  }
  // A ▶ animates its field only where the field can change: a loaded model's own S (a Block
  // model) and learned queries are facts of the model, and playing them would overwrite nothing
  // the views use.
  for (auto [player, field] : {std::pair<Player*, QWidget*>{query_player_, query_std},
                               std::pair<Player*, QWidget*>{block_player_, block_size}}) {
    const bool animates = field->isEnabled() && (player != block_player_ || block_size_used_);
    if (!animates) player->stop();
    player->setEnabled(animates);
  }
}

void LessonModel::set_block_size_used(bool used) {
  block_size_used_ = used;
  const bool animates = block_size->isEnabled() && used;
  if (!animates) block_player_->stop();
  block_player_->setEnabled(animates);
  block_player_->setToolTip(
      used ? QString()
           : QString("S changes nothing in this view: no scheme it shows takes the lesson's S "
                     "(pick block, or compare with it)"));
}

// The random model's own settings back, its tokens and its line.
void LessonModel::show_random_model() {
  seed->setMinimum(0);
  const auto spins = shape_spins();
  for (std::size_t i = 0; i < spins.size(); ++i) spins[i]->setValue(random_.ints[i]);
  query_std->setValue(random_.query_std);
  update_block_range();
  block_size->setValue(random_.ints.back());
  accepted_ = random_;
  if (!tokens_edited_) {
    tokens->setText(kRandomTokens);
    tokens->setToolTip("Token ids separated by spaces");
  }
  about->setText(
      "Full AttnRes with random weights and queries from the settings below: nothing learned");
  set_shape_enabled(true);
  block_size->setEnabled(true);
}

// Every field from the opened model's config, its tokens and the line about it (with its
// training log). A directory that did not load still shows its config.json when that much
// reads; the views' banners say why the weights did not load.
void LessonModel::show_directory_model() {
  const std::filesystem::path dir(opened_->directory);
  std::string line;
  if (opened_->weights) {
    config_ = opened_->weights->config;
  } else {
    try {
      config_ = parse_model_config(read_document(dir / "config.json", "a config.json file"),
                                   (dir / "config.json").string());
    } catch (const std::exception& error) {
      line = error.what();  // the forward pass will report it in the banner too
    }
  }
  if (config_) {
    // Every field from the model: its shape, no seed, its learned queries' RMS, its own S.
    layers->setValue(config_->num_hidden_layers);
    d_model->setValue(config_->hidden_size);
    heads->setValue(config_->num_attention_heads);
    kv_heads->setValue(config_->num_key_value_heads);
    ffn->setValue(config_->intermediate_size);
    vocab->setValue(config_->vocab_size);
    seed->setMinimum(-1);
    seed->setValue(-1);  // "n/a (trained)"
    // The views report a model that does not load.
    query_std->setValue(opened_->weights ? pseudo_query_rms(*opened_->weights) : 0.0);
    update_block_range();
    if (config_->attn_res.mode == ResidualMode::block)
      block_size->setValue(config_->attn_res.block_size);
    line = config_->attn_res.describe() + ", " + std::to_string(config_->num_hidden_layers) +
           " layers (L = " + std::to_string(config_->sublayers()) +
           "), d = " + std::to_string(config_->hidden_size);
  }
  if (kind_ == Kind::trained) {
    const std::string log = training_log_summary(dir / kTrainLogFile, "lab-corpus.txt");
    line += (log.empty() ? "; shipped trained model" : "; " + log) + " (docs/training.md)";
  } else {
    const std::string log = training_log_summary(dir / kTrainLogFile);
    line = "loaded " + opened_->directory + ": " + line + (log.empty() ? "" : "; " + log);
  }
  about->setText(QString::fromStdString(line));
  // Trained models are byte-level: feed them text. A loaded model only when its vocabulary is
  // bytes.
  const bool bytes = kind_ == Kind::trained || (config_ && config_->vocab_size == 256);
  if (!tokens_edited_) {
    tokens->setText(bytes ? QString::fromStdString(byte_token_ids(kTrainedText)) : kRandomTokens);
    tokens->setCursorPosition(0);
    tokens->setToolTip(bytes ? QString("the bytes of \"%1\"").arg(kTrainedText)
                             : QString("Token ids separated by spaces"));
  }
  set_shape_enabled(false);
  // S is the model's own for a Block model; otherwise it sets the Block reads run on these weights.
  block_size->setEnabled(!(config_ && config_->attn_res.mode == ResidualMode::block));
}

void LessonModel::set_shape_enabled(bool enabled) {
  for (QWidget* w :
       {static_cast<QWidget*>(layers), static_cast<QWidget*>(d_model), static_cast<QWidget*>(heads),
        static_cast<QWidget*>(kv_heads), static_cast<QWidget*>(ffn), static_cast<QWidget*>(vocab),
        static_cast<QWidget*>(seed), static_cast<QWidget*>(query_std)}) {
    w->setEnabled(enabled);
  }
  if (auto* slider = query_std->parentWidget()->findChild<QWidget*>("query_std_slider"))
    slider->setEnabled(enabled);
}

}  // namespace attnres::gui
