// The training section's statistics (train_statistics.hpp, train_report.hpp;
// docs/training.md#statistics, docs/quality.md): the paired comparisons by seed, their verdicts
// and sentences, the paired-differences table and chart, and the measured share of Full AttnRes's
// gain beside the published band.
#include "train_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "attnres/published_quality.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::fixed;
using detail::number_or_null;
using detail::signed_fixed;
using nlohmann::json;

namespace {

PairedComparison compare(const SchemeLosses& a, const SchemeLosses& b,
                         const std::string& comparison) {
  std::vector<double> differences;
  for (const auto& [seed, loss] : a.loss_by_seed) {
    const auto other = b.loss_by_seed.find(seed);
    if (other != b.loss_by_seed.end() && !std::isnan(loss) && !std::isnan(other->second))
      differences.push_back(loss - other->second);
  }
  return {a.scheme, b.scheme, comparison, paired_interval(differences)};
}

}  // namespace

std::vector<PairedComparison> paired_comparisons(const std::vector<SchemeLosses>& schemes) {
  std::vector<PairedComparison> out;
  const auto standard = std::find_if(schemes.begin(), schemes.end(), [](const SchemeLosses& s) {
    return s.mode == ResidualMode::standard;
  });
  if (standard != schemes.end()) {
    for (const auto& s : schemes) {
      if (&s != &*standard) out.push_back(compare(s, *standard, "vs standard"));
    }
  }
  // Along N: Block AttnRes at each N and Full AttnRes (N = L), the paper's definitions only.
  std::vector<const SchemeLosses*> along;
  for (const auto& s : schemes) {
    if (s.paper_defaults && (s.mode == ResidualMode::block || s.mode == ResidualMode::full))
      along.push_back(&s);
  }
  std::stable_sort(along.begin(), along.end(), [](const SchemeLosses* a, const SchemeLosses* b) {
    return a->blocks < b->blocks;
  });
  for (std::size_t i = 1; i < along.size(); ++i) {
    if (along[i]->blocks != along[i - 1]->blocks)
      out.push_back(compare(*along[i], *along[i - 1], "neighbours in N"));
  }
  return out;
}

std::string paired_verdict(const PairedComparison& c) {
  if (c.interval.pairs < 2) return "one seed: no interval";
  if (!c.interval.resolved) return "not resolved";
  return "resolved: " + (c.interval.mean < 0 ? c.scheme : c.against) + " lower";
}

std::string paired_sentence(const PairedComparison& c) {
  const PairedInterval& i = c.interval;
  std::string text = c.scheme + " - " + c.against + ": ";
  if (i.pairs == 0) return text + "no seed in common";
  text += signed_fixed(i.mean, 3) + " nats/token";
  if (i.pairs < 2) return text + " (one seed: no interval; train at least two seeds)";
  text += ", 95 % interval [" + format_signed_bound(i.low, 3) + ", " +
          format_signed_bound(i.high, 3) + "] (paired t, " + std::to_string(i.pairs) +
          " seeds): " + paired_verdict(c);
  if (!i.resolved) {
    text += "; resolving a gap of ";
    text += fixed(std::abs(i.mean), 3);
    text += " at this spread (s = ";
    text += fixed(i.spread, 3);
    text += ") needs ";
    if (i.seeds_to_resolve == 0) {
      text += "a count no measured gap of 0 can give";
    } else if (i.seeds_to_resolve >= 100000) {
      text += "more than 100000 seeds";
    } else {
      text += "about ";
      text += std::to_string(i.seeds_to_resolve);
      text += " seeds";
    }
  }
  return text + ".";
}

