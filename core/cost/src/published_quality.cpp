// Published quality evidence and its band (published_quality.hpp; docs/quality.md). The numbers
// are the studies' own, converted only where the note says (perplexity to nats: ln; blocks over
// transformer layers to blocks over sublayers: the count of blocks is the same, L doubles).
#include "attnres/published_quality.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/format.hpp"
#include "attnres/paper_reference.hpp"

namespace attnres {

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// The paper's Fig. 6 from the one table of paper numbers (paper_reference.hpp).
PublishedStudy kimi_fig6() {
  PublishedStudy s{
      "kimi_fig6",
      "Kimi Team 2026, Attention Residuals (arXiv:2603.15031), Fig. 6 block-size sweep",
      "https://arxiv.org/abs/2603.15031",
      "the paper's ablation model",
      paper::kFig6Sublayers / 2,
      paper::kFig6Sublayers,
      "the paper's pre-training corpus",
      "not stated in the figure",
      "validation",
      "figure (read off); Block S = 4 and Full also in Table 4",
      1,
      paper::kFig6Baseline,
      kNone,
      {},
      "S = 1 is Full AttnRes; N = 32 / S. The paper's Table 2 row 436M has the same baseline, "
      "Block and Full losses (the ablation model's size is not stated beside the figure)"};
  for (const auto& point : paper::kFig6BlockSweep) {
    const int blocks = paper::kFig6Sublayers / point.block_size;
    if (blocks == paper::kFig6Sublayers) {
      s.full = point.loss;
    } else {
      s.block.push_back({blocks, point.loss});
    }
  }
  std::sort(s.block.begin(), s.block.end(),
            [](const auto& a, const auto& b) { return a.blocks < b.blocks; });
  return s;
}

std::vector<PublishedStudy> make_studies() {
  std::vector<PublishedStudy> all{kimi_fig6()};
  all.push_back(
      {"lr_attnres",
       "LR-AttnRes (jon123boss), 0.5B sweep: baseline, Full and Block n = 4 / 8 / 16",
       "https://github.com/jon123boss/LR-AttnRes (README Per-Model Summary, commit 83b899d; HF "
       "cards Jonnester/LR-AttnRes-n4, -n8, -n16)",
       "~0.5B, d = 1024, 16 heads, FFN 2816",
       24,
       48,
       "Ultra-FineWeb (en), cl100k tokenizer",
       "10.0 billion",
       "validation",
       "table",
       1,
       3.0009,
       2.9752,
       {{4, 2.9797}, {8, 2.9778}, {16, 2.9673}},
       "n counts blocks over sublayers (the paper's convention); Block n = 16 is below Full (one "
       "seed each)"});
  all.push_back({"atinching_30m",
                 "AtinChing, AttnResGPT-next-scale, 30M (6 layers, 3 blocks), 3 seeds",
                 "https://github.com/AtinChing/AttnResGPT-next-scale (RESULTS.md, commit 0f04508)",
                 "~30M, d = 384, 6 heads, FFN 1536",
                 6,
                 12,
                 "FineWeb-Edu sample-10BT, GPT-2 tokenizer",
                 "150 million",
                 "validation",
                 "perplexity converted (mean over 3 seeds of ln ppl)",
                 3,
                 4.792,
                 4.608,
                 {{3, 4.638}},
                 "3 blocks of 2 transformer layers = N = 3 over L = 12 sublayers (S = 4)"});
  all.push_back({"delta_220m",
                 "Delta Attention Residuals (arXiv:2605.18855), Table 1, 220M",
                 "https://github.com/wdlctc/delta-attention-residuals-code (WANDB_RUNS.md, commit "
                 "fc11c3e)",
                 "220M, d = 768",
                 12,
                 24,
                 "FineWeb-Edu",
                 "10K steps (tokens not stated)",
                 "validation",
                 "perplexity converted (ln)",
                 1,
                 3.656,
                 3.619,
                 {{4, 3.621}},
                 "their Block: 4 blocks over transformer layers (N = 4 of L = 24, S = 6)"});
  all.push_back({"delta_533m",
                 "Delta Attention Residuals (arXiv:2605.18855), Table 1, 533M",
                 "https://github.com/wdlctc/delta-attention-residuals-code (WANDB_RUNS.md, commit "
                 "fc11c3e)",
                 "533M, d = 1024",
                 24,
                 48,
                 "FineWeb-Edu",
                 "10K steps (tokens not stated)",
                 "validation",
                 "perplexity converted (ln)",
                 1,
                 3.466,
                 3.456,
                 {{4, 3.458}},
                 "N = 4 is the training script's default; the run name does not state it"});
  all.push_back({"delta_1044m",
                 "Delta Attention Residuals (arXiv:2605.18855), Table 1, 1044M",
                 "https://github.com/wdlctc/delta-attention-residuals-code (WANDB_RUNS.md, commit "
                 "fc11c3e)",
                 "1044M, d = 1280",
                 36,
                 72,
                 "FineWeb-Edu",
                 "10K steps (tokens not stated)",
                 "validation",
                 "perplexity converted (ln)",
                 1,
                 3.391,
                 3.507,
                 {{4, 3.458}},
                 "Block and Full both above the baseline (short single-seed runs by the authors "
                 "of a competing method); N = 4 is the script's default"});
  all.push_back({"delta_qwen3_0p6b",
                 "Delta Attention Residuals (arXiv:2605.18855), Table 2, Qwen3-0.6B from scratch",
                 "https://github.com/wdlctc/delta-attention-residuals-code (WANDB_RUNS.md, commit "
                 "fc11c3e)",
                 "~0.6B, d = 1024 (Qwen3-0.6B shape)",
                 28,
                 56,
                 "FineWeb-Edu",
                 "10K steps (tokens not stated)",
                 "validation",
                 "perplexity converted (ln)",
                 1,
                 3.473,
                 kNone,
                 {{28, 3.478}},
                 "one block per transformer layer (N = 28 of L = 56); no Full run"});
  all.push_back({"mhar_1b",
                 "Multi-Head Attention Residuals (MHAR draft), Table main, 100M / 350M / 1B",
                 "https://github.com/Zimmer061310/multi-head-attention-residuals-test-stuff "
                 "(paper/main.tex, commit 0735549)",
                 "1B, d = 1280",
                 36,
                 72,
                 "FineWeb-Edu",
                 "20K steps (about 0.66 billion tokens)",
                 "validation",
                 "table (tail mean of the last 11 evaluations)",
                 1,
                 3.175,
                 3.315,
                 {},
                 "Full AttnRes only (no Block runs); at 100M it helped (3.336 -> 3.297), at 350M "
                 "(3.290 -> 3.345) and 1B it did not; a draft whose numbers changed between "
                 "versions"});
  all.push_back({"qiu023_torchtitan",
                 "QIU023, torchtitan AttnRes RFC, num_blocks ablation at step 20,000",
                 "https://github.com/QIU023/torchtitan_attention_residual (RFC_DRAFT_v3.md, "
                 "commit b8cc921)",
                 "174M (75.5M without embeddings), d = 768, Llama-3 dense",
                 12,
                 24,
                 "C4 (en), Llama-3.1 tokenizer",
                 "655 million",
                 "training",
                 "table",
                 1,
                 3.685,
                 kNone,
                 {{3, 3.655}, {6, 3.619}, {12, 3.623}},
                 "blocks over transformer layers (N = 12 is S = 2, not Full); no Full run; "
                 "smoothed training loss"});
  all.push_back({"kartik_tiny_shakespeare",
                 "KartikVashishta, attention-residuals, Tiny Shakespeare sanity check",
                 "https://github.com/KartikVashishta/attention-residuals (README, commit 3156ea1)",
                 "14.3M, d = 384, character level",
                 6,
                 12,
                 "Tiny Shakespeare (characters)",
                 "not stated (2500 iterations)",
                 "validation",
                 "table (best validation loss)",
                 1,
                 1.5315,
                 kNone,
                 {{3, 1.4948}},
                 "block_size = 4 sublayers (N = 3); no Full run; the baseline overfits after "
                 "step 1000"});
  return all;
}

}  // namespace

