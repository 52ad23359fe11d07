// The Training view of attnres-lab (docs/training.md): trains the standard residual, Full
// AttnRes and Block AttnRes side by side on the same text, from the same initial weights, one
// AdamW step each in turn, and shows the loss curves, the depth-attention weights of one AttnRes
// scheme, and the output and output-gradient RMS by depth as the run goes.
//
// The run works off the GUI thread (ViewHost::run): the worker owns the Trainers, publishes new
// log rows and alpha maps into a shared, mutex-guarded record and posts at most ~10 updates per
// second to the GUI thread, which draws them. Stop (or the status bar's Cancel) ends the work at
// the next check inside the step in flight; the steps taken so far stay and can be saved.
// training_view.cpp holds the form, training_run.cpp the run, training_charts.cpp the drawing.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "attnres/train_report.hpp"
#include "attnres/trainer.hpp"
#include "training_state.hpp"
#include "views.hpp"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
QT_END_NAMESPACE

namespace attnres::gui {

class ChartPanel;

// A few KB of simple English sentences, the same bytes on every run (the "Use built-in sample
// text" data: nothing is written to disk).
std::string builtin_sample_text();

// The Training view's three charts from the log rows taken so far (one list per scheme, its legend
// name in `names`): the loss (training lines from step 1, validation markers), and the output RMS
// and output-gradient RMS by sublayer at each scheme's latest step.
std::array<ChartSpec, 3> training_charts(
    const std::vector<std::string>& names,
    const std::vector<std::vector<TrainLogRow>>& rows_by_scheme);

class Player;

class TrainingView : public View {
 public:
  enum class State { idle, running, finished, stopped, failed };

  TrainingView(const ViewHost& host, const ViewEntry& entry);
  ~TrainingView() override;

  void recompute() override {}  // training starts with Start, never by itself
  // A scenario's [train] table sets the state (training_state) and the form shows it; nothing
  // starts. What the view cannot take is said in the status line.
  void apply_scenario(const Scenario& scenario) override;
  std::string scenario_problem(const Scenario& scenario) const override;
  // The state as a [train] table (save_training_state; File > Save scenario).
  void save_to(Scenario& scenario) const override;
  nlohmann::json state_json() const override { return training_state_json(inputs_); }
  std::vector<ChartSpec> charts() const override;
  std::vector<HeatmapWidget*> heatmaps() override;

  // The buttons' actions (errors go to the banner).
  void start();
  void stop();
  void use_builtin_sample();
  void save_models(const std::filesystem::path& directory);

  // The latest run as the GUI thread has seen it, and the steps its worker has taken so far
  // (every scheme together; read from the worker's counter).
  State state() const { return state_; }
  std::int64_t steps_done() const;
  // The schemes compared by seed over the seeds that have finished (docs/training.md#statistics):
  // the same comparisons as a report's train_paired_differences table.
  std::vector<PairedComparison> paired() const;
  // The inputs the form shows (training_state.hpp): the widgets write into it as they change.
  const TrainingState& inputs() const { return inputs_; }

 private:
  // The widget-free parts of a run live in the models library (training_state.hpp).
  using Settings = TrainingSettings;
  using Scheme = TrainingScheme;
  struct Run;
  // The constructor's steps: the input column (data, model and run, schemes, buttons) in its
  // scroll area, the content grid, then the actions of the buttons and fields.
  QWidget* make_inputs(QPushButton*& browse, QPushButton*& builtin);
  QWidget* make_data_box(QPushButton*& browse, QPushButton*& builtin);
  QWidget* make_model_box();
  QWidget* make_scheme_box();
  QWidget* make_content();
  void connect_actions(QPushButton* browse, QPushButton* builtin);
  void bind_inputs();
  // The form shows `state`, which becomes inputs_ (exact: a value the widgets round, such as a
  // learning rate beyond the field's decimals, stays as the state has it).
  void show_state(const TrainingState& state);
  void show_data_info();
  Settings settings() const { return training_settings(inputs_); }
  void apply_update(const std::shared_ptr<Run>& run);
  void redraw();
  void redraw_alpha();
  void update_status();
  void update_paired();
  void set_running(bool running);

  QLineEdit* data_path_;
  QLabel* data_info_;
  QDoubleSpinBox *validation_fraction_, *lr_;
  QSpinBox *layers_, *d_model_, *heads_, *ffn_, *seq_, *batch_, *steps_, *seed_, *seeds_, *threads_,
      *block_size_;
  QCheckBox *standard_, *full_, *block_, *other_;
  QComboBox* other_scheme_;  // a named scheme or "NAME:key=value,..." (docs/schemes.md)
  QComboBox* precision_;     // bf16 | f32 (docs/training.md "Precision")
  QPushButton *start_, *stop_, *save_;
  QLabel* status_;
  QLabel* paired_;  // the paired comparisons by seed, once two seeds have finished
  QComboBox* alpha_scheme_;
  // Which evaluation's α map is shown (its maximum: the latest, followed live) and its player.
  QSpinBox* alpha_frame_ = nullptr;
  Player* alpha_player_ = nullptr;
  bool alpha_live_ = true;  // the frame follows the newest evaluation
  ChartPanel *loss_, *rms_, *grad_rms_;
  HeatmapWidget* alpha_;
  TrainingState inputs_ = default_training_state();
  std::optional<Scenario> opened_;  // the scenario the form was opened from (save_to)

  State state_ = State::idle;
  std::shared_ptr<Run> run_;
  int next_run_ = 0;
  // What the GUI thread has taken from the run so far.
  std::vector<std::vector<TrainLogRow>> rows_;           // of the seed in flight (or the last one)
  int round_ = 0;                                        // which seed rows_ are of
  std::vector<std::map<std::uint64_t, double>> finals_;  // per scheme: final loss by seed
  std::string saved_;  // the last "saved ..." note for the status line
};

}  // namespace attnres::gui
