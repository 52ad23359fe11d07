#include "main_window.hpp"

#include <QAbstractButton>
#include <QAbstractItemView>
#include <QAbstractSlider>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QFileDialog>
#include <QFrame>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QKeyEvent>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextEdit>
#include <QThreadPool>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>

#include "attnres/atomic_file.hpp"
#include "attnres/cancel.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "chart_render.hpp"
#include "lesson.hpp"
#include "lesson_model.hpp"
#include "presentation_stage.hpp"
#include "training_view.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace fs = std::filesystem;

// One background run: its own cancel token, the latest (done, total) its work reported (written
// by the worker thread, read on the GUI thread) and its future, waited for when the window goes.
struct MainWindow::Run {
  int number = 0;
  QString label;
  QString key;  // view name + label: runs of one key replace each other
  QPointer<View> view;
  bool window_level = false;           // run_window: bound to no view
  std::function<void()> on_cancelled;  // run_window: ended unapplied
  CancelToken token;
  std::atomic<std::size_t> done{0}, total{0};
  std::atomic<bool> update_posted{false};  // a progress update is queued for the GUI thread
  QFuture<Outcome> future;
  QFutureWatcher<Outcome>* watcher = nullptr;
};

// Runs are numbered; a finished run applies its result only if it is still the latest for its
// label and its token was not cancelled, so the window never shows stale or cancelled work.
struct MainWindow::Background {
  struct Waiting {
    QPointer<View> view;
    bool window_level = false;
    QString label;
    BackgroundWork work;
    std::function<void()> on_cancelled;
  };
  std::map<QString, int> latest;       // key -> newest run number (0: a waiting run is newer)
  std::map<QString, Waiting> waiting;  // key -> the newest request, until its older run stops
  std::map<int, std::shared_ptr<Run>> in_flight;  // run number -> run, until its finish is seen
  int next = 0;
  // The window's own workers: a run's task (and what its closure holds) is destroyed on the worker
  // after its finish is seen, so the window waits for the pool, not only for the runs in flight,
  // before anything the tasks hold can go (a process exit while a worker still tore down a task's
  // engine crashed the GUI tests under load).
  QThreadPool pool;
};

