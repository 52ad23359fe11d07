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
#include "model_view.hpp"

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
};

// The forward passes of one run (worker thread): `runs` (picked_models) and the reference schemes
// on `model`, then the sequence side of layer `layer`, head `head` (clamped to the model) under
// the first picked scheme. `seed` draws the parameters the reference schemes add; `block_size`
// is the Block reference row's S (taxonomy_schemes).
DualityResult duality_result(const std::vector<SchemeOnModel>& runs,
                             const ModelWeights<double>& model, const std::vector<int>& tokens,
                             std::uint64_t seed, int layer, int head, int block_size,
                             const Progress& progress);

}  // namespace attnres::gui
