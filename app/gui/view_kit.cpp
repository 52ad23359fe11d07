// Small pieces every view uses: spin boxes, the three-column layout, change coalescing, pickers.
#include "view_kit.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QScrollArea>
#include <QScrollBar>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "attnres/cost.hpp"
#include "attnres/report.hpp"

namespace attnres::gui {

QSpinBox* spin(int low, int high, int value) {
  auto* box = new QSpinBox;
  box->setRange(low, high);
  box->setValue(value);
  box->setKeyboardTracking(false);
  return box;
}

QDoubleSpinBox* dspin(double low, double high, double value, int decimals, double step) {
  auto* box = new QDoubleSpinBox;
  box->setRange(low, high);
  box->setDecimals(decimals);
  box->setSingleStep(step);
  box->setValue(value);
  box->setKeyboardTracking(false);
  return box;
}

QTextBrowser* explanation(const QString& html) {
  auto* text = new QTextBrowser;
  text->setObjectName("explanation_text");
  text->setHtml(html);
  text->setMinimumWidth(200);
  text->setOpenExternalLinks(false);
  return text;
}

ExplanationPanel::ExplanationPanel(const QString& html, QWidget* parent) : QWidget(parent) {
  setObjectName("explanation_panel");
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 0, 0, 0);
  toggle_ = new QToolButton;
  toggle_->setObjectName("explanation_toggle");
  toggle_->setAutoRaise(true);
  toggle_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  text_ = explanation(html);
  column->addWidget(toggle_, 0, Qt::AlignRight);
  column->addWidget(text_, 1);
  connect(toggle_, &QToolButton::clicked, this, [this] { set_collapsed(!collapsed()); });
  set_collapsed(false);
}

void ExplanationPanel::set_collapsed(bool collapsed) {
  text_->setVisible(!collapsed);
  toggle_->setText(collapsed ? "◂ ?" : "hide ▸");
  toggle_->setToolTip(
      collapsed
          ? "Show the explanation (what you see, the formula, what to try); View > Explanations"
          : "Hide the explanation to give the charts the room (View > Explanations)");
  setMaximumWidth(collapsed ? toggle_->sizeHint().width() + 4 : 330);
  setMinimumWidth(collapsed ? 0 : 200);
}

bool ExplanationPanel::collapsed() const {
  return text_->isHidden();
}

CollapsibleSection::CollapsibleSection(const QString& title, const QString& name, QWidget* parent)
    : QWidget(parent) {
  setObjectName(name);
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(0, 4, 0, 0);
  column->setSpacing(2);
  toggle_ = new QToolButton;
  toggle_->setObjectName(name + "_toggle");
  toggle_->setText(title);
  toggle_->setCheckable(true);
  toggle_->setAutoRaise(true);
  toggle_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  toggle_->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  QFont bold = toggle_->font();
  bold.setBold(true);
  toggle_->setFont(bold);
  body_ = new QWidget;
  form_ = new QFormLayout(body_);
  form_->setContentsMargins(8, 0, 0, 0);
  column->addWidget(toggle_);
  column->addWidget(body_);
  connect(toggle_, &QToolButton::toggled, this, [this](bool on) { set_expanded(on); });
  set_expanded(true);
}

void CollapsibleSection::set_expanded(bool expanded) {
  const QSignalBlocker blocker(toggle_);
  toggle_->setChecked(expanded);
  toggle_->setArrowType(expanded ? Qt::DownArrow : Qt::RightArrow);
  toggle_->setToolTip(expanded ? "Fold this group of inputs" : "Show this group of inputs");
  body_->setVisible(expanded);
}

bool CollapsibleSection::expanded() const {
  return toggle_->isChecked();
}

void reveal_in_sections(QWidget* widget) {
  for (QWidget* w = widget; w != nullptr; w = w->parentWidget()) {
    if (auto* section = dynamic_cast<CollapsibleSection*>(w)) section->set_expanded(true);
  }
}