const std::vector<PublishedStudy>& published_studies() {
  static const std::vector<PublishedStudy> studies = make_studies();
  return studies;
}

double recovered_fraction(const PublishedStudy& study, double block_loss) {
  if (std::isnan(study.baseline) || std::isnan(study.full) || !(study.full < study.baseline))
    return kNone;
  return (study.baseline - block_loss) / (study.baseline - study.full);
}

bool normalisable(const PublishedStudy& study) {
  return !study.block.empty() && !std::isnan(recovered_fraction(study, study.block.front().loss));
}

double study_fraction_at(const PublishedStudy& study, double blocks) {
  if (!normalisable(study)) return kNone;
  // The curve's knots: each measured N (sorted), then (L, 1).
  std::vector<std::pair<double, double>> knots;
  for (const auto& point : study.block)
    knots.push_back({static_cast<double>(point.blocks), recovered_fraction(study, point.loss)});
  std::sort(knots.begin(), knots.end());
  if (knots.back().first < study.sublayers) knots.push_back({double(study.sublayers), 1.0});
  constexpr double kSame = 1e-9;
  if (blocks < knots.front().first - kSame || blocks > knots.back().first + kSame) return kNone;
  for (std::size_t i = 0; i + 1 < knots.size(); ++i) {
    const auto [n0, f0] = knots[i];
    const auto [n1, f1] = knots[i + 1];
    if (blocks <= n1 + kSame) {
      const double t =
          (std::log(std::max(blocks, n0)) - std::log(n0)) / (std::log(n1) - std::log(n0));
      return f0 + std::clamp(t, 0.0, 1.0) * (f1 - f0);
    }
  }
  return knots.back().second;  // a single knot at N = L
}