MainWindow::MainWindow(bool synchronous, QWidget* parent)
    : QMainWindow(parent), synchronous_(synchronous), background_(std::make_unique<Background>()) {
  setWindowTitle("AttnRes Lab");
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(4, 4, 4, 0);
  tabs_ = new QTabWidget;
  // The lesson bar: the step, what it set and what to look for, with Previous / Next.
  lesson_bar_ = new QFrame;
  lesson_bar_->setObjectName("lesson_bar");
  lesson_bar_->setStyleSheet("#lesson_bar { background: #eef4fb; border: 1px solid #b5cbe4; }");
  auto* bar = new QHBoxLayout(lesson_bar_);
  bar->setContentsMargins(8, 4, 8, 4);
  lesson_text_ = new QLabel;
  lesson_text_->setObjectName("lesson_text");
  lesson_text_->setWordWrap(true);
  lesson_text_->setTextFormat(Qt::RichText);
  lesson_previous_ = new QPushButton("◀ Previous");
  lesson_next_ = new QPushButton("Next ▶");
  auto* lesson_close = new QPushButton("End lesson");
  lesson_previous_->setToolTip("The previous step (Alt+Left)");
  lesson_next_->setToolTip("The next step (Alt+Right)");
  lesson_close->setToolTip("End the lesson: every tab goes back to how the lesson found it");
  // Space and Enter reach the lesson's keys, never a focused lesson button (Space on "End lesson"
  // ended the lesson from a clicker).
  for (QPushButton* button : {lesson_previous_, lesson_next_, lesson_close})
    button->setFocusPolicy(Qt::NoFocus);
  bar->addWidget(lesson_text_, 1);
  bar->addWidget(lesson_previous_);
  bar->addWidget(lesson_next_);
  bar->addWidget(lesson_close);
  lesson_bar_->setVisible(false);
  connect(lesson_previous_, &QPushButton::clicked, this,
          [this] { lesson_step(lesson_index_ - 1); });
  connect(lesson_next_, &QPushButton::clicked, this, [this] { lesson_step(lesson_index_ + 1); });
  connect(lesson_close, &QPushButton::clicked, this, [this] { end_lesson(); });
  layout->addWidget(lesson_bar_);
  layout->addWidget(tabs_, 1);
  setCentralWidget(central);

  progress_ = new QProgressBar;
  progress_->setRange(0, 0);  // busy
  progress_->setMaximumWidth(220);
  progress_->setVisible(false);
  cancel_ = new QPushButton("Cancel");
  cancel_->setVisible(false);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QPushButton::clicked, this, [this] { cancel_background(); });

  ViewHost host;
  host.run = [this](View* view, const QString& label, BackgroundWork work) {
    run(view, label, std::move(work));
  };
  lesson_ = std::make_unique<LessonModel>();
  // Choosing the "loaded" entry again reads its directory as File > Open model does.
  lesson_->read_elsewhere = [this](const std::string& dir) { open_model(dir); };
  host.lesson = lesson_.get();
  explorer_ = std::make_unique<ExplorerStateHub>();
  host.explorer = explorer_.get();
  views_ = make_views(host, this);
  stage_ = new PresentationStage(this);
  for (View* view : views_) {
    tabs_->addTab(view, view->title());
    view->remember_inputs();  // what a lesson step puts its tab back to
  }
  connect(tabs_, &QTabWidget::currentChanged, this, [this] { update_stage(); });

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("Open scenario...", QKeySequence::Open, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, "Open scenario", {}, "Scenario (*.toml)");
    if (!path.isEmpty()) open_scenario(path.toStdString());
  });
  file->addAction("Save scenario...", QKeySequence::Save, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, "Save scenario", "scenario.toml", "Scenario (*.toml)");
    if (!path.isEmpty()) save_scenario(path.toStdString());
  });
  file->addAction("Open model directory...", QKeySequence(Qt::CTRL | Qt::Key_M), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(
        this, "Open model directory (config.json + model.safetensors or a sharded index)");
    if (!dir.isEmpty()) open_model(dir.toStdString());
  });
  auto choose = [this](const QString& what) -> int {
    const auto titles = export_titles();
    if (titles.empty()) {
      show_error("this view has nothing to export yet");
      return -1;
    }
    if (titles.size() == 1) return 0;
    QStringList items;
    for (const auto& t : titles) items << QString::fromStdString(t);
    bool ok = false;
    const QString item = QInputDialog::getItem(this, what, "Which one?", items, 0, false, &ok);
    return ok ? static_cast<int>(items.indexOf(item)) : -1;
  };
  file->addAction(
      "Export chart (PNG or SVG)...", QKeySequence(Qt::CTRL | Qt::Key_E), this, [this, choose] {
        const int index = choose("Export chart");
        if (index < 0) return;
        const QString path =
            QFileDialog::getSaveFileName(this, "Export chart", "chart.png", "Images (*.png *.svg)");
        if (!path.isEmpty()) export_chart(static_cast<std::size_t>(index), path.toStdString());
      });
  file->addAction(
      "Export data (CSV)...", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E), this, [this, choose] {
        const int index = choose("Export data");
        if (index < 0) return;
        const QString path =
            QFileDialog::getSaveFileName(this, "Export data", "data.csv", "CSV (*.csv)");
        if (!path.isEmpty()) export_data(static_cast<std::size_t>(index), path.toStdString());
      });
  file->addSeparator();
  file->addAction("Quit", QKeySequence::Quit, this, [this] { close(); });

  QMenu* view_menu = menuBar()->addMenu("&View");
  for (std::size_t i = 0; i < views_.size(); ++i) {
    View* v = views_[i];
    view_menu->addAction(v->title(),
                         QKeySequence(static_cast<int>(Qt::CTRL) |
                                      static_cast<int>(Qt::Key_1 + static_cast<int>(i))),
                         this, [this, v] { tabs_->setCurrentWidget(v); });
  }
  view_menu->addSeparator();
  QAction* presentation = view_menu->addAction("Presentation mode", QKeySequence(Qt::Key_F5), this,
                                               [this](bool on) { set_presentation(on); });
  presentation->setObjectName("presentation_action");
  presentation->setCheckable(true);
  QAction* explanations = view_menu->addAction("Explanations", QKeySequence(Qt::CTRL | Qt::Key_H),
                                               this, [this](bool on) {
                                                 explanations_chosen_ = true;
                                                 set_explanations(on);
                                               });
  explanations->setObjectName("explanations_action");
  explanations->setCheckable(true);
  explanations->setChecked(true);

  QMenu* lesson = menuBar()->addMenu("&Lesson");
  lesson->addAction("Start the lesson", QKeySequence(Qt::CTRL | Qt::Key_L), this,
                    [this] { start_lesson(); });
  lesson->addAction("Next step", QKeySequence(Qt::ALT | Qt::Key_Right), this, [this] {
    if (lesson_index_ >= 0) lesson_step(lesson_index_ + 1);
  });
  lesson->addAction("Previous step", QKeySequence(Qt::ALT | Qt::Key_Left), this, [this] {
    if (lesson_index_ >= 0) lesson_step(lesson_index_ - 1);
  });
  lesson->addSeparator();
  const auto& steps = lesson_steps();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    lesson->addAction(QString("%1. %2").arg(i + 1).arg(QString::fromStdString(steps[i].title)),
                      this, [this, i] { lesson_step(static_cast<int>(i)); });
  }
  lesson->addSeparator();
  lesson->addAction("End the lesson", this, [this] { end_lesson(); });
  QMenu* help = menuBar()->addMenu("&Help");
  help->addAction("About AttnRes Lab", this,
                  [this] { QMessageBox::about(this, "About AttnRes Lab", about_text()); });
  help->addAction("About Qt", this, [this] { QMessageBox::aboutQt(this); });
  normal_font_ = QApplication::font();
  setMinimumSize(1024, 700);
  QApplication::instance()->installEventFilter(this);
  // 1400 x 900, or the screen it opens on when that is smaller (a 1280 x 800 laptop): never a
  // window whose title bar or status bar is off the screen.
  QSize size(1400, 900);
  if (const QScreen* shown_on = screen())
    size = size.boundedTo(shown_on->availableGeometry().size());
  resize(size);
}

