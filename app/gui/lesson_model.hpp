// The lesson model: the one model that the Depth attention, Magnitudes and Duality views show
// (a shipped trained model, a loaded directory, or a random model with its settings), edited in
// one panel that moves to whichever of those views is on screen. It owns the opened model: a
// model directory is read once when it is chosen (config.json parsed, model.safetensors read),
// every field is filled from that config, and the views' snapshots share those weights; the
// combo box only shows the entries' names. "back to random" restores the random model's own
// settings. Shapes above about 1 GB of weights ask for confirmation first. The random model's
// weights are cached, so a knob that does not change them (tokens, S) costs only the forward
// passes.
#pragma once

#include <QString>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/model.hpp"
#include "attnres/model_config.hpp"
#include "model_state.hpp"

QT_BEGIN_NAMESPACE
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QWidget;
QT_END_NAMESPACE

namespace attnres::gui {

// One line about a trained model from its train_log.csv (read with the trainer's reader,
// read_train_log; the first and the last row with a validation loss): "trained 600 steps on DATA,
// validation loss 5.55 -> 1.52 nats/token" (" on DATA" only when `data` is given). Empty when the
// file is missing, is not a log the trainer wrote, or has no validation loss.
std::string training_log_summary(const std::filesystem::path& train_log_csv,
                                 const std::string& data = {});

class Player;

class LessonModel {
 public:
  enum class Kind { trained, random, loaded };
  // Everything a worker thread needs, copied out of the widgets on the GUI thread
  // (model_state.hpp).
  using Snapshot = ModelSnapshot;

  LessonModel();
  ~LessonModel();
  LessonModel(const LessonModel&) = delete;
  LessonModel& operator=(const LessonModel&) = delete;

  // The panel (a group box). It has no parent until show_in places it.
  QWidget* panel() const;
  // Puts the panel at the top of `slot` (a model view's input column; it has a QVBoxLayout).
  void show_in(QWidget* slot);
  QWidget* slot() const { return slot_; }

  Snapshot snapshot() const;
  Kind kind() const { return kind_; }
  // The scheme the chosen model comes with: its config.json's, or Full AttnRes for the random
  // model.
  AttnResConfig own_scheme() const;
  // File > Open model directory, in two steps so that a bad directory changes nothing: reads DIR
  // (throws its load error), then shows it as the one "loaded: DIR" entry, replaced by the next
  // directory opened.
  std::shared_ptr<const OpenedModel> open_directory(const std::string& dir);
  void use_directory(std::shared_ptr<const OpenedModel> model);
  // The read of open_directory as work for another thread: counts the read now (GUI thread) and
  // returns what reads DIR (read_model_directory; it touches nothing of the lesson model).
  std::function<std::shared_ptr<const OpenedModel>(const Progress&)> directory_reader(
      const std::string& dir);
  // Choosing the "loaded: DIR" entry again reads DIR again. When this is set (the main window
  // reads it off the GUI thread with a progress bar), the choice stays where it was and this is
  // called instead; use_directory shows the model once it is read.
  std::function<void(const std::string& dir)> read_elsewhere;
  void back_to_random();
  // The model directory open now (null on the random model), and how many times a directory has
  // been read since this lesson model was made (one per open; the views never read the files).
  const OpenedModel* opened() const { return opened_.get(); }
  int directory_reads() const { return directory_reads_; }

  // Called after every change of the model or of its inputs (coalesced per event-loop pass).
  void subscribe(std::function<void()> on_change);
  // The inputs whose errors belong to a key of a message ("tokens", "layers", ...).
  QWidget* field(const std::string& key) const;
  // Asked before a random model of more than ~1 GB of weights is built: true goes on. The
  // default asks with a dialog; tests replace it.
  std::function<bool(const QString& question)> confirm;
  // About how many bytes the random model's weights take (f64), from its shape.
  static double weight_bytes(const ModelConfig& config);

  QComboBox* choice;
  QLabel* about;
  QLabel* size;
  QPushButton* random_button;
  QSpinBox *layers, *d_model, *heads, *kv_heads, *ffn, *vocab, *seed, *block_size;
  // The play buttons of query std and S (view_kit.hpp Player).
  Player* query_player() const { return query_player_; }
  Player* block_player() const { return block_player_; }
  // Whether the view showing the panel reads the lesson's S (model_state.hpp
  // picks_use_block_size): S's ▶ is greyed where playing it would change nothing.
  void set_block_size_used(bool used);
  QDoubleSpinBox* query_std;
  QLineEdit* tokens;

 private:
  struct SpinValues {
    std::vector<int> ints;
    double query_std = 0.5;
  };
  // An entry of the model choice, in the combo box's order (the combo box shows the labels).
  struct Entry {
    std::string label;
    Kind kind = Kind::random;
    std::string directory;  // "" for the random model
  };
  std::vector<QSpinBox*> shape_spins() const;
  ModelConfig shape_config(const std::vector<int>* ints = nullptr) const;
  SpinValues spin_values() const;
  void add_entry(const std::string& label, Kind entry_kind, const std::string& dir);
  int random_index() const;
  std::shared_ptr<const OpenedModel> read_directory(const std::string& dir);
  // `opened`: the entry's directory already read (File > Open model directory), else read here.
  void apply_choice(std::shared_ptr<const OpenedModel> opened = nullptr);
  void show_random_model();
  void show_directory_model();
  void set_shape_enabled(bool enabled);
  void shape_changed();
  void update_block_range();
  void notify();

  QGroupBox* group_;
  QWidget* slot_ = nullptr;
  std::vector<Entry> entries_;
  int shown_ = -1;  // the entry applied last (the combo box's index)
  Kind kind_ = Kind::random;
  std::shared_ptr<const OpenedModel> opened_;  // the chosen directory, read once
  int directory_reads_ = 0;
  std::optional<ModelConfig> config_;  // the chosen directory's config.json
  bool tokens_edited_ = false;         // the user typed tokens: keep them across model choices
  SpinValues random_;                  // the random model's settings while another model is chosen
  SpinValues accepted_;                // the last shape that passed the size check
  std::vector<std::function<void()>> listeners_;
  std::shared_ptr<ModelCache> cache_;
  Player* query_player_ = nullptr;
  Player* block_player_ = nullptr;
  bool block_size_used_ = true;
};

}  // namespace attnres::gui
