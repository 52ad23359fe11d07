// ModelView, the base of the three views on a model (model_view.hpp): the scheme pickers, a
// picked scheme resolved against the lesson model's weights, one forward pass of a view, and the
// lesson model's panel moving to whichever model view is on screen (docs/schemes.md "Comparing
// schemes").
#include "model_view.hpp"

#include <QComboBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QShowEvent>
#include <QVBoxLayout>
#include <algorithm>
#include <mutex>

#include "attnres/cost.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// How a view names a residual scheme it runs on the chosen model (describe()): the model's own
// scheme is "trained Full AttnRes"; another scheme on a trained or loaded model's weights says
// whose weights they are; on the random model the scheme's name alone.
std::string scheme_label(const AttnResConfig& scheme, const ModelConfig& model,
                         const std::string& origin) {
  std::string label = scheme.describe();
  if (origin.empty()) return label;
  if (scheme == model.attn_res) return origin + " " + label;
  label += " on the ";
  label += origin;
  label += " ";
  label += model.attn_res.describe();
  label += " model";
  return label;
}

QComboBox* model_scheme_picker(bool compare) {
  QComboBox* combo = named_scheme_picker("");
  combo->insertItem(0, "model's own", QString(kOwnScheme));
  combo->setItemData(0, "the scheme the model was trained with (the random model: Full AttnRes)",
                     Qt::ToolTipRole);
  if (compare) {
    combo->insertItem(0, "none", QString(kNoScheme));
    combo->setItemData(0, "show one scheme only", Qt::ToolTipRole);
  }
  combo->setCurrentIndex(0);
  combo->setEditable(true);
  combo->setInsertPolicy(QComboBox::NoInsert);
  combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  combo->setMinimumContentsLength(16);
  // A long entry shows its start (the line edit would scroll to its end).
  QObject::connect(combo, &QComboBox::currentIndexChanged, combo,
                   [combo] { combo->lineEdit()->setCursorPosition(0); });
  combo->setToolTip(
      "A named scheme (the cost explorer's list), or type a spec such as full:heads=4,gate=sigmoid "
      "or "
      "mhc:streams=2 and press Enter (docs/schemes.md). The model's weights are converted: shared "
      "tensors kept, new ones at their start values.");
  return combo;
}

// What a picker holds: the data of the entry its text names, else the typed text (a spec).
std::string picked_scheme(const QComboBox* combo, const char* when_empty) {
  const QString text = combo->currentText().trimmed();
  if (text.isEmpty()) return when_empty;
  const int index = combo->findText(text);
  return index >= 0 ? combo->itemData(index).toString().toStdString() : text.toStdString();
}

// The sizes named schemes are made for on this model: its L and d, Block's S from the view's
// spin box (a Block model's own S), mHC's m = 4.
CostInputs model_scheme_sizes(const ModelConfig& model, int block_size) {
  CostInputs in;
  in.sublayers = model.sublayers();
  in.d_model = model.hidden_size;
  in.block_size = std::clamp(block_size, 1, std::max(1, model.sublayers()));
  in.streams = 4;
  if (auto problem = try_resolve_cost_inputs(in)) throw Error(problem->message);
  return in;
}

// `pick` (a picker's spec or kOwnScheme) read on `model`.
SchemeOnModel scheme_on_model(const std::string& pick, const char* picker,
                              const ModelWeights<double>& model,
                              const LessonModel::Snapshot& snapshot) {
  SchemeOnModel out;
  if (pick == kOwnScheme) {
    out.scheme = model.config.attn_res;
  } else {
    std::string where = picker;
    where += " '";
    where += pick;
    where += "'";
    try {
      out.scheme = parse_scheme_spec(pick, model_scheme_sizes(model.config, snapshot.block_size));
    } catch (const Error& error) {
      throw Error(where + ": " + error.what());
    }
    ModelConfig config = model.config;
    config.attn_res = out.scheme;
    config.validate(where);  // e.g. heads that do not divide d, S > L
  }
  out.label = scheme_label(out.scheme, model.config, snapshot.origin);
  out.name = out.scheme == model.config.attn_res
                 ? scheme_label(out.scheme, model.config, snapshot.origin)
                 : out.scheme.describe();
  out.model = out.scheme == model.config.attn_res ? model : convert_scheme(model, out.scheme);
  return out;
}

}  // namespace

namespace {

// The one forward engine of the model views (and its thread pool), kept across runs: a run on
// other weights copies them in and re-prepares the engine (ForwardEngine::set_model) instead of
// starting new threads. Runs come from the views' worker threads, one at a time.
class TraceEngine {
 public:
  ForwardTrace trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                     const ForwardOptions& options) {
    const std::lock_guard<std::mutex> lock(mutex_);
    model_ = model;
    if (engine_) {
      engine_->set_model(model_);
    } else {
      engine_ = std::make_unique<ForwardEngine<double>>(model_, EngineOptions{});
    }
    return engine_->forward(tokens, options).trace;
  }

 private:
  std::mutex mutex_;
  ModelWeights<double> model_;
  std::unique_ptr<ForwardEngine<double>> engine_;
};

