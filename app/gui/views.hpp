// The views of attnres-lab, one per question: cost explorer, depth attention, magnitudes,
// pipeline, duality, scaling law. Each has inputs, charts or heatmaps built from core results,
// and an explanation panel (what you see, the formula, what to try).
#pragma once

#include <QWidget>
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

// Creates every view, in menu order.
std::vector<View*> make_views(const ViewHost& host, QWidget* parent);

// The cost explorer's current settings as a scenario (for File > Save Scenario).
Scenario scenario_from_views(const std::vector<View*>& views);

}  // namespace attnres::gui
