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
  using Picks = SchemePicks;
  Picks picks() const;
  // The "model's own" entries name the chosen model's scheme.
  void show_own_scheme();
  // Whether this view reads the lesson model's S (its ▶ is greyed where it would change nothing):
  // a picked scheme that takes it (picks_use_block_size); the Duality view's taxonomy always.
  virtual bool uses_block_size() const;
  void update_block_player();
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
