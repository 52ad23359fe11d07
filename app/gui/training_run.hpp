// The run of the Training view (internal to app/gui: training_view.cpp, training_run.cpp and
// training_charts.cpp share it; docs/training.md). The settings are built from the view's state on
// the GUI thread (training_settings, training_state.hpp); the worker owns the Trainers, one per
// scheme, steps them in turn and publishes new log rows and depth-attention maps into the Run
// under its mutex; the GUI thread takes what is new when a posted update arrives (at most ~10 a
// second).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/model_config.hpp"
#include "attnres/trainer.hpp"
#include "attnres/training.hpp"
#include "training_view.hpp"

namespace attnres::gui {

using Clock = std::chrono::steady_clock;
inline constexpr auto kUpdateInterval =
    std::chrono::milliseconds(100);  // at most ~10 updates a second

struct AlphaMap {
  std::int64_t step = 0;
  std::vector<std::vector<double>> values;  // reads x sources, NaN = not a source of that read
  std::vector<std::string> rows, columns;
};

// Mean depth-attention weights of the trainer's current weights on `window` (worker thread).
AlphaMap alpha_map(const Trainer& trainer, const std::vector<int>& window);

// Shared by the GUI thread and the worker. The worker publishes under `mutex`; the GUI thread
// takes what is new when a posted update arrives. The trainers belong to the worker until it has
// published its end (`end` != running), then to the GUI thread (Save models...).
struct TrainingView::Run {
  int id = 0;
  Settings settings;
  CancelToken stop;
  std::atomic<std::int64_t> steps{0};  // steps taken, every scheme and seed together

  std::mutex mutex;
  int round = 0;  // which seed (0 .. seeds - 1) `rows` and `alpha` are of
  std::vector<std::vector<TrainLogRow>> rows;  // per scheme, every row of this seed so far
  // Per scheme, the final validation loss of every seed that finished (paired comparisons).
  std::vector<std::map<std::uint64_t, double>> finals;
  std::vector<std::optional<AlphaMap>> alpha;  // per scheme, the latest map (AttnRes schemes)
  std::vector<std::vector<AlphaMap>>
      alpha_history;  // per scheme, every evaluation's map (this seed)
  int alpha_version = 0;
  double tokens_per_second = 0.0;
  State end = State::running;
  bool update_posted = false;
  Clock::time_point last_post{};
  std::vector<std::unique_ptr<Trainer>> trainers;

  // Worker side: asks the GUI thread to draw, at most one pending update and ~10 a second
  // (`force`: always, for the end of the run).
  void post(TrainingView* view, const std::shared_ptr<Run>& self, bool force);
  // Worker side: the whole run, one seed after another. For each seed every scheme's trainer
  // starts from the same weights and sees the same batches; they step in turn until each has
  // taken its steps, Stop or an error. The last seed's trainers are handed over (`end`) however
  // the run ends; Cancelled and errors are rethrown.
  void train(TrainingView* view, const std::shared_ptr<Run>& self, const Progress& progress);

 private:
  TextData read_text() const;
  void start_trainers(const TextData& text, const std::vector<int>& window, std::uint64_t seed,
                      const Progress& check, std::vector<std::unique_ptr<Trainer>>& trained);
  void take_steps(const std::vector<std::unique_ptr<Trainer>>& trained,
                  const std::vector<int>& window, const Progress& check, const Progress& progress,
                  TrainingView* view, const std::shared_ptr<Run>& self);
  void publish(std::size_t index, const TrainLogRow& row, std::optional<AlphaMap> alpha);
};

}  // namespace attnres::gui
