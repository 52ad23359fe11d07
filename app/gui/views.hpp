// The views of attnres-lab, one per question: cost explorer, depth attention, magnitudes,
// pipeline, duality, scaling law. Each has inputs, charts or heatmaps built from core results,
// and an explanation panel (what you see, the formula, what to try).
#pragma once

#include <QWidget>
#include <functional>
#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"
#include "attnres/scenario.hpp"
#include "widgets.hpp"

namespace attnres::gui {

// What the main window lends a view.
struct ViewHost {
  std::function<void(const std::string&)> show_error;
  std::function<void()> clear_error;
  // Runs `work` off the GUI thread (inline when synchronous) with a progress bar and a cancel
  // button; the closure it returns is applied on the GUI thread unless the run was cancelled.
  std::function<void(const QString& label, std::function<std::function<void()>()> work)> run;
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