MainWindow::~MainWindow() {
  disconnect(tabs_, nullptr, this, nullptr);  // removing the tabs below must not restage
  // The work of runs in flight must end before the window (and the views it applies to) goes:
  // cancel every run, then wait for it (a run still queued is run here, and stops at once).
  for (const auto& [number, job] : background_->in_flight) job->token.cancel();
  background_->pool.waitForDone();  // every task run (a queued one stops at once) and deleted
  for (const auto& [number, job] : background_->in_flight) {
    delete job->watcher;  // no finished() after this; its queued events go with it
    job->watcher = nullptr;
  }
  background_->in_flight.clear();
  // The views go before the lesson model whose panel one of them holds.
  const std::vector<View*> views = std::move(views_);
  views_.clear();
  for (View* view : views) delete view;
}

void MainWindow::wait_for_workers() {
  background_->pool.waitForDone();
}

View* MainWindow::view(const std::string& name) const {
  for (View* v : views_) {
    if (v->name() == name) return v;
  }
  return nullptr;
}

void MainWindow::show_view(const std::string& name) {
  if (View* v = view(name)) tabs_->setCurrentWidget(v);
}

View* MainWindow::current_view() const {
  return static_cast<View*>(tabs_->currentWidget());
}

void MainWindow::show_error(const std::string& message) {
  // A window error (a file, an export): the tab's charts still show its valid inputs.
  if (View* v = current_view()) v->show_error(message, {}, false);
  statusBar()->showMessage("error", 5000);
}

void MainWindow::clear_error() {
  if (View* v = current_view()) v->clear_error();
}

std::string MainWindow::error_text() const {
  const View* v = current_view();
  return v != nullptr ? v->error_text() : std::string();
}

