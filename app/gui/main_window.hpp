// The attnres-lab main window: one tab per view, File menu (open/save scenario, open model
// directory, export chart PNG/SVG, export data CSV), an error banner that shows the same message
// the CLI prints while the application keeps running, and a progress bar with a cancel button
// for work that runs off the GUI thread.
#pragma once

#include <QFont>
#include <QMainWindow>
#include <QPointer>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "views.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QProgressBar;
class QPushButton;
class QTabWidget;
QT_END_NAMESPACE

namespace attnres::gui {

class LessonModel;
class ExplorerStateHub;
class PresentationStage;

class MainWindow : public QMainWindow {
 public:
  // synchronous: run every computation inline (screenshots, tests).
  explicit MainWindow(bool synchronous = false, QWidget* parent = nullptr);
  ~MainWindow() override;

  const std::vector<View*>& views() const { return views_; }
  View* view(const std::string& name) const;
  void show_view(const std::string& name);
  View* current_view() const;
  // The model the Depth attention, Magnitudes and Duality views share.
  LessonModel& lesson() const { return *lesson_; }

  // File actions; each reports errors in the banner and returns false instead of throwing.
  bool open_scenario(const std::filesystem::path& path);
  bool save_scenario(const std::filesystem::path& path);
  // File > Open model directory (and --model DIR): reads DIR (config.json and the weights in any
  // layout of docs/interop.md, load_model_as) off the GUI thread with the progress bar and Cancel
  // (inline when synchronous), then shows it in the lesson model on the GUI thread. A model that
  // does not load shows its load error (the CLI's text) in the banner and changes nothing; a
  // cancelled read changes nothing and shows no error. A newer open replaces one in flight.
  // Returns false when the model did not open (synchronous) and true when it opened or its read
  // is under way.
  enum class OpenResult { opened, failed, cancelled };
  struct OpenModelOptions {
    // On the GUI thread when the read has ended: opened, failed (with the message) or cancelled
    // (Cancel, a newer open, or `check`).
    std::function<void(OpenResult result, const std::string& error)> done;
    // Also asked at every progress report of the read ((0, total) first); false cancels it.
    Progress check;
  };
  bool open_model(const std::filesystem::path& directory, OpenModelOptions options = {});
  // Exports chart `index` of the current view (charts first, then heatmaps) by extension.
  bool export_chart(std::size_t index, const std::filesystem::path& path);
  bool export_data(std::size_t index, const std::filesystem::path& path);
  std::vector<std::string> export_titles() const;

  // Window-level errors (File actions) go to the current view's banner; error_text() is the
  // current view's error ("" when none).
  void show_error(const std::string& message);
  void clear_error();
  std::string error_text() const;
  // Recomputes every view (inline when synchronous).
  void recompute_all();

  // The guided lesson (Lesson menu, lesson.hpp): step `index` sets its inputs, shows its tab and
  // says what to look for in the lesson bar above the tabs. -1: no lesson.
  void start_lesson();
  void lesson_step(int index);
  void end_lesson();
  int lesson_index() const { return lesson_index_; }
  // Presentation mode (View menu, F5): larger fonts everywhere, the input and explanation columns
  // hidden, for a projector. The lesson bar stays.
  void set_presentation(bool on);
  bool presentation() const { return presentation_; }
  // Presentation mode during the lesson: the step's chart over its tab (presentation_stage.hpp);
  // hidden otherwise. Follows every step, result and tab change.
  void update_stage();
  PresentationStage* stage() const;
  // Collapses or opens every view's explanation column (View > Explanations).
  void set_explanations(bool shown);
  // Help > About: the version, what the program is, where its documentation is.
  static QString about_text();

 protected:
  // The lesson's keys (what presenter clickers send): PageDown, Right, Down and Space go to the
  // next step, PageUp, Left and Up to the previous one, while the lesson is on; the arrows and
  // Space only when the focus is on no input that takes them. The last step stays (no key ends
  // the lesson).
  bool eventFilter(QObject* watched, QEvent* event) override;
  // Closing during a live training run asks first (Escape or No keeps the window); yes stops it.
  void closeEvent(QCloseEvent* event) override;
  // Below 1200 pixels of width the explanations start collapsed (the charts need the room) until
  // the user opens or closes them.
  void resizeEvent(QResizeEvent* event) override;

 public:
  // What views use for heavy work (ViewHost::run): off the GUI thread with its own cancel
  // token, a progress bar driven by the work's (done, total) reports and a cancel button.
  // Starting a run cancels the one in flight with the same view and label (its result would be
  // stale) and waits for it to stop: at most one run per view and label computes, and at most one
  // more waits (the newest request; older waiting ones are dropped unstarted).
  void run(View* view, const QString& label, BackgroundWork work);
  // Work of the window itself (opening a model), as run() but bound to no view: its errors go to
  // the banner of the view on screen when it ends, a cancellation marks nothing stale, and
  // `on_cancelled` hears a run that ended unapplied (cancelled, or replaced by a newer one).
  void run_window(const QString& label, BackgroundWork work,
                  std::function<void()> on_cancelled = {});
  // The Cancel button: cancels every run in flight; their work stops at its next progress
  // check and their results are never applied. Runs started later are not affected.
  void cancel_background();
  // Cancels only the runs in flight (and waiting) with this label.
  void cancel_run(const QString& label);
  // Runs started and not yet finished (their completion is seen on the GUI thread).
  std::size_t runs_in_flight() const;
  // Blocks until the window's workers are idle: every run's work has returned and its task is
  // gone (their completions are then queued for the GUI thread, not yet seen).
  void wait_for_workers();

 private:
  // What a background run's work hands back to the GUI thread.
  struct Outcome {
    std::function<void()> apply;  // empty: nothing to apply
    bool cancelled = false;       // the work stopped with attnres::Cancelled
  };
  struct Run;
  bool guarded(const std::function<void()>& action);
  // A run of `view` (nullptr: of the window, run_window).
  void start(View* view, const QString& label, BackgroundWork work,
             std::function<void()> on_cancelled);
  void launch(View* view, const QString& label, BackgroundWork work,
              std::function<void()> on_cancelled);
  void start_waiting(const QString& key);
  void finish(const std::shared_ptr<Run>& run);
  void show_progress();
  bool synchronous_;
  std::unique_ptr<LessonModel> lesson_;
  // The one state of an opened scenario the cost views share (explorer_state.hpp). The views
  // (children, deleted by ~QWidget after this member) keep its address but never call it on the
  // way out: they do not unsubscribe.
  std::unique_ptr<ExplorerStateHub> explorer_;
  QWidget* lesson_bar_ = nullptr;
  QLabel* lesson_text_ = nullptr;
  QPushButton *lesson_previous_ = nullptr, *lesson_next_ = nullptr;
  int lesson_index_ = -1;
  bool presentation_ = false;
  bool explanations_chosen_ = false;  // the user toggled View > Explanations
  QFont normal_font_;
  QPointer<PresentationStage> stage_;  // lives in the view it covers
  QTabWidget* tabs_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  std::vector<View*> views_;
  struct Background;
  std::unique_ptr<Background> background_;
};

}  // namespace attnres::gui
