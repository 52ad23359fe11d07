// The views of attnres-lab, one per question: cost explorer, depth attention, magnitudes,
// pipeline, duality, scaling law. Each has inputs, charts or heatmaps built from core results,
// and an explanation panel (what you see, the formula, what to try).
#pragma once

#include <QPointer>
#include <QWidget>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/scenario.hpp"
#include "explorer_state.hpp"
#include "view_dump.hpp"
#include "widgets.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QResizeEvent;
class QTimer;
QT_END_NAMESPACE

namespace attnres::gui {

// Heavy work of a view: runs off the GUI thread with the run's progress callback and returns
// the closure that applies its result on the GUI thread. The work passes `progress` into the
// core (ForwardOptions::progress, PipelineSettings::progress, run_sweep's argument): it reports
// (done, total) to the progress bar and returns false once the run is cancelled, and the core
// then throws attnres::Cancelled. A call with total == 0 only asks whether to go on.
using BackgroundWork = std::function<std::function<void()>(const Progress& progress)>;

class View;
class LessonModel;
struct ViewHost;
class ExplorerStateHub;

// One row of the view table: everything the window, --view, --page, --dump-state, the lesson,
// presentation mode and the docs know of a view. Adding a view is a row here and the view's own
// files (docs/architecture.md "Where to add").
struct ViewEntry {
  std::string_view name;                // --view NAME, the lesson's steps, View::name()
  std::string_view short_title;         // the tab in presentation mode
  std::string_view title;               // the tab
  std::vector<std::string_view> pages;  // its inner pages in order (--page), none: one page
  View* (*make)(const ViewHost& host, const ViewEntry& entry);
  // What --dump-state writes for it (view_dump.hpp); nullptr: it has no state from a scenario,
  // and `no_state` says why (in the dump's "not_dumped").
  ViewDumpFunction dump;
  std::string_view no_state;
};
// The views in menu order.
const std::vector<ViewEntry>& view_table();
// The row named `name`; nullptr when there is none.
const ViewEntry* find_view_entry(std::string_view name);
// "cost, depth-attention, ... or training": the names for messages and --help.
std::string view_names_text();

// What the main window lends a view.
struct ViewHost {
  // Runs `work` off the GUI thread (inline when synchronous) with a progress bar and a cancel
  // button. Every run has its own cancel token; a newer run of the same view and label replaces
  // the older one (cancelled at once; at most one more waits). The closure the work returns is
  // applied on the GUI thread unless the run was cancelled or superseded; an exception from the
  // work is shown in the view's own error banner, except attnres::Cancelled.
  std::function<void(View* view, const QString& label, BackgroundWork work)> run;
  // The one lesson model the model views share (main window; nullptr: the views make their own).
  LessonModel* lesson = nullptr;
  // The one state of an opened scenario the cost views share (main window; nullptr: each view
  // keeps its own, as in tests of one view).
  ExplorerStateHub* explorer = nullptr;
};

class View : public QWidget {
 public:
  View(const ViewEntry& entry, ViewHost host, QWidget* parent = nullptr);
  ~View() override;
  const std::string& name() const { return name_; }
  const QString& title() const { return title_; }
  // Recomputes from the current inputs (through run() for heavy work).
  virtual void recompute() = 0;
  // Charts and heatmaps the user can export.
  virtual std::vector<ChartSpec> charts() const { return {}; }
  virtual std::vector<HeatmapWidget*> heatmaps() { return {}; }
  // Shows inner page `index` of the view's row's pages (--page, the lesson).
  virtual void show_page(int /*index*/) {}
  virtual void apply_scenario(const Scenario&) {}
  // Shows and computes `state` (the cost views: explorer_state.hpp); false for a view whose
  // settings are no cost state (the lesson's steps then fail with a message).
  virtual bool set_state(const ExplorerState&) { return false; }
  // Why this view cannot show `scenario` as it is ("" when it can): a value beyond one of its
  // fields' ranges. Opening a scenario asks every view first and changes nothing when one says no
  // (a field clamped in silence would show another setting than the CLI computes).
  virtual std::string scenario_problem(const Scenario&) const { return {}; }
  // This view's settings into a scenario (File > Save scenario writes every view's).
  virtual void save_to(Scenario&) const {}
  // The state this view computes from, as `attnres-lab --dump-state` writes it
  // (explorer_state_json; null for a view whose settings do not come from a scenario's [model]).
  virtual nlohmann::json state_json() const { return nullptr; }

