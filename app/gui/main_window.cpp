#include "main_window.hpp"

#include <QApplication>
#include <QFileDialog>
#include <QFutureWatcher>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/model.hpp"
#include "chart_render.hpp"

namespace attnres::gui {

namespace fs = std::filesystem;

// Runs are numbered; a finished run applies its result only if it is still the latest for its
// view and was not cancelled, so the window never shows stale or cancelled work.
struct MainWindow::Background {
  std::map<QString, int> latest;  // label -> run number
  int next = 0;
  int active = 0;
  bool cancelled = false;
};

MainWindow::MainWindow(bool synchronous, QWidget* parent)
    : QMainWindow(parent), synchronous_(synchronous), background_(std::make_unique<Background>()) {
  setWindowTitle("AttnRes Lab");
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  banner_ = new QLabel;
  banner_->setWordWrap(true);
  banner_->setStyleSheet("QLabel { background: #fde2e1; color: #8a1c1c; padding: 6px; border: 1px solid #e0a3a0; }");
  banner_->setVisible(false);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  tabs_ = new QTabWidget;
  layout->addWidget(banner_);
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
  host.show_error = [this](const std::string& message) { show_error(message); };
  host.clear_error = [this] { clear_error(); };
  host.run = [this](const QString& label, std::function<std::function<void()>()> work) { run(label, std::move(work)); };
  views_ = make_views(host, this);
  for (View* view : views_) tabs_->addTab(view, view->title());

  QMenu* file = menuBar()->addMenu("&File");
  file->addAction("Open scenario...", this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Open scenario", {}, "Scenario (*.toml)");
    if (!path.isEmpty()) open_scenario(path.toStdString());
  });
  file->addAction("Save scenario...", this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, "Save scenario", "scenario.toml", "Scenario (*.toml)");
    if (!path.isEmpty()) save_scenario(path.toStdString());
  });
  file->addAction("Open model directory...", this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, "Open model directory (config.json + model.safetensors)");
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
  file->addAction("Export chart (PNG or SVG)...", this, [this, choose] {
    const int index = choose("Export chart");
    if (index < 0) return;
    const QString path = QFileDialog::getSaveFileName(this, "Export chart", "chart.png", "Images (*.png *.svg)");
    if (!path.isEmpty()) export_chart(static_cast<std::size_t>(index), path.toStdString());
  });
  file->addAction("Export data (CSV)...", this, [this, choose] {
    const int index = choose("Export data");
    if (index < 0) return;
    const QString path = QFileDialog::getSaveFileName(this, "Export data", "data.csv", "CSV (*.csv)");
    if (!path.isEmpty()) export_data(static_cast<std::size_t>(index), path.toStdString());
  });
  file->addSeparator();
  file->addAction("Quit", this, [this] { close(); });
  resize(1400, 900);
}

MainWindow::~MainWindow() = default;

View* MainWindow::view(const std::string& name) const {
  for (View* v : views_) {
    if (v->name() == name) return v;
  }
  return nullptr;
}

void MainWindow::show_view(const std::string& name) {
  if (View* v = view(name)) tabs_->setCurrentWidget(v);
}

View* MainWindow::current_view() const { return static_cast<View*>(tabs_->currentWidget()); }

void MainWindow::show_error(const std::string& message) {
  banner_->setText(QString::fromStdString("error: " + message));
  banner_->setVisible(true);
  statusBar()->showMessage("error", 5000);
}

void MainWindow::clear_error() { banner_->setVisible(false); }

std::string MainWindow::error_text() const {
  return banner_->isVisibleTo(this) ? banner_->text().toStdString() : std::string();
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

void MainWindow::run(const QString& label, std::function<std::function<void()>()> work) {
  // Errors inside the work come back as a closure that shows them.
  auto safe = [work = std::move(work)]() -> std::function<void()> {
    try {
      return work();
    } catch (const std::exception& error) {
      const std::string message = error.what();
      return [message] { throw Error(message); };
    }
  };
  if (synchronous_) {
    guarded(safe());
    return;
  }
  const int number = ++background_->next;
  background_->latest[label] = number;
  background_->cancelled = false;
  ++background_->active;
  progress_->setVisible(true);
  cancel_->setVisible(true);
  statusBar()->showMessage(label + "...");
  auto* watcher = new QFutureWatcher<std::function<void()>>(this);
  connect(watcher, &QFutureWatcher<std::function<void()>>::finished, this, [this, watcher, label, number] {
    --background_->active;
    if (background_->active == 0) {
      progress_->setVisible(false);
      cancel_->setVisible(false);
      statusBar()->clearMessage();
    }
    const bool current = background_->latest[label] == number && !background_->cancelled;
    if (current && guarded(watcher->result())) clear_error();
    watcher->deleteLater();
  });
  watcher->setFuture(QtConcurrent::run(safe));
}

void MainWindow::cancel_background() {
  background_->cancelled = true;
  statusBar()->showMessage("cancelled; the result will be discarded", 4000);
  progress_->setVisible(false);
  cancel_->setVisible(false);
}

void MainWindow::recompute_all() {
  for (View* v : views_) v->recompute();
}

bool MainWindow::open_scenario(const fs::path& path) {
  return guarded([&] {
    const Scenario scenario = load_scenario(path);
    clear_error();
    for (View* v : views_) v->apply_scenario(scenario);
    statusBar()->showMessage(QString::fromStdString("opened " + path.string()), 5000);
  });
}

bool MainWindow::save_scenario(const fs::path& path) {
  return guarded([&] {
    write_file_atomically(path, scenario_to_toml(scenario_from_views(views_)));
    statusBar()->showMessage(QString::fromStdString("saved " + path.string()), 5000);
  });
}

bool MainWindow::open_model(const fs::path& directory) {
  return guarded([&] {
    load_model(directory);  // validate first: a bad model leaves the views as they were
    clear_error();
    for (View* v : views_) v->set_model_directory(directory.string());
  });
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
    if (extension != ".png" && extension != ".svg") throw Error("export: '" + path.string() + "' must end in .png or .svg");
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

}  // namespace attnres::gui