bool MainWindow::guarded(const std::function<void()>& action) {
  try {
    action();
    return true;
  } catch (const std::exception& error) {
    show_error(error.what());
    return false;
  }
}

void MainWindow::run(View* view, const QString& label, BackgroundWork work) {
  if (synchronous_) {
    const Progress go_on = [](std::size_t, std::size_t) { return true; };
    try {
      const std::function<void()> apply = work(go_on);
      if (apply) apply();
      view->clear_error();
      view->set_stale({});
      if (presentation_) update_stage();
    } catch (const Cancelled&) {
      statusBar()->showMessage(label + ": cancelled", 4000);
      view->set_stale("cancelled: this shows the previous result");
    } catch (const std::exception& error) {
      view->show_error(error.what());
    }
    return;
  }
  view->set_pending(true);
  start(view, label, std::move(work), {});
}

void MainWindow::run_window(const QString& label, BackgroundWork work,
                            std::function<void()> on_cancelled) {
  if (synchronous_) {
    const Progress go_on = [](std::size_t, std::size_t) { return true; };
    try {
      const std::function<void()> apply = work(go_on);
      if (apply) guarded(apply);
    } catch (const Cancelled&) {
      statusBar()->showMessage(label + ": cancelled", 4000);
      if (on_cancelled) on_cancelled();
    } catch (const std::exception& error) {
      show_error(error.what());
    }
    return;
  }
  start(nullptr, label, std::move(work), std::move(on_cancelled));
}

namespace {

QString run_key(const View* view, const QString& label) {
  return (view != nullptr ? QString::fromStdString(view->name()) : QString("window")) + "/" + label;
}

}  // namespace

void MainWindow::start(View* view, const QString& label, BackgroundWork work,
                       std::function<void()> on_cancelled) {
  const QString key = run_key(view, label);
  // An older run of this key would only produce a stale result: stop it, and let this work wait
  // until it has stopped (it holds a worker thread until its next progress check).
  bool busy = false;
  for (const auto& [number, other] : background_->in_flight) {
    if (other->key == key) {
      other->token.cancel();
      busy = true;
    }
  }
  const auto older = background_->waiting.find(key);
  std::function<void()> dropped;  // an older waiting run, replaced unstarted
  if (older != background_->waiting.end()) {
    dropped = std::move(older->second.on_cancelled);
    background_->waiting.erase(older);
  }
  if (busy) {
    background_->latest[key] = 0;
    background_->waiting[key] = {view, view == nullptr, label, std::move(work),
                                 std::move(on_cancelled)};
    show_progress();
  } else {
    launch(view, label, std::move(work), std::move(on_cancelled));
  }
  if (dropped) dropped();
}

void MainWindow::start_waiting(const QString& key) {
  const auto it = background_->waiting.find(key);
  if (it == background_->waiting.end()) return;
  for (const auto& [number, other] : background_->in_flight) {
    if (other->key == key) return;  // still stopping
  }
  Background::Waiting next = std::move(it->second);
  background_->waiting.erase(it);
  if (next.view || next.window_level)
    launch(next.view, next.label, std::move(next.work), std::move(next.on_cancelled));
}

void MainWindow::launch(View* view, const QString& label, BackgroundWork work,
                        std::function<void()> on_cancelled) {
  auto job = std::make_shared<Run>();
  job->number = ++background_->next;
  job->label = label;
  job->key = run_key(view, label);
  job->view = view;
  job->window_level = view == nullptr;
  job->on_cancelled = std::move(on_cancelled);
  background_->latest[job->key] = job->number;
  background_->in_flight[job->number] = job;

  // Worker side: keep the latest (done, total) and queue at most one update of the progress bar
  // at a time; the GUI thread reads the newest values when it gets there.
  Progress report = [this, job](std::size_t done, std::size_t total) {
    if (total > 0) {
      job->done.store(done);
      job->total.store(total);
      if (!job->update_posted.exchange(true)) {
        QMetaObject::invokeMethod(
            this,
            [this, job] {
              job->update_posted.store(false);
              show_progress();
            },
            Qt::QueuedConnection);
      }
    }
    return true;
  };
  Progress progress = job->token.progress(std::move(report));
  // Errors inside the work come back as a closure that shows them; Cancelled as a flag.
  auto task = [work = std::move(work), progress = std::move(progress)]() -> Outcome {
    try {
      return {work(progress), false};
    } catch (const Cancelled&) {
      return {{}, true};
    } catch (const std::exception& error) {
      const std::string message = error.what();
      return {[message] { throw Error(message); }, false};
    } catch (...) {
      return {[] { throw Error("unknown error in background work"); }, false};
    }
  };
  statusBar()->showMessage(label + "...");
  job->watcher = new QFutureWatcher<Outcome>(this);
  connect(job->watcher, &QFutureWatcher<Outcome>::finished, this, [this, job] { finish(job); });
  job->future = QtConcurrent::run(&background_->pool, std::move(task));
  job->watcher->setFuture(job->future);
  show_progress();
}

