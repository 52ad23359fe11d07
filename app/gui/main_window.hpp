// The attnres-lab main window: one tab per view, File menu (open/save scenario, open model
// directory, export chart PNG/SVG, export data CSV), an error banner that shows the same message
// the CLI prints while the application keeps running, and a progress bar with a cancel button
// for work that runs off the GUI thread.
#pragma once

#include <QMainWindow>
#include <filesystem>
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

class MainWindow : public QMainWindow {
 public:
  // synchronous: run every computation inline (screenshots, tests).
  explicit MainWindow(bool synchronous = false, QWidget* parent = nullptr);
  ~MainWindow() override;

  const std::vector<View*>& views() const { return views_; }
  View* view(const std::string& name) const;
  void show_view(const std::string& name);
  View* current_view() const;

  // File actions; each reports errors in the banner and returns false instead of throwing.
  bool open_scenario(const std::filesystem::path& path);
  bool save_scenario(const std::filesystem::path& path);
  bool open_model(const std::filesystem::path& directory);
  // Exports chart `index` of the current view (charts first, then heatmaps) by extension.
  bool export_chart(std::size_t index, const std::filesystem::path& path);
  bool export_data(std::size_t index, const std::filesystem::path& path);
  std::vector<std::string> export_titles() const;

  void show_error(const std::string& message);
  void clear_error();
  std::string error_text() const;
  // Recomputes every view (inline when synchronous).
  void recompute_all();
  // What views use for heavy work: off the GUI thread with a progress bar and a cancel button.
  void run(const QString& label, std::function<std::function<void()>()> work);
  void cancel_background();

 private:
  bool guarded(const std::function<void()>& action);
  bool synchronous_;
  QTabWidget* tabs_;
  QLabel* banner_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  std::vector<View*> views_;
  struct Background;
  std::unique_ptr<Background> background_;
};

}  // namespace attnres::gui
