// The views of attnres-lab, one per question: cost explorer, depth attention, magnitudes,
// pipeline, duality, scaling law. Each has inputs, charts or heatmaps built from core results,
// and an explanation panel (what you see, the formula, what to try).
#pragma once

#include <QWidget>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/scenario.hpp"
#include "widgets.hpp"

namespace attnres::gui {

// Heavy work of a view: runs off the GUI thread with the run's progress callback and returns
// the closure that applies its result on the GUI thread. The work passes `progress` into the
// core (ForwardOptions::progress, PipelineSettings::progress, run_sweep's argument): it reports
// (done, total) to the progress bar and returns false once the run is cancelled, and the core
// then throws attnres::Cancelled. A call with total == 0 only asks whether to go on.
using BackgroundWork = std::function<std::function<void()>(const Progress& progress)>;

// What the main window lends a view.
struct ViewHost {
  std::function<void(const std::string&)> show_error;
  std::function<void()> clear_error;
  // Runs `work` off the GUI thread (inline when synchronous) with a progress bar and a cancel
  // button. Every run has its own cancel token; a newer run with the same label cancels the
  // older one. The closure the work returns is applied on the GUI thread unless the run was
  // cancelled or superseded; an exception from the work is shown in the error banner, except
  // attnres::Cancelled.
  std::function<void(const QString& label, BackgroundWork work)> run;
};

class View : public QWidget {
 public:
  View(std::string name, QString title, ViewHost host, QWidget* parent = nullptr)
      : QWidget(parent), name_(std::move(name)), title_(std::move(title)), host_(std::move(host)) {}
  const std::string& name() const { return name_; }
  const QString& title() const { return title_; }
  // Recomputes from the current inputs (through host.run for heavy work).
  virtual void recompute() = 0;
  // Charts and heatmaps the user can export.
  virtual std::vector<ChartSpec> charts() const { return {}; }
  virtual std::vector<HeatmapWidget*> heatmaps() { return {}; }
  virtual void apply_scenario(const Scenario&) {}
  virtual void set_model_directory(const std::string&) {}

 protected:
  std::string name_;
  QString title_;
  ViewHost host_;
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

// One line about a trained model from its train_log.csv (header step,tokens,train_loss,val_loss,...;
// the first and the last row with a validation loss): "trained 600 steps on DATA, validation loss
// 5.55 -> 1.52 nats/token" (" on DATA" only when `data` is given). Empty when the file is missing
// or has no validation loss.
std::string training_log_summary(const std::filesystem::path& train_log_csv, const std::string& data = {});

// Creates every view, in menu order.
std::vector<View*> make_views(const ViewHost& host, QWidget* parent);

// The cost explorer's current settings as a scenario (for File > Save Scenario).
Scenario scenario_from_views(const std::vector<View*>& views);

}  // namespace attnres::gui
