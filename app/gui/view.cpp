// The View base: each tab's own error banner, the red frame on the inputs that caused an error,
// and the stale marks over charts that do not show the current inputs.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPainter>
#include <QResizeEvent>
#include <QSpinBox>
#include <QStyle>
#include <QTabBar>
#include <QTableView>
#include <QTimer>
#include <algorithm>

#include "attnres/format.hpp"
#include "lesson_model.hpp"
#include "view_kit.hpp"
#include "views.hpp"
#include "widgets.hpp"

namespace attnres::gui {

namespace {

// A translucent veil with a one-line reason over a chart that does not show the current inputs.
// It follows its chart's size and lets the mouse through (hover readouts keep working).
class StaleOverlay : public QWidget {
 public:
  explicit StaleOverlay(QWidget* target) : QWidget(target), target_(target) {
    setObjectName("stale_overlay");
    setAttribute(Qt::WA_TransparentForMouseEvents);
    target->installEventFilter(this);
    setGeometry(target->rect());
    raise();
  }
  void set_reason(const QString& reason) {
    reason_ = reason;
    setVisible(!reason.isEmpty());
    if (!reason.isEmpty()) {
      setGeometry(target_->rect());
      raise();
      update();
    }
  }
  const QString& reason() const { return reason_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (watched == target_ && event->type() == QEvent::Resize) setGeometry(target_->rect());
    return false;
  }
  void paintEvent(QPaintEvent*) override {
    QPainter painter(this);
    painter.fillRect(rect(), QColor(255, 255, 255, 150));
    QFont font = painter.font();
    font.setItalic(true);
    font.setBold(true);
    painter.setFont(font);
    const QRectF box = QRectF(rect()).adjusted(8, 8, -8, -8);
    const QRectF text =
        painter.boundingRect(box, Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap, reason_);
    painter.fillRect(text.adjusted(-6, -3, 6, 3), QColor(255, 244, 214, 235));
    painter.setPen(QColor(120, 80, 0));
    painter.drawText(box, Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap, reason_);
  }

