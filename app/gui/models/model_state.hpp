// The model the Depth attention, Magnitudes and Duality views compute on, with no widget
// (docs/architecture.md "The GUI's models"): a snapshot of the lesson model (a shipped trained
// model, an opened directory or a random model with its settings), the schemes a view picks
// (docs/schemes.md "Comparing schemes") resolved against its weights, and one forward pass of a
// view on the views' one engine. The lesson model's panel (lesson_model.hpp) fills a snapshot;
// the views' results (model_results.hpp, duality_results.hpp) are computed from one.
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/model_config.hpp"

namespace attnres::gui {

// The text the views feed a trained model (its bytes are the token ids: the models are byte-level).
inline constexpr const char* kTrainedText = "Attention residuals read the depth history.";
inline constexpr const char* kRandomTokens = "1 7 42 7 99 3";

// A model directory the lesson model has open: read once, when it is chosen (load_model_as: its
// config.json parsed, its weights read in any layout of docs/interop.md); every snapshot of it
// shares these weights.
struct OpenedModel {
  std::string directory;
  std::shared_ptr<const ModelWeights<double>> weights;  // null when the directory did not load
  std::exception_ptr error;                             // why not (the views' banners show it)
  CheckpointReport checkpoint;                          // what was read: layout, files, dtypes
};

// Reads a model directory (load_model_as<double> with `progress`); touches no widget, so any
// thread may call it. A load error is kept in the result; attnres::Cancelled (the progress
// callback said stop) is thrown.
std::shared_ptr<const OpenedModel> read_model_directory(const std::string& dir,
                                                        const Progress& progress = {});

// Weights built from a snapshot, kept for the next snapshot with the same key.
struct ModelCache {
  std::mutex mutex;
  std::string key;
  std::shared_ptr<const ModelWeights<double>> weights;
};

// The RMS of a model's pseudo-queries (0 when it has none).
double pseudo_query_rms(const ModelWeights<double>& model);

// The lesson model as a worker thread needs it, copied out of its panel on the GUI thread.
struct ModelSnapshot {
  std::shared_ptr<const OpenedModel> opened;  // null = the random model
  std::string origin;                         // "" (random), "trained" or "loaded"
  ModelConfig config;
  RandomModelOptions random;
  int block_size = 2;
  std::string tokens;
  std::shared_ptr<ModelCache> cache;
  // The weights: the opened model's, or the random model's (cached: the same settings build
  // once). Throws attnres::Error (a directory that did not load: its load error).
  std::shared_ptr<const ModelWeights<double>> build() const;
  // The tokens as ids of `model`; throws attnres::Error naming the "tokens" field.
  std::vector<int> token_ids(const ModelConfig& model) const;
};

// The scheme pickers of the model views (docs/schemes.md "Comparing schemes"): the cost
// explorer's named schemes (named_scheme_picker, one list for the whole lab) after these two
// entries; a typed spec such as "full:heads=4,gate=sigmoid" is read as parse_scheme_spec reads it.
inline constexpr const char* kOwnScheme = "@own";  // the chosen model's own scheme
inline constexpr const char* kNoScheme = "@none";  // "compare with": nothing

// What a view's two scheme pickers hold: specs, kOwnScheme or kNoScheme.
struct SchemePicks {
  std::string scheme = kOwnScheme, compare = kNoScheme;
  bool comparing() const { return compare != kNoScheme; }
};

// A picked scheme resolved against the model: its settings, its label and the weights read with it
// (convert_scheme; the model itself for its own scheme). Errors name the picker and the text.
struct SchemeOnModel {
  AttnResConfig scheme;
  std::string label;  // scheme_label: the scheme and whose weights
  std::string name;   // for chart legends: describe(), "trained ..." for the model's own
  ModelWeights<double> model;
};

// One forward pass of a model view, on the views' one fast engine (its thread pool is kept across
// runs and models).
ForwardTrace scheme_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                          Progress progress, bool mixing);

// A scheme a view shows: its label and trace.
struct ShownScheme {
  std::string label;
  ForwardTrace trace;
};

// Whether the lesson model's S changes what `picks` read on a model of `config`: a picked spec
// that takes Block's S from the view (the named Block schemes) does; the model's own scheme, Full,
// the standard residual or a spec naming its own block_size do not (a spec that does not parse:
// no — its error is shown when the view runs).
bool picks_use_block_size(const SchemePicks& picks, const ModelConfig& config);

// The schemes of a run, resolved and converted before any forward pass (a bad spec fails fast,
// naming its picker: "scheme '...'" or "compare with '...'").
std::vector<SchemeOnModel> picked_models(const SchemePicks& picks,
                                         const ModelWeights<double>& model,
                                         const ModelSnapshot& snapshot);

// Step `index` of `count` equal steps of one run (e.g. the second of three forward passes).
Progress step(const Progress& progress, std::size_t index, std::size_t count);
// Only asks whether the run goes on (for nested work whose own counts would confuse the bar).
Progress check_only(const Progress& progress);

}  // namespace attnres::gui