QHBoxLayout* three_columns(View* view, QWidget* inputs, QWidget* content, const QString& html) {
  auto* layout = new QHBoxLayout(view);
  layout->setContentsMargins(6, 6, 6, 6);
  // The inputs scroll instead of being clipped (a projector's 1024 x 700) and never squeeze the
  // charts. Long combo entries do not widen the column (their full text is in the list and the
  // tooltip).
  for (auto* combo : inputs->findChildren<QComboBox*>()) {
    if (combo->sizeAdjustPolicy() == QComboBox::AdjustToContentsOnFirstShow) {
      combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
      combo->setMinimumContentsLength(12);
    }
  }
  auto* scroll = new QScrollArea;
  scroll->setObjectName("inputs_scroll");
  scroll->setWidget(inputs);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  const int width =
      inputs->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width() + 6;
  scroll->setFixedWidth(std::max(width, 220));
  scroll->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Expanding);
  layout->addWidget(scroll);
  layout->addWidget(content, 1);
  layout->addWidget(new ExplanationPanel(html));
  content->setMinimumSize(0, 0);
  view->set_content(content);
  return layout;
}

namespace {

// Greys a box's slider with the box (a trained model's greyed field, N while a list decides).
class FollowEnabled : public QObject {
 public:
  FollowEnabled(QWidget* box, QWidget* slider) : QObject(slider), slider_(slider) {
    box->installEventFilter(this);
    slider->setEnabled(box->isEnabled());
  }
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::EnabledChange)
      slider_->setEnabled(static_cast<QWidget*>(watched)->isEnabled());
    return false;
  }

 private:
  QWidget* slider_;
};

QSlider* slider_of(QSpinBox* box) {
  return qobject_cast<QSlider*>(box->property("attnres_slider").value<QObject*>());
}

}  // namespace

QWidget* with_slider(QSpinBox* box, const char* name) {
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* slider = new QSlider(Qt::Horizontal);
  slider->setObjectName(name);
  slider->setRange(box->minimum(), box->maximum());
  slider->setValue(box->value());
  slider->setToolTip(box->toolTip().isEmpty() ? QString("Drag to change the value beside it")
                                              : box->toolTip());
  slider->setMinimumWidth(60);
  layout->addWidget(box);
  layout->addWidget(slider, 1);
  QObject::connect(slider, &QSlider::valueChanged, box, [box](int v) {
    const int unit = box->singleStep();
    if (unit > 1) v = std::max(unit, static_cast<int>(std::lround(double(v) / unit)) * unit);
    if (box->value() != v) box->setValue(v);
  });
  QObject::connect(box, &QSpinBox::valueChanged, slider, [slider](int v) {
    const QSignalBlocker blocker(slider);
    slider->setValue(v);
  });
  new FollowEnabled(box, slider);
  box->setProperty("attnres_slider", QVariant::fromValue(static_cast<QObject*>(slider)));
  return row;
}

void set_slider_range(QSpinBox* box, int low, int high) {
  if (QSlider* slider = slider_of(box)) {
    const QSignalBlocker blocker(slider);
    slider->setRange(low, high);
    slider->setValue(box->value());
  }
}

std::string range_problem(const QSpinBox* box, std::int64_t value, const std::string& name) {
  if (value >= box->minimum() && value <= box->maximum()) return {};
  std::string out = name;
  out += " = ";
  out += std::to_string(value);
  out += " is beyond what the GUI's field takes (";
  out += std::to_string(box->minimum());
  out += " .. ";
  out += std::to_string(box->maximum());
  out += ")";
  return out;
}

void set_spin_step(QSpinBox* box, int step) {
  box->setSingleStep(step);
  if (QSlider* slider = slider_of(box)) {
    slider->setSingleStep(step);
    slider->setPageStep(std::max(step, slider->pageStep() / step * step));
  }
}