void MainWindow::finish(const std::shared_ptr<Run>& job) {
  background_->in_flight.erase(job->number);
  const Outcome outcome = job->future.result();
  job->watcher->deleteLater();
  job->watcher = nullptr;
  const bool superseded = background_->latest[job->key] != job->number;
  View* view = job->view;
  if (superseded) {
    if (job->on_cancelled) job->on_cancelled();
    start_waiting(job->key);
    show_progress();
    return;
  }
  show_progress();
  if (job->window_level) {
    if (job->token.cancelled() || outcome.cancelled) {
      statusBar()->showMessage(job->label + ": cancelled", 4000);
      if (job->on_cancelled) job->on_cancelled();
      return;
    }
    if (!progress_->isVisibleTo(this)) statusBar()->clearMessage();
    if (outcome.apply) guarded(outcome.apply);
    return;
  }
  if (view == nullptr) return;
  view->set_pending(false);
  if (job->token.cancelled() || outcome.cancelled) {
    statusBar()->showMessage(job->label + ": cancelled", 4000);
    view->set_stale("cancelled: this shows the previous result");
    return;
  }
  if (!progress_->isVisibleTo(this)) statusBar()->clearMessage();
  if (!outcome.apply) return;
  try {
    outcome.apply();
    view->clear_error();
    view->set_stale({});
    if (presentation_) update_stage();
  } catch (const std::exception& error) {
    view->show_error(error.what());
  }
}

// The newest run in flight that is not cancelled drives the progress bar: busy until its work
// reports (done, total), then done / total.
void MainWindow::show_progress() {
  std::shared_ptr<Run> shown;
  for (auto it = background_->in_flight.rbegin(); it != background_->in_flight.rend(); ++it) {
    if (!it->second->token.cancelled()) {
      shown = it->second;
      break;
    }
  }
  progress_->setVisible(shown != nullptr);
  cancel_->setVisible(shown != nullptr);
  if (!shown) return;
  const std::size_t total = shown->total.load(), done = std::min(shown->done.load(), total);
  if (total == 0) {
    progress_->setRange(0, 0);  // busy
  } else {
    progress_->setRange(0, 1000);
    progress_->setValue(static_cast<int>(
        std::lround(1000.0 * static_cast<double>(done) / static_cast<double>(total))));
  }
}

void MainWindow::cancel_background() {
  std::vector<std::function<void()>> dropped;
  for (auto& [key, waiting] : background_->waiting) {
    if (waiting.view) {
      waiting.view->set_pending(false);
      waiting.view->set_stale("cancelled: this shows the previous result");
    }
    if (waiting.on_cancelled) dropped.push_back(std::move(waiting.on_cancelled));
  }
  background_->waiting.clear();
  for (const auto& [number, job] : background_->in_flight) job->token.cancel();
  statusBar()->showMessage("cancelled", 4000);
  show_progress();
  for (const auto& on_cancelled : dropped) on_cancelled();
}

