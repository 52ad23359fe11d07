// The Training view's run (training_run.hpp; docs/training.md): the built-in sample text, Start
// (the worker that trains every scheme in turn and publishes its rows), Stop, the GUI thread's
// side of an update, and Save models... (one checkpoint directory per scheme).
#include "training_run.hpp"

#include <QComboBox>
#include <QLabel>
#include <QMetaObject>
#include <QPushButton>
#include <QSignalBlocker>
#include <algorithm>
#include <cmath>

#include "attnres/error.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"

namespace attnres::gui {

namespace fs = std::filesystem;

// ------------------------------------------------------------------ the built-in sample text

std::string builtin_sample_text() {
  static const char* const subjects[] = {"the little cat", "a happy dog",    "my old friend",
                                         "the teacher",    "a small bird",   "the farmer",
                                         "our neighbour",  "the young girl", "the tall boy",
                                         "a busy bee",     "the baker",      "my sister"};
  static const char* const verbs[] = {"sees",    "likes", "finds", "carries",   "watches", "paints",
                                      "follows", "helps", "draws", "remembers", "opens",   "wants"};
  static const char* const objects[] = {"the red ball",      "a green apple",  "the big house",
                                        "a warm cup of tea", "the blue river", "a long letter",
                                        "the quiet garden",  "a bright star",  "the wooden boat",
                                        "an old book",       "the white door", "a sweet cake"};
  static const char* const endings[] = {"in the morning",  "after school",   "by the sea",
                                        "every day",       "under the tree", "at night",
                                        "with great care", "in the rain",    "near the hill",
                                        "before dinner",   "on sunday",      "all year"};
  static const char* const joins[] = {" and then ", " because ", " while ", ", but "};
  std::uint64_t state = 0x2545F4914F6CDD1DULL;  // xorshift64: the same text everywhere
  auto pick = [&state](std::size_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::size_t>(state % n);
  };
  auto clause = [&] {
    return std::string(subjects[pick(std::size(subjects))]) + " " + verbs[pick(std::size(verbs))] +
           " " + objects[pick(std::size(objects))] + " " + endings[pick(std::size(endings))];
  };
  std::string text;
  int in_paragraph = 0;
  while (text.size() < 16000) {
    std::string sentence = clause();
    if (pick(3) == 0) sentence += joins[pick(std::size(joins))] + clause();
    sentence[0] = static_cast<char>(sentence[0] - 'a' + 'A');
    text += sentence + ".";
    text += ++in_paragraph % 6 == 0 ? "\n\n" : " ";
  }
  return text;
}

AlphaMap alpha_map(const Trainer& trainer, const std::vector<int>& window) {
  const ForwardTrace trace = trainer.forward(window).trace;
  AlphaMap map;
  map.step = trainer.current_step();
  for (const auto& read : trace.reads) {
    for (const auto& source : read.sources) {
      if (std::find(map.columns.begin(), map.columns.end(), source.label()) == map.columns.end()) {
        map.columns.push_back(source.label());
      }
    }
  }
  std::stable_partition(map.columns.begin(), map.columns.end(), [](const std::string& label) {
    return label != "partial" && label != "zero";
  });
  for (const auto& read : trace.reads) {
    std::vector<double> row(map.columns.size(), NAN);
    for (std::size_t j = 0; j < read.sources.size(); ++j) {
      const auto column =
          std::find(map.columns.begin(), map.columns.end(), read.sources[j].label()) -
          map.columns.begin();
      row[static_cast<std::size_t>(column)] = read.alpha_mean(static_cast<Eigen::Index>(j));
    }
    map.values.push_back(std::move(row));
    map.rows.push_back(read.read == trace.sublayers ? "final"
                                                    : "sublayer " + std::to_string(read.read + 1));
  }
  return map;
}

// ------------------------------------------------------------------ the worker

void TrainingView::Run::post(TrainingView* view, const std::shared_ptr<Run>& self, bool force) {
  {
    std::lock_guard lock(mutex);
    const auto now = Clock::now();
    if (!force && (update_posted || now - last_post < kUpdateInterval)) return;
    update_posted = true;
    last_post = now;
  }
  QMetaObject::invokeMethod(
      view, [view, self] { view->apply_update(self); }, Qt::QueuedConnection);
}

void TrainingView::Run::publish(std::size_t index, const TrainLogRow& row,
                                std::optional<AlphaMap> map) {
  std::lock_guard lock(mutex);
  rows[index].push_back(row);
  if (map) {
    if (alpha_history.size() <= index) alpha_history.resize(index + 1);
    alpha_history[index].push_back(*map);
    alpha[index] = std::move(map);
    ++alpha_version;
  }
}

TextData TrainingView::Run::read_text() const {
  const Settings& setup = settings;
  return setup.builtin
             ? text_data_from_bytes(builtin_sample_text(), "built-in sample",
                                    setup.validation_fraction, setup.options.sequence_length)
             : load_text_data(setup.data_path, setup.validation_fraction,
                              setup.options.sequence_length);
}

// One trainer per scheme, each publishing its step-0 row (and map).
void TrainingView::Run::start_trainers(const TextData& text, const std::vector<int>& window,
                                       std::uint64_t seed, const Progress& check,
                                       std::vector<std::unique_ptr<Trainer>>& trained) {
  const Settings& setup = settings;
  // Every scheme starts from the same weights and sees the same batches (same seed).
  const ModelWeights<double> initial = random_model(setup.config, {.seed = seed});
  for (std::size_t i = 0; i < setup.schemes.size(); ++i) {
    report_progress(check, 0, 0, "training");
    TrainOptions options = setup.options;
    options.seed = seed;
    if (setup.schemes[i].scheme) {
      trained.push_back(std::make_unique<Trainer>(convert_scheme(initial, *setup.schemes[i].scheme),
                                                  text, options));
    } else {
      options.forward.mode = setup.schemes[i].mode;
      if (setup.schemes[i].mode == ResidualMode::block)
        options.forward.block_size = setup.schemes[i].block_size;
      trained.push_back(std::make_unique<Trainer>(initial, text, options));
    }
    std::optional<AlphaMap> map;
    if (setup.schemes[i].mode != ResidualMode::standard) map = alpha_map(*trained.back(), window);
    publish(i, trained.back()->log().back(), std::move(map));
  }
}

// Round-robin, one step of each unfinished trainer in turn (the curves grow together).
void TrainingView::Run::take_steps(const std::vector<std::unique_ptr<Trainer>>& trained,
                                   const std::vector<int>& window, const Progress& check,
                                   const Progress& progress, TrainingView* view,
                                   const std::shared_ptr<Run>& self) {
  const Settings& setup = settings;
  const auto begin = Clock::now();
  const std::int64_t total =
      setup.options.steps * static_cast<std::int64_t>(trained.size()) * setup.seeds;
  std::int64_t tokens = 0;
  for (bool more = true; more;) {
    more = false;
    for (std::size_t i = 0; i < trained.size(); ++i) {
      Trainer& trainer = *trained[i];
      if (trainer.finished()) continue;
      const TrainLogRow& row = trainer.step(check);  // Stop abandons the step in flight
      tokens += static_cast<std::int64_t>(setup.options.batch) * setup.options.sequence_length;
      std::optional<AlphaMap> map;
      if (std::isfinite(row.val_loss) && setup.schemes[i].mode != ResidualMode::standard)
        map = alpha_map(trainer, window);
      publish(i, row, std::move(map));
      const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
      {
        std::lock_guard lock(mutex);
        tokens_per_second = seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
      }
      const std::int64_t done = ++steps;
      report_progress(progress, static_cast<std::size_t>(done), static_cast<std::size_t>(total),
                      "training");
      post(view, self, false);
      more = more || !trainer.finished();
    }
  }
}

void TrainingView::Run::train(TrainingView* view, const std::shared_ptr<Run>& self,
                              const Progress& progress) {
  // Inside a step: only "go on?" (the step's own sublayer counts would make the bar jump).
  const Progress check = [stop = stop, progress](std::size_t, std::size_t) {
    return !stop.cancelled() && (!progress || progress(0, 0));
  };
  std::vector<std::unique_ptr<Trainer>> trained;
  auto finish = [&](State how) {
    {
      std::lock_guard lock(mutex);
      trainers = std::move(trained);
      end = how;
    }
    post(view, self, true);
  };
  try {
    const TextData text = read_text();
    const auto window = validation_windows(text, settings.options.sequence_length, 1).front();
    for (int round_index = 0; round_index < settings.seeds; ++round_index) {
      const std::uint64_t seed = settings.seed + static_cast<std::uint64_t>(round_index);
      if (round_index > 0) {
        std::lock_guard lock(mutex);
        round = round_index;
        for (auto& list : rows) list.clear();
        for (auto& map : alpha) map.reset();
        for (auto& history : alpha_history) history.clear();
        trained.clear();
      }
      start_trainers(text, window, seed, check, trained);
      post(view, self, true);
      take_steps(trained, window, check, progress, view, self);
      std::lock_guard lock(mutex);
      for (std::size_t i = 0; i < trained.size(); ++i) {
        const auto& log = trained[i]->log();
        const auto last = std::find_if(log.rbegin(), log.rend(), [](const TrainLogRow& row) {
          return std::isfinite(row.val_loss);
        });
        if (last != log.rend()) finals[i][seed] = last->val_loss;
      }
    }
    finish(State::finished);
  } catch (const Cancelled&) {
    finish(State::stopped);
    throw;
  } catch (...) {
    finish(State::failed);
    throw;  // the host shows the message in the banner
  }
}

// ------------------------------------------------------------------ the view's side

std::int64_t TrainingView::steps_done() const {
  return run_ ? run_->steps.load() : 0;
}

void TrainingView::start() {
  if (state_ == State::running) return;
  Settings s;
  try {
    s = settings();
  } catch (const Error& error) {
    show_error(error.what());
    return;
  }
  clear_error();
  auto run = std::make_shared<Run>();
  run->id = ++next_run_;
  run->settings = s;
  run->rows.resize(s.schemes.size());
  run->alpha.resize(s.schemes.size());
  run->alpha_history.resize(s.schemes.size());
  alpha_live_ = true;
  run->finals.resize(s.schemes.size());
  run_ = run;
  rows_.assign(s.schemes.size(), {});
  round_ = 0;
  finals_.assign(s.schemes.size(), {});
  saved_.clear();
  state_ = State::running;
  {
    const QSignalBlocker blocker(alpha_scheme_);
    const QString keep = alpha_scheme_->currentText();
    alpha_scheme_->clear();
    for (const auto& scheme : s.schemes) {
      if (scheme.mode != ResidualMode::standard)
        alpha_scheme_->addItem(QString::fromStdString(scheme.name));
    }
    const int index = alpha_scheme_->findText(keep);
    alpha_scheme_->setCurrentIndex(index >= 0 ? index : 0);
  }
  set_running(true);
  redraw();
  redraw_alpha();

  View::run("training", [this, run](const Progress& progress) -> std::function<void()> {
    run->train(this, run, progress);
    return [] {};
  });
}

void TrainingView::stop() {
  if (run_ && state_ == State::running) {
    run_->stop.cancel();
    stop_->setEnabled(false);
    status_->setText("stopping...");
  }
}

// GUI thread: takes what the worker published since the last update and draws it.
void TrainingView::apply_update(const std::shared_ptr<Run>& run) {
  if (run != run_) return;  // an update of an older run
  State end;
  bool alpha_changed = false;
  {
    std::lock_guard lock(run->mutex);
    run->update_posted = false;
    if (run->round != round_) {  // the next seed started: its curves replace the last seed's
      round_ = run->round;
      rows_.assign(run->rows.size(), {});
    }
    finals_ = run->finals;
    for (std::size_t i = 0; i < run->rows.size(); ++i) {
      rows_[i].insert(rows_[i].end(),
                      run->rows[i].begin() + static_cast<std::ptrdiff_t>(rows_[i].size()),
                      run->rows[i].end());
    }
    end = run->end;
    alpha_changed = run->alpha_version != 0;
  }
  if (state_ == State::running && end != State::running) {
    state_ = end;
    set_running(false);
  }
  redraw();
  if (alpha_changed) redraw_alpha();
}

void TrainingView::save_models(const fs::path& directory) {
  try {
    if (!run_ || state_ == State::running)
      throw Error("save models: wait until the run has stopped or finished");
    if (steps_done() == 0) throw Error("save models: no scheme has trained a step yet");
    std::vector<std::pair<fs::path, const Trainer*>> targets;
    OutputDirectoryOptions output;
    output.owner = "model";
    output.flag = "save models";
    const fs::path root = clean_output_path(directory.string(), "save models");
    {
      std::lock_guard lock(run_->mutex);
      for (std::size_t i = 0; i < run_->trainers.size(); ++i) {
        const fs::path target = root / run_->settings.schemes[i].key;
        check_output_directory(target, output);  // refuse before writing any of them
        targets.emplace_back(target, run_->trainers[i].get());
      }
    }
    clear_error();
    // The trainers stay alive with `run` while another run may start.
    run("saving models",
        [this, run = run_, targets, output,
         root](const Progress& progress) -> std::function<void()> {
          OutputDirectoryOptions options = output;
          options.progress = progress;
          for (const auto& [target, trainer] : targets) {
            write_output_directory(target, options, [trainer = trainer](const fs::path& staging) {
              trainer->write_checkpoint(staging);
            });
          }
          const std::string note = "saved " + std::to_string(targets.size()) + " model director" +
                                   (targets.size() == 1 ? "y" : "ies") + " into " + root.string();
          return [this, run, note] {
            if (run != run_) return;
            saved_ = note;
            update_status();
          };
        });
  } catch (const Error& error) {
    show_error(error.what());
  }
}

}  // namespace attnres::gui