void set_spin_range(QSpinBox* box, int low, int high) {
  box->setRange(low, high);
  if (QSlider* slider = slider_of(box)) {
    const QSignalBlocker blocker(slider);
    slider->setRange(low, high);
    slider->setValue(box->value());
  }
}

QWidget* with_slider(QDoubleSpinBox* box, double slider_max, const char* name) {
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* slider = new QSlider(Qt::Horizontal);
  slider->setObjectName(name);
  const double unit = box->singleStep();
  slider->setRange(static_cast<int>(std::lround(box->minimum() / unit)),
                   static_cast<int>(std::lround(slider_max / unit)));
  slider->setValue(static_cast<int>(std::lround(box->value() / unit)));
  slider->setToolTip(box->toolTip().isEmpty() ? QString("Drag to change the value beside it")
                                              : box->toolTip());
  slider->setMinimumWidth(60);
  layout->addWidget(box);
  layout->addWidget(slider, 1);
  QObject::connect(slider, &QSlider::valueChanged, box, [box, unit](int v) {
    const double value = v * unit;
    if (std::abs(box->value() - value) > unit / 2) box->setValue(value);
  });
  QObject::connect(box, &QDoubleSpinBox::valueChanged, slider, [slider, unit](double v) {
    const QSignalBlocker blocker(slider);
    slider->setValue(static_cast<int>(std::lround(v / unit)));
  });
  new FollowEnabled(box, slider);
  return row;
}

Player::Player(const QString& name, const QString& tooltip, std::function<void()> begin,
               std::function<bool()> advance, QWidget* parent)
    : QWidget(parent), begin_(std::move(begin)), advance_(std::move(advance)) {
  setObjectName(name);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  button_ = new QToolButton;
  button_->setObjectName(name + "_play");
  button_->setText("▶");
  button_->setToolTip(tooltip + " (press again to stop)");
  speed_ = new QComboBox;
  speed_->setObjectName(name + "_speed");
  speed_->setToolTip("Animation speed: frames per second at 0.5x, 1x, 2x, 4x (1x: 3 a second)");
  for (const double factor : {0.5, 1.0, 2.0, 4.0})
    speed_->addItem(QString::number(factor) + "x", factor);
  speed_->setCurrentIndex(1);
  layout->addWidget(button_);
  layout->addWidget(speed_);
  timer_ = new QTimer(this);
  const auto interval = [this] {
    return static_cast<int>(std::lround(333.0 / speed_->currentData().toDouble()));
  };
  QObject::connect(timer_, &QTimer::timeout, this, [this] {
    if (!advance_once()) stop();
  });
  QObject::connect(speed_, &QComboBox::currentIndexChanged, this,
                   [this, interval] { timer_->setInterval(interval()); });
  timer_->setInterval(interval());
  QObject::connect(button_, &QToolButton::clicked, this, [this] { playing() ? stop() : play(); });
}

void Player::play() {
  if (begin_) begin_();
  button_->setText("■");
  timer_->start();
}

void Player::stop() {
  timer_->stop();
  button_->setText("▶");
}

bool Player::playing() const {
  return timer_->isActive();
}

bool Player::advance_once() {
  return advance_ && advance_();
}