void MainWindow::cancel_run(const QString& label) {
  std::vector<std::function<void()>> dropped;
  for (auto it = background_->waiting.begin(); it != background_->waiting.end();) {
    if (it->second.label != label) {
      ++it;
      continue;
    }
    if (it->second.on_cancelled) dropped.push_back(std::move(it->second.on_cancelled));
    it = background_->waiting.erase(it);
  }
  for (const auto& [number, job] : background_->in_flight) {
    if (job->label == label) job->token.cancel();
  }
  show_progress();
  for (const auto& on_cancelled : dropped) on_cancelled();
}

std::size_t MainWindow::runs_in_flight() const {
  return background_->in_flight.size() + background_->waiting.size();
}

void MainWindow::recompute_all() {
  for (View* v : views_) v->recompute();
}

bool MainWindow::open_scenario(const fs::path& path) {
  return guarded([&] {
    const Scenario scenario = load_scenario(path);
    // Every view says first whether it can show the scenario as it is: nothing changes otherwise.
    for (View* v : views_) {
      if (std::string problem = v->scenario_problem(scenario); !problem.empty()) {
        problem = path.string() + ": " + problem;
        problem += "; nothing was opened (the CLI computes it: attnres report ";
        problem += path.string();
        problem += ")";
        throw Error(problem);
      }
    }
    clear_error();
    for (View* v : views_) v->apply_scenario(scenario);
    // The title names what the views compute: the scenario's title and its file.
    const std::string name = path.filename().string();
    setWindowTitle(QString::fromStdString(
        (scenario.title.empty() ? name : printable_text(scenario.title) + " (" + name + ")") +
        " — AttnRes Lab"));
    statusBar()->showMessage(QString::fromStdString("opened " + path.string()), 5000);
  });
}

bool MainWindow::save_scenario(const fs::path& path) {
  return guarded([&] {
    write_file_atomically(path, scenario_to_toml(scenario_from_views(views_)));
    statusBar()->showMessage(QString::fromStdString("saved " + path.string()), 5000);
  });
}

bool MainWindow::open_model(const fs::path& directory, OpenModelOptions options) {
  // Read once, off the GUI thread, before anything changes: a bad model leaves the views as they
  // were.
  auto result = std::make_shared<OpenResult>(OpenResult::cancelled);
  auto done = [result, told = std::move(options.done)](OpenResult r, const std::string& error) {
    *result = r;
    if (told) told(r, error);
  };
  auto read = lesson_->directory_reader(directory.string());
  BackgroundWork work = [this, read = std::move(read), check = std::move(options.check),
                         done](const Progress& progress) -> std::function<void()> {
    const Progress both = [&progress, &check](std::size_t at, std::size_t total) {
      return (!check || check(at, total)) && (!progress || progress(at, total));
    };
    std::shared_ptr<const OpenedModel> opened = read(both);
    return [this, opened = std::move(opened), done] {
      if (opened->error) {
        try {
          std::rethrow_exception(opened->error);
        } catch (const std::exception& error) {
          done(OpenResult::failed, error.what());
          throw;
        }
      }
      clear_error();
      lesson_->use_directory(opened);
      statusBar()->showMessage(QString::fromStdString(std::string("opened ") + opened->directory),
                               5000);
      done(OpenResult::opened, {});
    };
  };
  // One label for every open: a newer one replaces the read in flight.
  run_window("opening a model", std::move(work), [done] { done(OpenResult::cancelled, {}); });
  if (!synchronous_)
    statusBar()->showMessage("opening " + QString::fromStdString(directory.string()) + "...");
  return synchronous_ ? *result == OpenResult::opened : true;
}

std::vector<std::string> MainWindow::export_titles() const {
  std::vector<std::string> titles;
  View* v = current_view();
  for (const auto& chart : v->charts()) titles.push_back(chart.title);
  for (auto* map : v->heatmaps()) titles.push_back(map->title());
  return titles;
}