 private:
  QWidget* target_;
  QString reason_;
};

// Whether `w` or a widget it sits in (up to `root`) shows something the inputs do not change.
bool inputs_independent(const QWidget* w, const QWidget* root) {
  for (; w != nullptr && w != root; w = w->parentWidget()) {
    if (w->property("attnres_inputs_independent").toBool()) return true;
  }
  return false;
}

// The results of a view: every chart panel, heatmap, Gantt chart and table under its content
// (a table of numbers under a veiled chart is as stale as the chart).
std::vector<QWidget*> chart_widgets(QWidget* root) {
  // (dynamic_cast: these classes have no Q_OBJECT, so qobject_cast cannot tell them apart)
  std::vector<QWidget*> out;
  if (root == nullptr) return out;
  for (auto* w : root->findChildren<QWidget*>()) {
    if (!(dynamic_cast<ChartPanel*>(w) || dynamic_cast<HeatmapWidget*>(w) ||
          dynamic_cast<GanttWidget*>(w) || qobject_cast<QTableView*>(w)))
      continue;
    if (!inputs_independent(w, root)) out.push_back(w);
  }
  return out;
}

void set_overlay(QWidget* target, const QString& reason) {
  StaleOverlay* overlay = nullptr;
  for (auto* child : target->findChildren<QWidget*>(QString(), Qt::FindDirectChildrenOnly)) {
    if (auto* mine = dynamic_cast<StaleOverlay*>(child)) overlay = mine;
  }
  if (overlay == nullptr) {
    if (reason.isEmpty()) return;
    overlay = new StaleOverlay(target);
  }
  overlay->set_reason(reason);
}

void mark_field(QWidget* field, bool error) {
  field->setProperty("attnres_error", error);
  // A red field through the palette (a style sheet would change its size and move the layout).
  if (error) {
    QPalette palette = field->palette();
    palette.setColor(QPalette::Base, QColor(253, 214, 211));
    palette.setColor(QPalette::Button, QColor(253, 214, 211));
    palette.setColor(QPalette::Text, QColor(138, 28, 28));
    field->setPalette(palette);
  } else {
    field->setPalette(QPalette());
    field->setAttribute(Qt::WA_SetPalette, false);
  }
}

}  // namespace

// One input of a tab and its value (remember_inputs / restore_inputs).
struct View::SavedInput {
  QPointer<QWidget> widget;
  double value = 0, low = 0, high = 0;  // spin boxes (and their ranges), check boxes, tab bars
  QString text;                         // line edits, combo boxes (with their item data)
  QVariant data;
};

void View::remember_inputs() {
  remember_into(saved_inputs_);
}

void View::restore_inputs() {
  restore_from(saved_inputs_);
}

void View::remember_before_lesson() {
  remember_into(before_lesson_);
  const ExplorerState* state = cost_state();
  state_before_lesson_ = state ? std::optional<ExplorerState>(*state) : std::nullopt;
}

void View::restore_before_lesson() {
  restore_from(before_lesson_);
  if (state_before_lesson_) set_state(*state_before_lesson_);
}

void View::remember_into(std::vector<SavedInput>& saved) const {
  saved.clear();
  const QWidget* lesson_panel = host_.lesson != nullptr ? host_.lesson->panel() : nullptr;
  for (QWidget* w : findChildren<QWidget*>()) {
    if (lesson_panel != nullptr && (w == lesson_panel || lesson_panel->isAncestorOf(w))) continue;
    // The line edits inside spin boxes and combo boxes belong to them.
    if (qobject_cast<QLineEdit*>(w) &&
        (qobject_cast<QAbstractSpinBox*>(w->parent()) || qobject_cast<QComboBox*>(w->parent())))
      continue;
    SavedInput in;
    in.widget = w;
    if (auto* box = qobject_cast<QSpinBox*>(w)) {
      in.value = box->value(), in.low = box->minimum(), in.high = box->maximum();
    } else if (auto* dbox = qobject_cast<QDoubleSpinBox*>(w)) {
      in.value = dbox->value(), in.low = dbox->minimum(), in.high = dbox->maximum();
    } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
      in.text = combo->currentText(), in.data = combo->currentData();
    } else if (auto* edit = qobject_cast<QLineEdit*>(w)) {
      in.text = edit->text();
    } else if (auto* check = qobject_cast<QCheckBox*>(w)) {
      in.value = check->isChecked() ? 1 : 0;
    } else if (auto* bar = qobject_cast<QTabBar*>(w)) {
      in.value = bar->currentIndex();
    } else {
      continue;
    }
    saved.push_back(std::move(in));
  }
}

void View::restore_from(const std::vector<SavedInput>& saved) {
  // Through the inputs' own signals, so that what follows a value (a range, a greyed field, a
  // slider) follows it; the view's changes coalesce into one recompute. Twice: a value whose
  // range depends on another input (S <= L) may be clamped on the first pass.
  for (int pass = 0; pass < 2; ++pass) {
    for (const SavedInput& in : saved) {
      QWidget* w = in.widget;
      if (w == nullptr) continue;
      if (auto* box = qobject_cast<QSpinBox*>(w)) {
        if (box->minimum() != static_cast<int>(in.low) ||
            box->maximum() != static_cast<int>(in.high))
          set_spin_range(box, static_cast<int>(in.low), static_cast<int>(in.high));
        if (box->value() != static_cast<int>(in.value)) box->setValue(static_cast<int>(in.value));
      } else if (auto* dbox = qobject_cast<QDoubleSpinBox*>(w)) {
        if (dbox->minimum() != in.low || dbox->maximum() != in.high)
          dbox->setRange(in.low, in.high);
        if (dbox->value() != in.value) dbox->setValue(in.value);
      } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
        int index = in.data.isValid() ? combo->findData(in.data) : -1;
        if (index < 0) index = combo->findText(in.text);
        if (index >= 0 && index != combo->currentIndex()) {
          combo->setCurrentIndex(index);
          emit combo->activated(index);  // what some views listen to
        }
      } else if (auto* edit = qobject_cast<QLineEdit*>(w)) {
        if (edit->text() != in.text) {
          edit->setText(in.text);
          emit edit->editingFinished();  // what the views recompute on
        }
      } else if (auto* check = qobject_cast<QCheckBox*>(w)) {
        check->setChecked(in.value != 0);
      } else if (auto* bar = qobject_cast<QTabBar*>(w)) {
        bar->setCurrentIndex(static_cast<int>(in.value));
      }
    }
  }
}