// Coalesces many input changes into one recompute.
void on_change(QWidget* owner, const std::vector<QWidget*>& inputs,
               const std::function<void()>& action) {
  auto* timer = new QTimer(owner);
  timer->setSingleShot(true);
  timer->setInterval(0);  // coalesces the changes of one event-loop pass
  QObject::connect(timer, &QTimer::timeout, owner, action);
  for (QWidget* input : inputs) {
    if (auto* s = qobject_cast<QSpinBox*>(input))
      QObject::connect(s, &QSpinBox::valueChanged, timer, qOverload<>(&QTimer::start));
    if (auto* d = qobject_cast<QDoubleSpinBox*>(input))
      QObject::connect(d, &QDoubleSpinBox::valueChanged, timer, qOverload<>(&QTimer::start));
    if (auto* c = qobject_cast<QComboBox*>(input)) {
      QObject::connect(c, &QComboBox::currentIndexChanged, timer, qOverload<>(&QTimer::start));
      if (c->isEditable()) {  // a typed entry counts when Enter is pressed; a chosen one even if
                              // unchanged
        QObject::connect(c, &QComboBox::activated, timer, qOverload<>(&QTimer::start));
        QObject::connect(c->lineEdit(), &QLineEdit::editingFinished, timer,
                         qOverload<>(&QTimer::start));
      }
    }
    if (auto* b = qobject_cast<QCheckBox*>(input))
      QObject::connect(b, &QCheckBox::toggled, timer, qOverload<>(&QTimer::start));
    if (auto* e = qobject_cast<QLineEdit*>(input))
      QObject::connect(e, &QLineEdit::editingFinished, timer, qOverload<>(&QTimer::start));
  }
}

QComboBox* named_scheme_picker(const std::string& current) {
  auto* combo = new QComboBox;
  for (const auto& name : scheme_names()) {
    combo->addItem(QString::fromStdString(name), QString::fromStdString(name));
    combo->setItemData(combo->count() - 1, QString::fromStdString(scheme_summary(name)),
                       Qt::ToolTipRole);
  }
  combo->setCurrentText(QString::fromStdString(current));
  return combo;
}

QComboBox* hardware_combo() {
  auto* combo = new QComboBox;
  // The text and the data are the preset's key (what --hardware and [hardware] preset take).
  for (const auto& name : hardware_preset_names())
    combo->addItem(QString::fromStdString(name), QString::fromStdString(name));
  combo->setCurrentText("h100");
  return combo;
}

QString page_title(const ViewEntry& entry, std::size_t index) {
  const std::string_view title = entry.pages.at(index);
  return QString::fromUtf8(title.data(), static_cast<int>(title.size()));
}

namespace {
constexpr const char* kScenarioHardware = "@scenario";
}  // namespace

void show_state_hardware(QComboBox* combo, const ExplorerState& state) {
  const QSignalBlocker blocker(combo);
  if (const int own = combo->findData(QString(kScenarioHardware)); own >= 0) combo->removeItem(own);
  if (state.hardware_preset.empty()) {
    combo->insertItem(0, QString::fromStdString(state.hardware.name + " (scenario)"),
                      QString(kScenarioHardware));
    combo->setItemData(0, QString::fromStdString(state.hardware_origin), Qt::ToolTipRole);
    combo->setCurrentIndex(0);
  } else {
    combo->setCurrentIndex(combo->findData(QString::fromStdString(state.hardware_preset)));
  }
}

void take_hardware(const QComboBox* combo, ExplorerState& state) {
  const std::string preset = combo->currentData().toString().toStdString();
  if (preset != kScenarioHardware && preset != state.hardware_preset)
    set_hardware_preset(state, preset);
}

void show_report_table(QTableWidget* widget, const ReportTable& table) {
  QString tip = QString::fromStdString(table.title);
  if (!table.note.empty()) tip += "\n" + QString::fromStdString(table.note);
  widget->setToolTip(tip);
  widget->clear();
  widget->setColumnCount(static_cast<int>(table.header.size()));
  widget->setRowCount(static_cast<int>(table.rows.size()));
  QStringList header;
  for (const auto& h : table.header) header << QString::fromStdString(h);
  widget->setHorizontalHeaderLabels(header);
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    for (std::size_t c = 0; c < table.rows[r].size(); ++c) {
      auto* item = new QTableWidgetItem(QString::fromStdString(table.rows[r][c]));
      const bool number = c < table.columns.size() ? table.columns[c].shown != Shown::text &&
                                                         table.columns[c].shown != Shown::yes_no
                                                   : c > 0;
      if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      widget->setItem(static_cast<int>(r), static_cast<int>(c), item);
    }
  }
}

}  // namespace attnres::gui