bool MainWindow::export_chart(std::size_t index, const fs::path& path) {
  return guarded([&] {
    View* v = current_view();
    const auto charts = v->charts();
    const auto maps = v->heatmaps();
    const std::string extension = path.extension().string();
    if (extension != ".png" && extension != ".svg")
      throw Error("export: '" + path.string() + "' must end in .png or .svg");
    if (index < charts.size()) {
      // The same renderer as the CLI's reports; write both, keep the one asked for.
      const fs::path stem = path.parent_path() / path.stem();
      const fs::path png = extension == ".png" ? path : fs::path(stem.string() + ".tmp-export.png");
      const fs::path svg = extension == ".svg" ? path : fs::path(stem.string() + ".tmp-export.svg");
      charts::render_chart_files(charts[index], png, svg);
      std::error_code ignored;
      fs::remove(extension == ".png" ? svg : png, ignored);
    } else if (index - charts.size() < maps.size()) {
      maps[index - charts.size()]->export_image(path);
    } else {
      throw Error("export: nothing to export at index " + std::to_string(index));
    }
  });
}

bool MainWindow::export_data(std::size_t index, const fs::path& path) {
  return guarded([&] {
    View* v = current_view();
    const auto charts = v->charts();
    const auto maps = v->heatmaps();
    if (index < charts.size()) {
      write_file_atomically(path, chart_csv(charts[index]));
    } else if (index - charts.size() < maps.size()) {
      write_file_atomically(path, maps[index - charts.size()]->csv());
    } else {
      throw Error("export: nothing to export at index " + std::to_string(index));
    }
  });
}

void MainWindow::closeEvent(QCloseEvent* event) {
  auto* training = dynamic_cast<TrainingView*>(view("training"));
  if (!synchronous_ && training != nullptr && training->state() == TrainingView::State::running) {
    const auto answer = QMessageBox::question(
        this, "Quit AttnRes Lab",
        "A training run is in progress. Stop it and quit? (Its results so far are lost unless "
        "saved.)",
        QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer != QMessageBox::Yes) {
      event->ignore();
      return;
    }
    training->stop();
  }
  QMainWindow::closeEvent(event);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  // Ctrl+E and Ctrl+Shift+E (export) work with the focus in a field: a line edit would take them
  // as "end of line" first.
  if (event->type() == QEvent::ShortcutOverride) {
    const auto* key = static_cast<QKeyEvent*>(event);
    if (key->key() == Qt::Key_E && (key->modifiers() & Qt::ControlModifier) &&
        (qobject_cast<QLineEdit*>(watched) || qobject_cast<QAbstractSpinBox*>(watched))) {
      event->ignore();
      return true;
    }
  }
  if (event->type() != QEvent::KeyPress || lesson_index_ < 0 || lesson_bar_->isHidden())
    return QMainWindow::eventFilter(watched, event);
  auto* widget = qobject_cast<QWidget*>(watched);
  if (widget == nullptr || widget->window() != this)
    return QMainWindow::eventFilter(watched, event);
  const auto* key = static_cast<QKeyEvent*>(event);
  if (key->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier))
    return QMainWindow::eventFilter(watched, event);
  // An input that takes arrows or Space keeps them (typing in a field, moving a slider).
  QWidget* focus = QApplication::focusWidget();
  const bool input_has_focus =
      focus != nullptr &&
      (qobject_cast<QAbstractSpinBox*>(focus) || qobject_cast<QLineEdit*>(focus) ||
       qobject_cast<QComboBox*>(focus) || qobject_cast<QAbstractSlider*>(focus) ||
       qobject_cast<QAbstractButton*>(focus) || qobject_cast<QAbstractItemView*>(focus) ||
       qobject_cast<QTextEdit*>(focus) || qobject_cast<QPlainTextEdit*>(focus));
  int move = 0;
  switch (key->key()) {
    case Qt::Key_PageDown:
      move = 1;
      break;
    case Qt::Key_PageUp:
      move = -1;
      break;
    case Qt::Key_Right:
    case Qt::Key_Down:
    case Qt::Key_Space:
      move = input_has_focus ? 0 : 1;
      break;
    case Qt::Key_Left:
    case Qt::Key_Up:
      move = input_has_focus ? 0 : -1;
      break;
    default:
      break;
  }
  if (move == 0) return QMainWindow::eventFilter(watched, event);
  const int next = lesson_index_ + move;
  if (next >= 0 && next < static_cast<int>(lesson_steps().size())) lesson_step(next);
  return true;
}

}  // namespace attnres::gui