// Never destroyed: its matrix products hold oneDNN objects whose library state would be gone
// by the time a static's destructor ran at exit (it is still reachable: no leak is reported).
TraceEngine& trace_engine() {
  static TraceEngine* engine = new TraceEngine;
  return *engine;
}

}  // namespace

ForwardTrace scheme_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                          Progress progress, bool mixing) {
  ForwardOptions options;
  options.progress = std::move(progress);
  options.record_mixing = mixing;
  return trace_engine().trace(model, tokens, options);
}

ModelView::ModelView(const ViewEntry& entry, const ViewHost& host) : View(entry, host) {
  if (host.lesson == nullptr) own_lesson_ = std::make_unique<LessonModel>();
  lesson_ = host.lesson != nullptr ? host.lesson : own_lesson_.get();
}

ModelView::~ModelView() {
  // A panel this view holds goes with the view; the lesson model must not point at its slot.
  if (own_lesson_ == nullptr && lesson_->slot() == slot_) lesson_->panel()->setParent(nullptr);
}

QWidget* ModelView::make_inputs(QFormLayout*& form) {
  auto* inputs = new QWidget;
  auto* column = new QVBoxLayout(inputs);
  column->setContentsMargins(0, 0, 0, 0);
  slot_ = new QWidget;
  slot_->setObjectName("lesson_slot");
  auto* slot_layout = new QVBoxLayout(slot_);
  slot_layout->setContentsMargins(0, 0, 0, 0);
  slot_->setMinimumWidth(
      lesson_->panel()->minimumSizeHint().width());  // the panel may move here later
  column->addWidget(slot_);
  auto* own = new QWidget;
  form = new QFormLayout(own);
  form->setContentsMargins(6, 0, 6, 0);
  column->addWidget(own);
  column->addStretch(1);
  scheme_ = model_scheme_picker(false);
  scheme_->setObjectName("scheme");
  compare_ = model_scheme_picker(true);
  compare_->setObjectName("compare");
  form->addRow("scheme", scheme_);
  form->addRow("compare with", compare_);
  if (lesson_->slot() == nullptr) lesson_->show_in(slot_);
  lesson_->subscribe([this] { lesson_changed(); });
  show_own_scheme();
  return inputs;
}

std::vector<QWidget*> ModelView::model_inputs() const {
  return {scheme_, compare_};
}

ModelView::Picks ModelView::picks() const {
  return {picked_scheme(scheme_, kOwnScheme), picked_scheme(compare_, kNoScheme)};
}

std::vector<SchemeOnModel> ModelView::picked_models(const Picks& picks,
                                                    const ModelWeights<double>& model,
                                                    const LessonModel::Snapshot& snapshot) {
  std::vector<SchemeOnModel> out;
  out.push_back(scheme_on_model(picks.scheme, "scheme", model, snapshot));
  if (picks.comparing())
    out.push_back(scheme_on_model(picks.compare, "compare with", model, snapshot));
  return out;
}

void ModelView::show_own_scheme() {
  const QString own =
      QString::fromStdString(std::string("model's own: ") + lesson_->own_scheme().describe());
  for (QComboBox* picker : {scheme_, compare_}) {
    picker->setItemText(picker->findData(QString(kOwnScheme)), own);
    picker->lineEdit()->setCursorPosition(0);
  }
}

void ModelView::lesson_changed() {
  show_own_scheme();
  if (!isVisible() && window()->isVisible()) {
    dirty_ = true;
    set_stale("not current: the lesson model changed (shown when this tab opens)");
    return;
  }
  recompute();
}

void ModelView::showEvent(QShowEvent* event) {
  View::showEvent(event);
  lesson_->show_in(slot_);
  if (dirty_) {
    dirty_ = false;
    recompute();
  }
}

std::vector<QWidget*> ModelView::fields_for_error(const std::string& message) const {
  if (message.rfind("tokens:", 0) == 0) return {lesson_->tokens};
  if (message.rfind("scheme '", 0) == 0) return {scheme_};
  if (message.rfind("compare with '", 0) == 0) return {compare_};
  // The random model's shape (ModelConfig::validate names its keys): the first key the message
  // names is the one it blames ("num_attention_heads (3) must divide hidden_size (64)": heads).
  static const std::pair<const char*, const char*> kKeys[] = {
      {"num_attention_heads", "heads"},
      {"num_key_value_heads", "num_key_value_heads"},
      {"head_dim", "heads"},
      {"hidden_size", "hidden_size"},
      {"num_hidden_layers", "layers"},
      {"intermediate_size", "intermediate_size"},
      {"vocab_size", "vocab_size"},
      {"block_size", "block_size"}};
  std::size_t first = std::string::npos;
  QWidget* blamed = nullptr;
  for (const auto& [key, field] : kKeys) {
    const std::size_t at = message.find(key);
    if (at < first) {
      if (QWidget* widget = lesson_->field(field)) first = at, blamed = widget;
    }
  }
  if (blamed != nullptr) return {blamed};
  return {};
}

}  // namespace attnres::gui
