// What the views of attnres-lab build themselves from (internal to app/gui): input widgets with
// their tooltips, the three-column layout (inputs, content, a collapsible explanation), change
// coalescing, the shared pickers, progress helpers, and the factories of the views.
#pragma once

#include <QString>
#include <QWidget>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "explorer_state.hpp"
#include "model_state.hpp"
#include "views.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QTableWidget;
class QDoubleSpinBox;
class QFormLayout;
class QHBoxLayout;
class QSpinBox;
class QTextBrowser;
class QTimer;
class QToolButton;
class QWidget;
QT_END_NAMESPACE

namespace attnres {
struct ReportTable;
}

namespace attnres::gui {

// The verdict boxes of the cost explorer's tabs (a QLabel style sheet each): fits or meets the
// budgets, does not or is wrong, a warning, an unknown verdict, and a neutral headline.
inline constexpr const char* kGoodStyle =
    "QLabel { background: #e3f4e1; color: #1d5e20; padding: 5px; border: 1px solid #9fd09a; }";
inline constexpr const char* kBadStyle =
    "QLabel { background: #fde2e1; color: #8a1c1c; padding: 5px; border: 1px solid #e0a3a0; }";
inline constexpr const char* kWarningStyle =
    "QLabel { background: #fff4d6; color: #785000; padding: 5px; border: 1px solid #e0c080; }";
inline constexpr const char* kUnknownStyle =
    "QLabel { background: #ececec; color: #333333; padding: 5px; border: 1px solid #c8c8c8; }";
inline constexpr const char* kHeadlineStyle =
    "QLabel { background: #e8f0fa; color: #1c3d66; padding: 5px; border: 1px solid #a9c1e0; }";

// Spin boxes that only report a value when editing is done (no recompute per keystroke).
QSpinBox* spin(int low, int high, int value);
QDoubleSpinBox* dspin(double low, double high, double value, int decimals, double step);
// The explanation text (HTML).
QTextBrowser* explanation(const QString& html);
// The right-hand column: the explanation under a button that collapses it to a narrow strip
// (View > Explanations collapses or opens every view's at once).
class ExplanationPanel : public QWidget {
 public:
  explicit ExplanationPanel(const QString& html, QWidget* parent = nullptr);
  void set_collapsed(bool collapsed);
  bool collapsed() const;

 private:
  QToolButton* toggle_;
  QTextBrowser* text_;
};
// A titled group of inputs in an input column that folds to its header (a button with an arrow):
// a long form stays usable, and a folded group still takes part in the column's width.
class CollapsibleSection : public QWidget {
 public:
  // `name` names the header button "<name>_toggle" (tests, lessons).
  CollapsibleSection(const QString& title, const QString& name, QWidget* parent = nullptr);
  QFormLayout* form() const { return form_; }
  void set_expanded(bool expanded);
  bool expanded() const;

 private:
  QToolButton* toggle_;
  QWidget* body_;
  QFormLayout* form_;
};
// Opens every folded section that holds `widget` (an input an error points at).
void reveal_in_sections(QWidget* widget);
// Left: inputs (scrollable, so that a small window never clips them); middle: content; right:
// the explanation, collapsible. Registers the content with the view (error banner, stale marks).
QHBoxLayout* three_columns(View* view, QWidget* inputs, QWidget* content, const QString& html);
// A slider beside a spin box, in step both ways (the spin box owns the value; its changes reach
// the view as before); the slider is greyed with its box. The double version moves in the spin
// box's single steps up to slider_max.
QWidget* with_slider(QSpinBox* box, const char* name);
QWidget* with_slider(QDoubleSpinBox* box, double slider_max, const char* name);
// A spin box's range (e.g. S <= L when the model changes), its slider's with it.
void set_spin_range(QSpinBox* box, int low, int high);
// The slider's range alone: the box keeps its own, so a value past the slider can still be typed
// and gets the view's message (N's slider runs over 1..L; N > L typed is an error that says so).
void set_slider_range(QSpinBox* box, int low, int high);
// "" when `value` lies in `box`'s range; else "NAME = VALUE is beyond what this field takes
// (LOW .. HIGH)" (View::scenario_problem).
std::string range_problem(const QSpinBox* box, std::int64_t value, const std::string& name);
// The step of a spin box and of its slider; a step > 1 also makes the slider land on multiples of
// it (micro-batches m in multiples of P where the schedule needs them).
void set_spin_step(QSpinBox* box, int step);
// Animation (docs/teaching.md "Animation"): a play button and a speed choice. Play calls `begin`
// once and then `advance` on a timer (about 3 frames a second at 1x) until it returns false or
// Stop is pressed; `advance_once` runs one frame by hand (tests).
class Player : public QWidget {
 public:
  Player(const QString& name, const QString& tooltip, std::function<void()> begin,
         std::function<bool()> advance, QWidget* parent = nullptr);
  void play();
  void stop();
  bool playing() const;
  bool advance_once();
  QToolButton* button() const { return button_; }
  QComboBox* speed() const { return speed_; }

 private:
  std::function<void()> begin_;
  std::function<bool()> advance_;
  QToolButton* button_;
  QComboBox* speed_;
  QTimer* timer_;
};

// Coalesces the changes of `inputs` in one event-loop pass into one call of `action`.
void on_change(QWidget* owner, const std::vector<QWidget*>& inputs,
               const std::function<void()>& action);
// The hardware presets (text and data: the preset's key).
QComboBox* hardware_combo();
// The state's hardware in a hardware_combo (without change signals): its preset, or a first entry
// "NAME (scenario)" for a scenario's own [hardware] (a file, or a preset with overrides) that no
// preset equals.
void show_state_hardware(QComboBox* combo, const ExplorerState& state);
// The combo's pick into the state: another preset replaces the hardware; the scenario's entry
// keeps the state's. Throws attnres::Error for an unknown preset.
void take_hardware(const QComboBox* combo, ExplorerState& state);
// A picker of the cost engine's named schemes (docs/scheme-costs.md); the item data is the name.
QComboBox* named_scheme_picker(const std::string& current);
// A report table (report.hpp) in a table widget, cell for cell as the CLI prints it: its header,
// its displayed rows (numbers right-aligned), its title and note as the tooltip.
void show_report_table(QTableWidget* widget, const ReportTable& table);
// The title of page `index` of a view's row (ViewEntry::pages).
QString page_title(const ViewEntry& entry, std::size_t index);

}  // namespace attnres::gui
