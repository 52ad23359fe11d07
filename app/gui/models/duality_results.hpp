// What the Duality view computes (docs/math.md §2, docs/schemes.md), with no widget: the rank
// taxonomy (one forward pass per kind of scheme on the lesson model's weights, the largest
// semiseparable rank of its depth mixing matrix M over the cuts beside the bound the scheme must
// respect) and one run's results (the picked schemes' M, their ranks, one head's sequence
// attention on its layer's real input, the running sum and their ranks, and the caption). The
// widget (duality_view.cpp) only shows them; a test can drive them without a window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "model_state.hpp"

namespace attnres::gui {

// The RMS of the model's pseudo-queries, or 0.5 when it has none (or all zero): the spread at which
// the taxonomy draws the depth parameters a scheme adds.
double depth_parameter_sigma(const ModelWeights<double>& model);

// `model` read with `scheme`: its depth parameters kept where the model has them (same name and
// shape) and drawn where it does not, N(0, sigma²) (DenseFormer weights 1 + N(0, sigma²)), so that
// a scheme the model was not trained with is not at its start (where DenseFormer and mHC are the
// standard residual). `parameters` says which are whose.
ModelWeights<double> with_drawn_parameters(const ModelWeights<double>& model,
                                           const AttnResConfig& scheme, double sigma,
                                           std::uint64_t seed, std::string& parameters);

// One row of the taxonomy table: ranks computed from a forward pass's mixing matrices, beside the
// bound the scheme must respect.
struct TaxonomyRow {
  std::string scheme, parameters, rule, detail;
  int mean_rank = 0;   // max over cuts, token-mean M
  int token_rank = 0;  // max over cuts and tokens
  int bound = 0;       // max over cuts
  bool mean_bounded = true;
  bool holds = true;  // every cut within its bound
};

TaxonomyRow taxonomy_row(std::string scheme, std::string parameters, const ForwardTrace& trace);

// The reference rows: every kind of scheme at this model's size (Block at the model's own S, else
// at `block_size`, the lesson model's S; clamped to 1..L).
std::vector<AttnResConfig> taxonomy_schemes(const ModelConfig& model, int block_size);

// One run of the Duality view: what its widgets show.
struct DualityResult {
  std::vector<ShownScheme> shown;   // the picked schemes (one or two), with their traces
  std::vector<TaxonomyRow> rows;    // the picked schemes', then the reference schemes'
  std::vector<HeatmapSpec> mixing;  // M of each shown scheme
  ChartSpec ranks;                  // the rank at each cut and its bound
  HeatmapSpec sequence, running;    // one head's sequence attention, the running sum
  ChartSpec sequence_ranks;
  std::string caption;
  ForwardTrace standard;      // the standard residual on the same weights (the taxonomy's row)
  Eigen::MatrixXd attention;  // the sequence head's causal attention (T x T)
};

// The 2×2 duality view (docs/teaching.md "The 2×2 duality view"): depth above sequence, a state
// of one on the left (the standard residual's all-ones M | the running sum) and attention on the
// right (the picked scheme's M | one head's causal softmax attention), at one colour scale, each
// with the cut k drawn as a box labelled with its rank and leading singular values.
struct DualityCut {
  int k = 0;                     // the cut (rows k.., columns ..k-1); 0: the matrix has none
  int rank = 0;                  // numerical rank (singular values above 1e-6 of the largest)
  std::vector<double> singular;  // largest first
};
struct DualityQuad {
  HeatmapSpec standard, scheme, running, attention;
  DualityCut standard_cut, scheme_cut, running_cut, attention_cut;
};
// token: -1 the token mean of M, else token t's M_t (and t's row outlined on the sequence side);
// cut: k on the depth side (clamped to 1..L) and on the sequence side (clamped to 1..T-1);
// token_names: the hover's name of each token ("id 42 'a'").
DualityQuad duality_quad(const DualityResult& result, int token, int cut,
                         const std::vector<std::string>& token_names);
// "k = 3: rank 1 (σ 4.24)" / "k = 3: rank 2 (σ 0.61, 0.12)": a box's label.
std::string cut_label(const DualityCut& cut);

// The forward passes of one run (worker thread): `runs` (picked_models) and the reference schemes
// on `model`, then the sequence side of layer `layer`, head `head` (clamped to the model) under
// the first picked scheme. `seed` draws the parameters the reference schemes add; `block_size`
// is the Block reference row's S (taxonomy_schemes).
DualityResult duality_result(const std::vector<SchemeOnModel>& runs,
                             const ModelWeights<double>& model, const std::vector<int>& tokens,
                             std::uint64_t seed, int layer, int head, int block_size,
                             const Progress& progress);

// The Duality view's inputs beside the lesson model's: the schemes, the layer and head whose
// sequence attention is shown, and the cut and token of the 2×2.
struct DualityState {
  SchemePicks picks;
  int layer = 0, head = 0;
  int cut = 3;     // clamped by duality_quad to the matrices' range
  int token = -1;  // -1: the token mean of M
};

// One run of the view from a snapshot of the lesson model (worker thread): duality_result on the
// picked schemes (the reference schemes' parameters drawn from the model's seed + 1000), and each
// token's name for the hover ("id 42 'a'": a trained or loaded model's tokens are bytes). A layer
// or head outside the model is an error naming its field, not a silent clamp.
struct DualityRun {
  DualityResult result;
  std::vector<std::string> token_names;
};
DualityRun duality_run(const ModelSnapshot& snapshot, const DualityState& state,
                       const Progress& progress = {});

}  // namespace attnres::gui