namespace detail {

namespace {

// ---- Paired differences by seed: the table, the report's conclusion in words and the JSON
// (docs/training.md#statistics).

// The differences against the standard residual along N, with their intervals and zero.
std::optional<ChartSpec> paired_chart(const std::string& setup_text,
                                      const std::vector<PairedComparison>& comparisons,
                                      const std::vector<SchemeLosses>& schemes) {
  ChartSeries mean{"mean difference (paired by seed)", {}, ChartSeries::Style::line_and_points};
  ChartSeries low{"95 % interval, low", {}, ChartSeries::Style::scatter};
  ChartSeries high{"95 % interval, high", {}, ChartSeries::Style::scatter};
  for (const auto& c : comparisons) {
    if (c.comparison != "vs standard" || c.interval.pairs < 2) continue;
    const auto s = std::find_if(schemes.begin(), schemes.end(),
                                [&](const SchemeLosses& x) { return x.scheme == c.scheme; });
    if (s == schemes.end() || !s->paper_defaults || s->blocks <= 0) continue;
    mean.points.push_back({double(s->blocks), c.interval.mean});
    low.points.push_back({double(s->blocks), c.interval.low});
    high.points.push_back({double(s->blocks), c.interval.high});
  }
  if (mean.points.empty()) return std::nullopt;
  std::sort(mean.points.begin(), mean.points.end());
  ChartSpec chart = detail::xy_chart(
      "train_paired_differences",
      "Measured: Block/Full AttnRes minus the standard residual, paired by seed, with 95 % "
      "intervals",
      "blocks N (Full AttnRes at N = L)", "loss difference (nats/token)");
  chart.log_x = true;
  ChartSeries zero{"no difference", {}, ChartSeries::Style::line};
  zero.points = {{mean.points.front().first, 0.0}, {mean.points.back().first, 0.0}};
  chart.series = {mean, low, high, zero};
  chart.caption =
      "Below zero: lower loss than the standard residual with the same seed; an "
      "interval that stays below zero is resolved at 95 % (Student t, "
      "docs/training.md#statistics). Measured: " +
      setup_text + ".";
  return chart;
}

}  // namespace

json add_paired_section(const std::string& setup_text,
                        const std::vector<PairedComparison>& comparisons,
                        const std::vector<SchemeLosses>& schemes, Report& report) {
  json rows = json::array();
  if (comparisons.empty()) return rows;
  ReportTable table =
      typed_table("train_paired_differences",
                  "Paired differences by seed: what this measurement resolves (95 %)",
                  {{"scheme", "scheme", Shown::text},
                   {"against", "against", Shown::text},
                   {"comparison", "comparison", Shown::text},
                   {"seeds", "seeds", Shown::integer},
                   {"mean_difference", "mean difference (nats/token)", Shown::number},
                   {"spread", "spread s", Shown::number},
                   {"ci_low", "95 % interval low", Shown::number},
                   {"ci_high", "high", Shown::number},
                   {"verdict", "verdict", Shown::text},
                   {"seeds_to_resolve", "seeds to resolve this gap", Shown::integer}});
  table.note =
      "Each row: loss(scheme) - loss(against) with the same seed, over the seeds both ran "
      "(negative: the scheme is lower). Interval: Student t for paired differences; resolved "
      "when it excludes 0; \"seeds to resolve\": about how many seeds would resolve a true gap "
      "of the measured mean at the measured spread (80 % power; a planning figure, the spread "
      "of a few seeds is itself uncertain). One test per row: among many rows, about one in "
      "twenty unresolved gaps may show as resolved (docs/training.md#statistics). Measured: " +
      setup_text + ".";
  std::string resolved, unresolved;
  for (const auto& c : comparisons) {
    const PairedInterval& i = c.interval;
    const bool has_interval = i.pairs >= 2;
    const json seeds_needed =
        has_interval && !i.resolved && i.seeds_to_resolve > 0 ? json(i.seeds_to_resolve) : json();
    add_row(table,
            {c.scheme, c.against, c.comparison, static_cast<std::int64_t>(i.pairs),
             number_or_null(i.mean), number_or_null(i.spread), number_or_null(i.low),
             number_or_null(i.high), paired_verdict(c), seeds_needed},
            {"", "", "", "", signed_fixed(i.mean, 4), fixed(i.spread, 4),
             has_interval ? format_signed_bound(i.low, 4) : "-",
             has_interval ? format_signed_bound(i.high, 4) : "-", "",
             seeds_needed.is_null() ? "-" : std::to_string(i.seeds_to_resolve)});
    rows.push_back({{"scheme", c.scheme},
                    {"against", c.against},
                    {"comparison", c.comparison},
                    {"seeds", i.pairs},
                    {"mean_difference", number_or_null(i.mean)},
                    {"spread", number_or_null(i.spread)},
                    {"ci_low", number_or_null(i.low)},
                    {"ci_high", number_or_null(i.high)},
                    {"confidence", i.confidence},
                    {"resolved", i.resolved},
                    {"verdict", paired_verdict(c)},
                    {"seeds_to_resolve", seeds_needed},
                    {"sentence", paired_sentence(c)}});
    (i.resolved ? resolved : unresolved) += "\n- " + paired_sentence(c);
  }
  table.chart = "train_paired_differences";
  report.tables.push_back(std::move(table));
  if (auto chart = paired_chart(setup_text, comparisons, schemes))
    report.charts.push_back(*chart);
  else
    report.tables.back().chart.clear();
  report.conclusions.push_back(
      "**What the training measurement resolves** (95 %, paired by seed; " + setup_text +
      "; docs/training.md#statistics)\n\nResolved:" +
      (resolved.empty() ? std::string("\n- nothing at this number of seeds") : resolved) +
      "\n\nNot resolved:" + (unresolved.empty() ? std::string("\n- nothing") : unresolved) + "\n");
  return rows;
}

// ---- The measured share of Full AttnRes's gain against the published band (docs/quality.md):
// f(N) = (standard - Block N) / (standard - Full) from the means over seeds, drawn on the band at
// the tiny model's depth, and on the scenario's own quality_band chart when it has one.
void add_measured_fraction(int L, const std::string& setup_text,
                           const std::vector<SchemeLosses>& schemes, Report& report) {
  auto mean_of = [](const SchemeLosses& s) {
    double sum = 0;
    int n = 0;
    for (const auto& [seed, loss] : s.loss_by_seed) {
      if (std::isnan(loss)) continue;
      sum += loss;
      ++n;
    }
    return n ? sum / n : std::nan("");
  };
  double standard = std::nan(""), full = std::nan("");
  for (const auto& s : schemes) {
    if (s.mode == ResidualMode::standard) standard = mean_of(s);
    if (s.mode == ResidualMode::full && s.paper_defaults) full = mean_of(s);
  }
  if (std::isnan(standard) || std::isnan(full) || !(full < standard)) return;
  ChartSeries measured{"measured here (L = " + std::to_string(L) + ", mean over seeds)",
                       {},
                       ChartSeries::Style::line_and_points,
                       false};
  std::vector<double> blocks;
  for (const auto& s : schemes) {
    if (s.mode != ResidualMode::block || !s.paper_defaults) continue;
    measured.points.push_back({double(s.blocks), (standard - mean_of(s)) / (standard - full)});
    blocks.push_back(s.blocks);
  }
  if (measured.points.empty()) return;
  std::sort(measured.points.begin(), measured.points.end());
  measured.points.push_back({double(L), 1.0});
  blocks.push_back(L);
  std::sort(blocks.begin(), blocks.end());
  const QualityBand band = quality_band(L, blocks);
  ReportTable table = typed_table(
      "train_quality_band",
      "Measured share of Full AttnRes's gain beside the published band (L = " + std::to_string(L) +
          ")",
      {{"blocks", "N", Shown::integer},
       {"measured_fraction", "measured f", Shown::decimals3},
       {"band_low", "published lowest f", Shown::decimals3},
       {"band_high", "published highest f", Shown::decimals3},
       {"within_band", "within the band", Shown::yes_no}},
      "train_quality_band");
  table.note =
      "f = (standard - Block N) / (standard - Full) of this tool's mean losses over seeds; the "
      "band: the published studies at the same N (docs/quality.md). Full's measured gain here is " +
      fixed(standard - full, 3) +
      " nats/token; f is only as certain as that gain against the seed spread "
      "(train_paired_differences).";
  for (const auto& [x, f] : measured.points) {
    const double n = x;  // a plain variable: clang 14 cannot capture a structured binding
    if (n >= L) continue;
    const auto point = std::find_if(band.points.begin(), band.points.end(),
                                    [&](const QualityBandPoint& p) { return p.blocks == n; });
    const bool covered = point != band.points.end() && point->covered();
    add_row(table, {static_cast<std::int64_t>(n), f, covered ? json(point->low) : json(),
                    covered ? json(point->high) : json(),
                    covered ? json(f >= point->low && f <= point->high) : json()});
  }
  report.tables.push_back(std::move(table));
  ChartSpec chart = detail::xy_chart(
      "train_quality_band",
      "Measured share of Full AttnRes's gain against the published band (L = " + std::to_string(L) +
          ")",
      "blocks N", "fraction of Full AttnRes's gain over the standard residual");
  chart.log_x = true;
  chart.series = quality_band_series(band, false);
  for (auto& series : chart.series) series.secondary_axis = false;
  chart.series.push_back(measured);
  chart.caption = "Measured by this tool: " + setup_text +
                  ". f = (standard - Block N) / (standard - Full) of the mean losses; f is "
                  "noisy when Full's gain is small against the seed spread "
                  "(train_paired_differences). " +
                  band.caption;
  for (auto& other : report.charts) {
    if (other.id != "quality_band") continue;
    ChartSeries copy = measured;
    copy.name = "measured by this tool, tiny model L = " + std::to_string(L);
    other.series.push_back(std::move(copy));
    other.caption += " The tool's own tiny-model measurement (" + setup_text +
                     ") is drawn too (train_quality_band).";
  }
  report.charts.push_back(std::move(chart));
}

}  // namespace detail

}  // namespace attnres
