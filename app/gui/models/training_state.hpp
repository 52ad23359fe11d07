// The one state behind the Training view of attnres-lab (docs/architecture.md "The GUI's models";
// docs/training.md): every input the view shows — the data, the tiny model's shape, the run, the
// schemes trained side by side — and what a scenario's [train] table asks that the view cannot
// take. The view's widgets show it and write into it; Start trains the settings built from it
// (training_settings); opening a scenario sets it (training_state) and File > Save scenario writes
// it back (save_training_state). QtCore-free; no widgets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnres/model_config.hpp"
#include "attnres/scenario.hpp"
#include "attnres/trainer.hpp"
#include "view_dump.hpp"

namespace attnres::gui {

// The range one numeric field takes. The view's spin boxes take their ranges from the constants
// below and training_state_problem checks a state against the same ones: one source of truth, so
// a scenario the view cannot show is refused rather than clamped in silence.
template <typename T>
struct TrainingRange {
  T low, high;
  bool holds(T value) const { return value >= low && value <= high; }
};

inline constexpr TrainingRange<double> kTrainValidationFraction{0.01, 0.5};
inline constexpr TrainingRange<int> kTrainLayers{1, 32};
inline constexpr TrainingRange<int> kTrainDModel{4, 512};
inline constexpr TrainingRange<int> kTrainHeads{1, 32};
inline constexpr TrainingRange<int> kTrainFfn{1, 2048};
inline constexpr TrainingRange<int> kTrainSeq{2, 4096};
inline constexpr TrainingRange<int> kTrainBatch{1, 256};
inline constexpr TrainingRange<int> kTrainSteps{1, 10'000'000};
inline constexpr TrainingRange<double> kTrainLr{1e-5, 1.0};
inline constexpr TrainingRange<int> kTrainSeed{0, 1'000'000};
inline constexpr TrainingRange<int> kTrainSeeds{1, 64};
inline constexpr TrainingRange<int> kTrainThreads{0, 256};
// The block size S of Block AttnRes takes 1 .. L = 2 x layers (its high follows the layers).
inline constexpr int kTrainBlockSizeMin = 1;

struct TrainingState {
  // Data: a text file (its bytes are the tokens), or the built-in sample when `builtin` is set
  // and no path is named (the sample lives in memory only).
  std::string data_path;
  bool builtin = false;
  double validation_fraction = 0.1;
  // The model and the run.
  int layers = 2, d_model = 32, heads = 2, ffn = 64, seq = 32, batch = 4, steps = 200;
  double lr = 3e-3;
  std::uint64_t seed = 1;
  int seeds = 1;          // how many consecutive seeds: seed, seed + 1, ... (paired comparisons)
  int threads = 0;        // 0 = every core
  std::string precision;  // "bf16" | "f32" (the default: default_training_precision())
  // The schemes trained side by side: the three boxes, Block AttnRes's S, and one other scheme
  // of the zoo (a named scheme or "NAME:key=value,...", docs/schemes.md).
  bool standard = true, full = true, block = true;
  int block_size = 2;
  bool other = false;
  std::string other_spec = "mhc";
  // What the scenario asks that this view cannot take, one sentence per [train] key, said in the
  // status line and listed in the dump (never dropped in silence).
  std::vector<std::string> not_taken;
};

// One scheme of a run: how the view names, colours and saves it.
struct TrainingScheme {
  std::string key;   // subdirectory of "Save models...": standard, full, block_S2
  std::string name;  // legend: standard, Full AttnRes, Block AttnRes (S = 2)
  ResidualMode mode = ResidualMode::standard;
  int block_size = 0;
  std::size_t colour = 0;
  // Any other scheme: the model is converted to it (docs/schemes.md).
  std::optional<AttnResConfig> scheme;
};

// Everything a run needs, built from the state on the GUI thread and copied to the worker.
struct TrainingSettings {
  std::string data_path;
  bool builtin = false;
  double validation_fraction = 0.1;
  ModelConfig config;
  std::uint64_t seed = 1;
  int seeds = 1;  // seeds seed, seed + 1, ..., one after another (paired comparisons)
  TrainOptions options;
  std::vector<TrainingScheme> schemes;
};

// The view as it opens: 2 layers of d = 32, 200 steps of 4 x 32 bytes, the three schemes (S = 2),
// the precision `attnres train` chooses on this CPU.
TrainingState default_training_state();
// A scenario's [train] table as the view takes it (the defaults for a scenario without one): the
// data file, the shape (ffn resolved), the run, the first seed and how many, Block AttnRes at the
// first N of `blocks`, standard / Full / Block boxes for the specs that are exactly those schemes,
// the first other spec as "another scheme", and the validation fraction `attnres report` holds
// out. Everything else is said in `not_taken`.
TrainingState training_state(const Scenario& scenario);
// The state back into a scenario's [train] table (File > Save scenario), so that the file read
// back gives the same state: the data as an absolute path (the file may be saved anywhere), the
// seeds as a list, Block AttnRes as blocks = [L / S] (or "block:block_size=S" when S does not
// divide L), "training" among the sections. A state that cannot train (training_settings throws)
// or trains the built-in sample is no [train] table the reader accepts: the table is then left
// out. The validation fraction is the view's own (the table has no key for it).
//
// `opened`: the scenario the view's state was opened from, if any. While the state is still what
// training_state made of it, its [train] table is written as it was read — every N, seed and key
// the view cannot show is kept (a study saved from the GUI still trains its whole grid) — with its
// data path made absolute; once the form is edited, the form is what is saved.
void save_training_state(const TrainingState& state, Scenario& scenario,
                         const Scenario* opened = nullptr);

// Why the view cannot show `state` ("" when it can): a value beyond the range of its field (the
// constants above), or a precision other than "bf16" / "f32". Worded as "training: [train] layers
// = 40 is beyond what the GUI's field takes (1 .. 32)", as the other views' range problems.
std::string training_state_problem(const TrainingState& state);

// The run's settings (what Start trains). Throws attnres::Error naming the field: no data, an
// invalid model shape, another scheme that does not parse or fit, no scheme checked.
TrainingSettings training_settings(const TrainingState& state);

// The state as JSON (the dump's "state" of the view): every input with its value, the problem,
// the schemes a run would train (or why none would) and what was not taken.
nlohmann::json training_state_json(const TrainingState& state);

// The view for attnres-lab --dump-state (view_dump.hpp): the form a scenario's [train] table
// fills and what Start would train; the losses need the run itself.
ViewDump training_view_dump(const Scenario& scenario, const Progress& progress = {});

}  // namespace attnres::gui