QualityBand quality_band(int sublayers, const std::vector<double>& blocks) {
  QualityBand band;
  band.sublayers = sublayers;
  std::vector<const PublishedStudy*> used;
  for (const auto& study : published_studies()) {
    if (normalisable(study)) {
      used.push_back(&study);
      band.evidence_min_sublayers = band.evidence_min_sublayers == 0
                                        ? study.sublayers
                                        : std::min(band.evidence_min_sublayers, study.sublayers);
      band.evidence_max_sublayers = std::max(band.evidence_max_sublayers, study.sublayers);
    }
    const bool full_hurts =
        !std::isnan(study.full) && !std::isnan(study.baseline) && study.full >= study.baseline;
    const bool block_hurts = !study.block.empty() && !std::isnan(study.baseline) &&
                             std::all_of(study.block.begin(), study.block.end(),
                                         [&](const auto& p) { return p.loss >= study.baseline; });
    if (full_hurts || block_hurts) {
      std::string line = study.id + " (" + study.model +
                         ", L = " + std::to_string(study.sublayers) + "): baseline " +
                         format_number(study.baseline);
      if (!std::isnan(study.full)) line += ", Full " + format_number(study.full);
      for (const auto& p : study.block)
        line += ", Block N = " + std::to_string(p.blocks) + " " + format_number(p.loss);
      band.counter_evidence.push_back(line);
    }
  }
  band.depth_inside =
      sublayers >= band.evidence_min_sublayers && sublayers <= band.evidence_max_sublayers;
  for (double n : blocks) {
    QualityBandPoint point;
    point.blocks = n;
    point.low = point.high = kNone;
    // A study covers N = L only at its own depth's end; elsewhere N is compared as N.
    for (const PublishedStudy* study : used) {
      const double f = study_fraction_at(*study, n >= sublayers ? study->sublayers : n);
      if (std::isnan(f)) continue;
      point.low = point.studies.empty() ? f : std::min(point.low, f);
      point.high = point.studies.empty() ? f : std::max(point.high, f);
      point.studies.push_back(study->id);
    }
    band.points.push_back(std::move(point));
  }
  std::string ids;
  for (const PublishedStudy* study : used)
    ids +=
        (ids.empty() ? "" : ", ") + study->id + " (L = " + std::to_string(study->sublayers) + ")";
  band.caption =
      "Published evidence (docs/quality.md): the fraction of Full AttnRes's gain over the "
      "standard residual that Block AttnRes with N blocks recovers, f = (standard - Block) / "
      "(standard - Full), lowest to highest over the studies that measured around that N: " +
      ids + ".";
  std::vector<std::string> outside;
  for (const auto& point : band.points) {
    if (!point.covered()) outside.push_back(format_number(point.blocks));
  }
  if (!band.depth_inside) {
    band.caption +=
        " Outside the evidence: L = " + std::to_string(sublayers) +
        " lies beyond the published depths (L = " + std::to_string(band.evidence_min_sublayers) +
        " to " + std::to_string(band.evidence_max_sublayers) + ").";
  }
  if (!outside.empty()) {
    std::string list;
    for (const auto& n : outside) list += (list.empty() ? "" : ", ") + n;
    band.caption += " No study measured N = " + list + " (no band drawn there).";
  }
  if (!band.counter_evidence.empty()) {
    band.caption += " Counter-evidence (AttnRes did not beat the baseline): ";
    for (std::size_t i = 0; i < band.counter_evidence.size(); ++i)
      band.caption += (i ? "; " : "") + band.counter_evidence[i];
    band.caption += ".";
  }
  return band;
}

std::vector<ChartSeries> quality_band_series(const QualityBand& band, bool x_is_block_size) {
  auto x_of = [&](double blocks) { return x_is_block_size ? band.sublayers / blocks : blocks; };
  ChartSeries low{"published band, lowest f", {}, ChartSeries::Style::line, true};
  ChartSeries high{"published band, highest f", {}, ChartSeries::Style::line, true};
  for (const auto& point : band.points) {
    if (!point.covered()) continue;
    low.points.push_back({x_of(point.blocks), point.low});
    high.points.push_back({x_of(point.blocks), point.high});
  }
  std::vector<ChartSeries> out;
  if (!low.points.empty()) {
    out.push_back(std::move(low));
    out.push_back(std::move(high));
  }
  ChartSeries measured{"published f at each study's N", {}, ChartSeries::Style::scatter, true};
  for (const auto& study : published_studies()) {
    if (!normalisable(study)) continue;
    for (const auto& p : study.block) {
      if (p.blocks > band.sublayers) continue;
      measured.points.push_back({x_of(p.blocks), recovered_fraction(study, p.loss)});
    }
  }
  if (!measured.points.empty()) out.push_back(std::move(measured));
  return out;
}

}  // namespace attnres
