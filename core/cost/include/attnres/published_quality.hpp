// Published quality evidence for Block AttnRes against the number of blocks N, and the band it
// gives for any depth (docs/quality.md). The cost engine is exact; this is the other axis of the
// block-size trade-off, and it is only as good as what has been published: each study states its
// model, depth, data, tokens, how its numbers were obtained and where they are.
//
// Normalisation (docs/quality.md#normalisation): within one study, the fraction of Full
// AttnRes's gain over the standard residual that Block AttnRes with N blocks recovers,
//     f(N) = (loss_standard - loss_block(N)) / (loss_standard - loss_full),
// f = 1 at N = L (Block with one sublayer per block is Full AttnRes). A study with both a
// baseline and a Full run that beats it gives f at its measured N, joined log-linearly in N up to
// (L, 1); the band at N is the lowest and highest f of the studies whose measured range covers N
// (no extrapolation below a study's smallest N). Studies without a Full run or where AttnRes did
// not beat the baseline are listed (counter-evidence) but give no f.
#pragma once

#include <string>
#include <vector>

#include "attnres/chart_spec.hpp"

namespace attnres {

struct PublishedBlockLoss {
  int blocks;   // N, counted over sublayers (the paper's convention; converted where needed)
  double loss;  // nats per token
};

struct PublishedStudy {
  std::string id;         // "kimi_fig6", "lr_attnres", ...
  std::string source;     // who and what: "Kimi Team 2026, Attention Residuals, Fig. 6"
  std::string url;        // where the numbers are (paper, repository file at a commit)
  std::string model;      // parameters and shape: "~0.5B, d = 1024"
  int layers = 0;         // transformer layers
  int sublayers = 0;      // L = 2 x layers
  std::string data;       // dataset and tokenizer
  std::string tokens;     // training tokens per run, as stated (or "not stated")
  std::string loss_kind;  // "validation" | "training"
  std::string obtained;   // "table", "figure (read off)", "perplexity converted (ln)", ...
  int seeds = 1;          // runs per setting behind each number
  double baseline;        // standard residual; NaN when the study has none
  double full;            // Full AttnRes; NaN when the study has none
  std::vector<PublishedBlockLoss> block;
  std::string note;  // what the reader must know (conversions, caveats)
};

// Every study, in the order of docs/quality.md's table (sources there).
const std::vector<PublishedStudy>& published_studies();

// f for one Block loss of `study` (above); NaN without a baseline or a Full run, or when Full
// does not beat the baseline (the normalisation has no meaning then).
double recovered_fraction(const PublishedStudy& study, double block_loss);

// Whether the study gives a curve f(N): a baseline, a Full run below it and a Block point.
bool normalisable(const PublishedStudy& study);

// The study's f at N by its curve (log-linear in N between its measured points and (L, 1)); NaN
// outside [its smallest measured N, L] or when it is not normalisable.
double study_fraction_at(const PublishedStudy& study, double blocks);

struct QualityBandPoint {
  double blocks = 0;                 // N
  double low = 0, high = 0;          // the band: lowest and highest f of the studies that cover N
  std::vector<std::string> studies;  // their ids
  bool covered() const { return !studies.empty(); }
};

struct QualityBand {
  int sublayers = 0;                     // the user's L
  std::vector<QualityBandPoint> points;  // one per requested N (uncovered: low = high = NaN)
  int evidence_min_sublayers = 0, evidence_max_sublayers = 0;  // depths of the normalisable studies
  bool depth_inside = false;                  // L within [evidence_min, evidence_max]
  std::vector<std::string> counter_evidence;  // one line per study where AttnRes did not help
  std::string caption;  // the sources, the normalisation and where the setting lies outside
};

// The deepest model a band is computed for (the published studies reach L = 72; the GUI's and
// `attnres evidence`'s limit too).
inline constexpr int kMaxQualitySublayers = 100000;

// The band at each N of `blocks` for a model with `sublayers` sublayers.
QualityBand quality_band(int sublayers, const std::vector<double>& blocks);

// The band as chart series on the right-hand axis: its low and high edges over the covered N and
// each study's own f at its measured N (a study measured at another depth is drawn at its N);
// x is N, or S = L / N with `x_is_block_size`.
std::vector<ChartSeries> quality_band_series(const QualityBand& band, bool x_is_block_size);

// The right-hand axis title of those series.
inline constexpr const char* kQualityBandAxis = "share of Full's gain (published)";

}  // namespace attnres