  // This view's errors: a banner over the content (it does not move the layout), a red frame on
  // the inputs that caused them, and the charts under it marked stale until the next result.
  // `inputs_invalid` false: an error of the window's (a file that did not open, nothing to export)
  // that leaves the charts valid: the banner without the stale marks.
  void show_error(const std::string& message, const std::vector<QWidget*>& fields = {},
                  bool inputs_invalid = true);
  void clear_error();
  std::string error_text() const;  // "" when there is no error
  std::vector<QWidget*> error_fields() const;
  // The inputs an error message of this view's runs points at (show_error without fields asks).
  virtual std::vector<QWidget*> fields_for_error(const std::string&) const { return {}; }
  // Marks every chart, heatmap and Gantt chart of the view as not showing the current inputs
  // (the reason is written over them); an empty reason marks them current.
  void set_stale(const QString& reason);
  const QString& stale_reason() const { return stale_; }
  // A run of this view is in flight (set by the main window). Its charts show "computing" when
  // the run takes longer than a moment; a result, an error or a cancellation ends it.
  void set_pending(bool pending);
  bool pending() const { return pending_; }
  // The tab's inputs as the window opened (the main window calls remember_inputs once every view
  // exists, before a scenario fills them) and back to them: a lesson step puts its tab back before
  // it sets its own inputs, so that no step depends on what came before (docs/teaching.md). The
  // lesson model's panel, which moves between the model tabs, is not part of any tab's inputs.
  void remember_inputs();
  void restore_inputs();
  // The tab as the lesson found it, and back to it when the lesson ends (its inputs, and the state
  // of a cost view).
  void remember_before_lesson();
  void restore_before_lesson();
  // The cost state this view computes from (the cost explorer, the Pipeline view), else nullptr.
  virtual const ExplorerState* cost_state() const { return nullptr; }
  // The middle column (charts and tables): where the banner and the stale marks go.
  void set_content(QWidget* content) { content_ = content; }
  QWidget* content() const { return content_; }

 protected:
  void run(const QString& label, BackgroundWork work) { host_.run(this, label, std::move(work)); }
  void resizeEvent(QResizeEvent* event) override;
  std::string name_;
  QString title_;
  ViewHost host_;

 private:
  void place_banner();
  QWidget* content_ = nullptr;
  QLabel* banner_ = nullptr;
  std::vector<QPointer<QWidget>> error_fields_;
  QString stale_;
  bool pending_ = false;
  QTimer* pending_timer_ = nullptr;
  struct SavedInput;
  void remember_into(std::vector<SavedInput>& saved) const;
  void restore_from(const std::vector<SavedInput>& saved);
  std::vector<SavedInput> saved_inputs_, before_lesson_;
  std::optional<ExplorerState> state_before_lesson_;
};

// The trained models shipped with the project (resources/models/, scripts/train-shipped-models.sh),
// which the Depth attention, Magnitudes and Duality views open on. Their directory is
// $ATTNRES_MODELS_DIR when set; else <directory of the executable>/../share/attnres/models when it
// exists (an installed build); else the source tree's resources/models.
std::filesystem::path shipped_models_directory();

struct ShippedModel {
  std::string name;                 // directory name: "full", "block_N4", "block_N2", "standard"
  std::string label;                // "trained: Full AttnRes", ...
  std::filesystem::path directory;  // holds config.json + model.safetensors (+ train_log.csv)
};
// The shipped models whose config.json and model.safetensors exist, in the order of the model
// choice (Full, Block N = 4, Block N = 2, standard).
std::vector<ShippedModel> available_shipped_models();

// Creates every view, in menu order.
std::vector<View*> make_views(const ViewHost& host, QWidget* parent);

// The cost explorer's current settings as a scenario (for File > Save Scenario).
Scenario scenario_from_views(const std::vector<View*>& views);

}  // namespace attnres::gui
