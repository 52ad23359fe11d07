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

}  // namespace

namespace {}  // namespace

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
  for (QComboBox* picker : {scheme_, compare_})
    QObject::connect(picker, &QComboBox::currentTextChanged, this,
                     [this] { update_block_player(); });
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

void ModelView::show_own_scheme() {
  const QString own =
      QString::fromStdString(std::string("model's own: ") + lesson_->own_scheme().describe());
  for (QComboBox* picker : {scheme_, compare_}) {
    picker->setItemText(picker->findData(QString(kOwnScheme)), own);
    picker->lineEdit()->setCursorPosition(0);
  }
}

bool ModelView::uses_block_size() const {
  return picks_use_block_size(picks(), lesson_->snapshot().config);
}

void ModelView::update_block_player() {
  if (lesson_->slot() == slot_) lesson_->set_block_size_used(uses_block_size());
}

void ModelView::lesson_changed() {
  show_own_scheme();
  update_block_player();
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
  update_block_player();
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