View::View(const ViewEntry& entry, ViewHost host, QWidget* parent)
    : QWidget(parent),
      name_(entry.name),
      title_(QString::fromUtf8(entry.title.data(), static_cast<int>(entry.title.size()))),
      host_(std::move(host)) {
  banner_ = new QLabel(this);
  banner_->setObjectName("view_error");
  banner_->setWordWrap(true);
  banner_->setTextFormat(Qt::PlainText);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setStyleSheet(
      "QLabel { background: #fde2e1; color: #8a1c1c; padding: 6px; border: 1px solid #e0a3a0; }");
  banner_->setVisible(false);
  pending_timer_ = new QTimer(this);
  pending_timer_->setSingleShot(true);
  pending_timer_->setInterval(250);  // fast results never flash a mark
  connect(pending_timer_, &QTimer::timeout, this, [this] {
    if (pending_ && banner_->isHidden()) set_stale("computing…");
  });
}

View::~View() = default;

void View::show_error(const std::string& message, const std::vector<QWidget*>& fields,
                      bool inputs_invalid) {
  // Plain text, escaped like the CLI's messages: bytes from hostile files never reach the screen
  // raw.
  banner_->setText(QString::fromStdString("error: " + printable_text(message)));
  banner_->setVisible(true);
  for (const auto& field : error_fields_) {
    if (field) mark_field(field, false);
  }
  error_fields_.clear();
  for (QWidget* field : fields.empty() ? fields_for_error(message) : fields) {
    if (field == nullptr) continue;
    mark_field(field, true);
    error_fields_.emplace_back(field);
  }
  place_banner();
  if (inputs_invalid) set_stale("not current: the inputs are invalid (see the error above)");
}

void View::clear_error() {
  banner_->setVisible(false);
  banner_->clear();
  for (const auto& field : error_fields_) {
    if (field) mark_field(field, false);
  }
  error_fields_.clear();
}

std::string View::error_text() const {
  return banner_->isHidden() ? std::string() : banner_->text().toStdString();
}

std::vector<QWidget*> View::error_fields() const {
  std::vector<QWidget*> out;
  for (const auto& field : error_fields_) {
    if (field) out.push_back(field);
  }
  return out;
}

void View::set_stale(const QString& reason) {
  stale_ = reason;
  for (QWidget* chart : chart_widgets(content_ ? content_ : this)) set_overlay(chart, reason);
  if (!banner_->isHidden()) banner_->raise();
}

void View::set_pending(bool pending) {
  pending_ = pending;
  if (pending) {
    pending_timer_->start();
  } else {
    pending_timer_->stop();
  }
}

void View::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  place_banner();
}

// Over the top of the content column (or the whole view), on top of everything: showing it
// moves no widget.
void View::place_banner() {
  if (banner_->isHidden()) return;
  QRect area = rect().adjusted(6, 6, -6, 0);
  if (content_ != nullptr && content_->isVisible()) {
    area = QRect(content_->mapTo(this, QPoint(0, 0)), content_->size());
  }
  const int height =
      std::min(banner_->heightForWidth(area.width()), std::max(40, area.height() / 2));
  banner_->setGeometry(area.left(), area.top(), area.width(),
                       std::max(height, banner_->sizeHint().height()));
  banner_->raise();
}

}  // namespace attnres::gui
