// What the three views on a model share (internal to app/gui): ModelView, the base of Depth
// attention, Magnitudes and Duality (docs/math.md §2, docs/schemes.md). It puts the lesson
// model's panel (one model for the three views, lesson_model.hpp) above two scheme pickers,
// "scheme" and "compare with" (the model's own scheme, a named scheme or a typed spec such as
// "full:heads=4,gate=sigmoid"), and recomputes when the lesson model changes. A picked scheme
// is resolved against the model's weights before any forward pass (SchemeOnModel), and
// scheme_trace runs one forward pass of a view.
#pragma once

#include <QString>
#include <memory>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "lesson_model.hpp"
#include "views.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QFormLayout;
class QShowEvent;
QT_END_NAMESPACE

namespace attnres::gui {

// The scheme pickers of the model views (docs/schemes.md "Comparing schemes"): the cost
// explorer's named schemes (named_scheme_picker, one list for the whole lab) after these two
// entries; a typed spec such as "full:heads=4,gate=sigmoid" is read as parse_scheme_spec reads it.
inline constexpr const char* kOwnScheme = "@own";  // the chosen model's own scheme
inline constexpr const char* kNoScheme = "@none";  // "compare with": nothing

// A picked scheme resolved against the model: its settings, its label and the weights read with it
// (convert_scheme; the model itself for its own scheme). Errors name the picker and the text.
struct SchemeOnModel {
  AttnResConfig scheme;
  std::string label;  // scheme_label: the scheme and whose weights
  std::string name;   // for chart legends: describe(), "trained ..." for the model's own
  ModelWeights<double> model;
};

// One forward pass of a model view, on the views' one fast engine (its thread pool is kept across
// runs and models).
ForwardTrace scheme_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                          Progress progress, bool mixing);

// A scheme a view shows: its label and trace.
struct ShownScheme {
  std::string label;
  ForwardTrace trace;
};

class ModelView : public View {
 public:
  ModelView(const ViewEntry& entry, const ViewHost& host);
  ~ModelView() override;
  LessonModel& lesson() const { return *lesson_; }

 protected:
  // The lesson model's panel (shared, moved here when this view is shown) above the view's own
  // form: the two scheme pickers, then what the view adds.
  QWidget* make_inputs(QFormLayout*& form);
  // The inputs of this view whose changes recompute it (the lesson model's come by subscription).
  std::vector<QWidget*> model_inputs() const;
  struct Picks {
    std::string scheme, compare;  // specs, kOwnScheme or kNoScheme
    bool comparing() const { return compare != kNoScheme; }
  };
  Picks picks() const;
  // The schemes of a run, resolved and converted before any forward pass (a bad spec fails fast).
  static std::vector<SchemeOnModel> picked_models(const Picks& picks,
                                                  const ModelWeights<double>& model,
                                                  const LessonModel::Snapshot& snapshot);
  // The "model's own" entries name the chosen model's scheme.
  void show_own_scheme();
  // The lesson model changed: recompute now when this view is on screen (or the window is not,
  // as in tests and screenshots); a hidden view of a shown window recomputes when it is shown.
  void lesson_changed();
  void showEvent(QShowEvent* event) override;
  // The field behind an error of this view's runs.
  std::vector<QWidget*> fields_for_error(const std::string& message) const override;
  LessonModel* lesson_ = nullptr;
  std::unique_ptr<LessonModel> own_lesson_;  // only without a main window's
  QWidget* slot_ = nullptr;
  bool dirty_ = false;
  QComboBox *scheme_ = nullptr, *compare_ = nullptr;
};

}  // namespace attnres::gui
