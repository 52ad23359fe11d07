// The "quality" section of a report: the published evidence for Block AttnRes against N and its
// band at the model's depth (docs/quality.md; published_quality.hpp).
#include <cmath>
#include <optional>

#include "attnres/format.hpp"
#include "attnres/published_quality.hpp"
#include "attnres/report.hpp"
#include "report_parts.hpp"

namespace attnres {

using nlohmann::json;

namespace {

using detail::number_or_null;

std::string fixed3(double v) {
  return detail::fixed(v, 3);
}

// Every study, one row per measured N (a study without Block points: one row, N empty).
ReportTable studies_table() {
  ReportTable table = typed_table(
      "quality_studies", "Published evidence: validation loss against the number of blocks N",
      {{"study", "study", Shown::text},
       {"model", "model", Shown::text},
       {"sublayers", "L", Shown::integer},
       {"data", "data", Shown::text},
       {"tokens", "tokens", Shown::text},
       {"loss_kind", "loss", Shown::text},
       {"seeds", "seeds", Shown::integer},
       {"blocks", "N", Shown::integer},
       {"block_size", "S", Shown::number},
       {"loss_standard", "standard", Shown::number},
       {"loss_full", "Full", Shown::number},
       {"loss_block", "Block at N", Shown::number},
       {"recovered_fraction", "f", Shown::number}});
  table.note =
      "Losses in nats per token as each study reports them (perplexities converted with ln; "
      "quality_sources says how each was obtained and where it is). N counts blocks over "
      "sublayers, L = 2 x layers (studies that count blocks over transformer layers have the "
      "same N). f = (standard - Block) / (standard - Full) within a study, the share of Full "
      "AttnRes's gain that Block recovers; empty without a Full run or where Full did not beat "
      "the standard residual (docs/quality.md).";
  for (const auto& s : published_studies()) {
    auto row = [&](std::optional<PublishedBlockLoss> p) {
      const double f = p ? recovered_fraction(s, p->loss) : std::nan("");
      add_row(table,
              {s.id, s.model, static_cast<std::int64_t>(s.sublayers), s.data, s.tokens, s.loss_kind,
               static_cast<std::int64_t>(s.seeds),
               p ? json(static_cast<std::int64_t>(p->blocks)) : json(),
               p ? json(static_cast<double>(s.sublayers) / p->blocks) : json(),
               number_or_null(s.baseline), number_or_null(s.full), p ? json(p->loss) : json(),
               number_or_null(f)},
              {"", "", "", "", "", "", "", p ? "" : "-",
               p ? format_number(static_cast<double>(s.sublayers) / p->blocks) : "-",
               fixed3(s.baseline), fixed3(s.full), p ? fixed3(p->loss) : "-", fixed3(f)});
    };
    if (s.block.empty()) row(std::nullopt);
    for (const auto& p : s.block) row(p);
  }
  return table;
}

// Where each study's numbers are and what to know about them.
ReportTable sources_table() {
  ReportTable table = typed_table("quality_sources", "Published evidence: the sources",
                                  {{"study", "study", Shown::text},
                                   {"source", "source", Shown::text},
                                   {"obtained", "how obtained", Shown::text},
                                   {"url", "where", Shown::text},
                                   {"note", "note", Shown::text}});
  table.note = "Read from each source's own table, text or figure (docs/quality.md).";
  for (const auto& s : published_studies())
    add_row(table, {s.id, s.source, s.obtained, s.url, s.note});
  return table;
}

}  // namespace

void add_quality_section(int sublayers, int current_blocks, Report& report) {
  // N over the divisors of L (Block AttnRes with equal blocks), Full at N = L.
  std::vector<double> blocks;
  for (int n = 1; n <= sublayers; ++n) {
    if (sublayers % n == 0 || n == current_blocks) blocks.push_back(n);
  }  // L <= kMaxQualitySublayers: a short loop
  const QualityBand band = quality_band(sublayers, blocks);
  ReportTable table = typed_table("quality_band",
                                  "Published quality band at L = " + std::to_string(sublayers) +
                                      ": share of Full AttnRes's gain that Block AttnRes recovers",
                                  {{"blocks", "N", Shown::integer},
                                   {"block_size", "S", Shown::integer},
                                   {"band_low", "lowest f", Shown::number},
                                   {"band_high", "highest f", Shown::number},
                                   {"studies", "studies", Shown::integer},
                                   {"study_ids", "which", Shown::text},
                                   {"inside_evidence", "inside the evidence", Shown::yes_no}},
                                  "quality_band");
  table.note = band.caption;
  json points = json::array();
  for (const auto& p : band.points) {
    std::string ids;
    for (const auto& id : p.studies) ids += (ids.empty() ? "" : ", ") + id;
    const bool inside = p.covered() && band.depth_inside;
    add_row(
        table,
        {static_cast<std::int64_t>(p.blocks),
         static_cast<std::int64_t>(sublayers / static_cast<int>(p.blocks)), number_or_null(p.low),
         number_or_null(p.high), static_cast<std::int64_t>(p.studies.size()), ids, inside},
        {"", "", fixed3(p.low), fixed3(p.high), "", ids.empty() ? "-" : ids,
         inside ? "yes" : "no"});
    points.push_back({{"blocks", p.blocks},
                      {"band_low", number_or_null(p.low)},
                      {"band_high", number_or_null(p.high)},
                      {"studies", p.studies},
                      {"inside_evidence", inside}});
  }
  ChartSpec chart = detail::xy_chart(
      "quality_band", "Published quality band against N (L = " + std::to_string(sublayers) + ")",
      "blocks N", kQualityBandAxis);
  chart.log_x = true;
  chart.series = quality_band_series(band, false);
  for (auto& series : chart.series) series.secondary_axis = false;  // the only axis here
  if (current_blocks > 0) {
    chart.marker_x = current_blocks;
    chart.marker_label = "this model: N = " + std::to_string(current_blocks);
  }
  chart.caption = band.caption;

  // The conclusion at the model's own N.
  std::string words = "**Published evidence for Block AttnRes at L = " + std::to_string(sublayers);
  words += current_blocks > 0 ? ", N = " + std::to_string(current_blocks) : "";
  words += "** (docs/quality.md)\n\n";
  for (const auto& p : band.points) {
    if (static_cast<int>(p.blocks) != current_blocks) continue;
    words += p.covered() ? "At N = " + std::to_string(current_blocks) + " the studies (" +
                               std::to_string(p.studies.size()) + ") put Block AttnRes at " +
                               fixed3(p.low) + " to " + fixed3(p.high) +
                               " of Full AttnRes's gain over the standard residual"
                         : "No study measured N = " + std::to_string(current_blocks);
    words += band.depth_inside ? "."
                               : "; L lies outside the published depths, so this is "
                                 "extrapolated in depth.";
  }
  if (!band.counter_evidence.empty()) {
    words += " Counter-evidence: " + std::to_string(band.counter_evidence.size()) +
             " runs near 0.6B to 1B parameters where AttnRes did not beat the standard residual "
             "(quality_studies).";
  }
  report.conclusions.push_back(words + "\n");
  report.tables.push_back(studies_table());
  report.tables.push_back(sources_table());
  report.tables.push_back(std::move(table));
  report.charts.push_back(std::move(chart));
  report.json["quality"] = {
      {"sublayers", sublayers},
      {"blocks", current_blocks > 0 ? json(current_blocks) : json()},
      {"depth_inside_evidence", band.depth_inside},
      {"evidence_sublayers", {band.evidence_min_sublayers, band.evidence_max_sublayers}},
      {"band", points},
      {"counter_evidence", band.counter_evidence},
      {"caption", band.caption}};
}

}  // namespace attnres
