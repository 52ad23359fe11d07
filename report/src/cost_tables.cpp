// The cost sections of a report, one builder per table: residual I/O (paper Table 1), stored
// history, prefill memory (docs/math.md §3.2), pipeline communication and the exact payload of
// every stage boundary (docs/math.md §3.3), depth-attention FLOPs; and the scaling-law tables and
// charts (docs/math.md §3.5). `attnres cost` prints the same tables.
#include <cmath>

#include "attnres/report.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::gb;
using detail::gib;
using detail::num;
using detail::wants;

namespace {

ReportTable io_table(const CostReport& r) {
  const double d = static_cast<double>(r.inputs.d_model);
  const double b = bytes_per_element(r.inputs.dtype);
  ReportTable t =
      typed_table("io", "Residual-mechanism memory I/O per sublayer (paper Table 1)",
                  {{"scheme", "scheme", Shown::text},
                   {"reads_elements_per_token", "reads (elements/token)", Shown::number},
                   {"writes_elements_per_token", "writes (elements/token)", Shown::number},
                   {"total_elements_per_token", "total (elements/token)", Shown::number},
                   {"total_multiples_of_d", "total (x d)", Shown::number},
                   {"total_bytes_per_token", "total (bytes/token)", Shown::number},
                   {"formula", "formula", Shown::text}});
  auto row = [&](const std::string& name, const ResidualIo& io, const std::string& formula) {
    add_row(t, {name, io.reads, io.writes, io.total(), io.total() / d, io.total() * b, formula});
  };
  row("standard", r.io.standard, "2d + d");
  row("Block AttnRes, two-phase", r.io.block_two_phase, "(N/S + 3)d + 2d");
  row("Full AttnRes, two-phase", r.io.full_two_phase, "(S + N - 2)d + 2d");
  row("Full AttnRes, naive (mean over l)", r.io.full_naive, "2(l-1)d + d, mean = L·d");
  row("mHC, m = " + std::to_string(r.inputs.streams), r.io.mhc, "(8m + 2)d + 2m^2 + 4m");
  row("Full AttnRes, two-phase at best S = " + std::to_string(r.full_best_schedule.block_size),
      io_full_two_phase(r.full_best_schedule.blocks, r.full_best_schedule.block_size,
                        r.inputs.d_model),
      "min over S of (S + ceil(L/S))d");
  t.note = "Per token and per sublayer; the I/O inside f_l (attention, MLP) is excluded. L = " +
           num(r.inputs.sublayers) + ", N = " + num(r.inputs.blocks) +
           ", S = " + num(r.inputs.block_size) + ", d = " + num(r.inputs.d_model) +
           ", b = " + num(static_cast<std::int64_t>(b)) + " bytes (" + to_string(r.inputs.dtype) +
           ").";
  return t;
}

ReportTable history_table(const CostReport& r) {
  const double per_vector =
      static_cast<double>(r.inputs.d_model) * bytes_per_element(r.inputs.dtype);
  const double sequence =
      static_cast<double>(r.inputs.tokens) * static_cast<double>(r.inputs.batch);
  ReportTable t =
      typed_table("history", "Stored depth history",
                  {{"scheme", "scheme", Shown::text},
                   {"vectors_per_token", "vectors per token", Shown::integer},
                   {"bytes_per_token", "bytes per token", Shown::number},
                   {"per_batch_bytes", "per batch of sequences (GB)", Shown::gigabytes},
                   {"per_batch_bytes", "per batch of sequences (GiB)", Shown::gibibytes}});
  auto row = [&](const std::string& name, std::int64_t vectors) {
    const double bytes = static_cast<double>(vectors) * per_vector;
    add_row(t, {name, vectors, bytes, bytes * sequence, bytes * sequence});
  };
  row("standard (running sum)", 1);
  row("Block AttnRes (N + 1)", r.history_block_vectors);
  row("Full AttnRes (L + 1)", r.history_full_vectors);
  t.note =
      "Block also keeps one running partial sum. Batch of sequences: B = " + num(r.inputs.batch) +
      " x T = " + num(r.inputs.tokens) +
      " tokens; GB = 1e9 bytes, "
      "GiB = 2^30 bytes.";
  return t;
}

ReportTable prefill_table(const CostReport& r) {
  ReportTable t =
      typed_table("prefill", "Long-context prefill memory of the block history (docs/math.md §3.2)",
                  {{"quantity", "quantity", Shown::text},
                   {"bytes", "bytes", Shown::integer},
                   {"bytes", "GB", Shown::gigabytes},
                   {"bytes", "GiB", Shown::gibibytes}});
  auto row = [&](const std::string& name, std::int64_t bytes) {
    add_row(t, {name, bytes, bytes, bytes});
  };
  row("total, B·b·N·T·d", r.prefill.total_bytes);
  row("per device (" + num(r.inputs.seq_shards) + " sequence shards)", r.prefill.per_device_bytes);
  row(r.inputs.chunk > 0 ? "per device, chunked prefill (" + num(r.inputs.chunk) + "-token chunks)"
                         : "per device, chunked prefill (no chunking)",
      r.prefill.per_device_chunked_bytes);
  t.note = "N = " + num(r.inputs.blocks) + " block summaries, T = " + num(r.inputs.tokens) +
           ", d = " + num(r.inputs.d_model) + ", B = " + num(r.inputs.batch) + ", " +
           to_string(r.inputs.dtype) +
           ". Weights, KV cache and other activations are not included.";
  return t;
}

ReportTable pipeline_table(const CostReport& r) {
  const double d = static_cast<double>(r.inputs.d_model);
  const double unit = r.pipeline_paper.blocks_per_chunk * d;
  const double bytes = static_cast<double>(r.inputs.tokens) * static_cast<double>(r.inputs.batch) *
                       bytes_per_element(r.inputs.dtype);
  ReportTable t =
      typed_table("pipeline", "Pipeline communication of block representations (docs/math.md §3.3)",
                  {{"accounting", "accounting", Shown::text},
                   {"elements_per_token", "elements/token", Shown::number},
                   {"multiples_of_np_d", "x N_p·d", Shown::number},
                   {"bytes_per_microbatch", "bytes per micro-batch (B·T)", Shown::number},
                   {"bytes_per_microbatch", "GB per micro-batch", Shown::gigabytes}});
  auto row = [&](const std::string& name, double elements) {
    add_row(t, {name, elements, elements / unit, elements * bytes, elements * bytes});
  };
  row("paper, naive: C(C-1)/2 · N_p · d", r.pipeline_paper.naive_elements);
  row("paper, cached: [P(P-1)/2 + (V-1)P^2] · N_p · d", r.pipeline_paper.cached_elements);
  row("paper, peak transition, naive", r.pipeline_paper.peak_naive_elements);
  row("paper, peak transition, cached", r.pipeline_paper.peak_cached_elements);
  row("exact, naive (sum over boundaries)", static_cast<double>(r.boundary_naive_elements));
  row("exact, cached (received summaries kept)", static_cast<double>(r.boundary_cached_elements));
  row("exact, cached + own summaries kept", static_cast<double>(r.boundary_cached_own_elements));
  row("exact, peak boundary, naive", static_cast<double>(r.boundary_peak_naive_elements));
  row("exact, peak boundary, cached", static_cast<double>(r.boundary_peak_cached_elements));
  t.note =
      "P = " + num(r.inputs.pp) + " ranks, V = " + num(r.inputs.vpp) +
      " virtual stages, C = " + num(r.inputs.pp * r.inputs.vpp) +
      " chunks, N_p = N/C = " + num(r.pipeline_paper.blocks_per_chunk) +
      ". Forward, one direction, summed over all stage boundaries; backward sends the same. The "
      "exact sums count the embedding and open partial sums, which the paper's N_p accounting "
      "leaves out; chunks split the L sublayers evenly (earlier chunks take the remainder).";
  return t;
}

ReportTable boundaries_table(const CostReport& r) {
  ReportTable t =
      typed_table("boundaries", "Exact payload at every stage boundary (forward; block layout)",
                  {{"from_chunk", "from chunk", Shown::integer},
                   {"to_chunk", "to chunk", Shown::integer},
                   {"from_rank", "from rank", Shown::integer},
                   {"to_rank", "to rank", Shown::integer},
                   {"sublayers_done", "sublayers done", Shown::integer},
                   {"completed_blocks", "completed blocks", Shown::integer},
                   {"open_partial", "open partial", Shown::yes_no},
                   {"naive_vectors", "naive (vectors)", Shown::integer},
                   {"cached_vectors", "cached (vectors)", Shown::integer},
                   {"cached_own_vectors", "cached + own (vectors)", Shown::integer},
                   {"naive_elements_per_token", "naive (elements/token)", Shown::integer}});
  for (const auto& b : r.boundaries) {
    add_row(t, {b.from_chunk, b.to_chunk, b.from_rank, b.to_rank, b.last_sublayer,
                b.completed_blocks, b.partial, b.naive_vectors, b.cached_vectors,
                b.cached_own_vectors, b.naive_vectors * r.inputs.d_model});
  }
  t.note =
      "Vectors are d-wide, per token: the embedding b_0, completed blocks, and the open block's "
      "partial sum. 'cached' keeps what a rank received in earlier virtual stages (the paper's "
      "policy); 'cached + own' also keeps the blocks the rank produced itself.";
  return t;
}

ReportTable flops_table(const CostReport& r) {
  ReportTable t = typed_table("flops", "Depth-attention arithmetic next to the model's own",
                              {{"quantity", "quantity", Shown::text},
                               {"flop_per_token", "FLOP/token", Shown::number},
                               {"model_fraction", "fraction of model", Shown::number}});
  add_row(t, {"model sublayers (forward)", r.model_flops, 1.0});
  add_row(t, {"depth attention, Block AttnRes", r.depth_flops_block,
              r.depth_flops_block / r.model_flops});
  add_row(
      t, {"depth attention, Full AttnRes", r.depth_flops_full, r.depth_flops_full / r.model_flops});
  t.note =
      "Depth attention: 6d per (read, source) pair + 2d per read; model: 8d^2 + 2Td per attention "
      "sublayer (H_kv = H, causal mean context T/2), 6dF per SwiGLU sublayer (F = " +
      num(r.inputs.ffn) + "); LM head excluded.";
  return t;
}

}  // namespace

std::vector<ReportTable> cost_tables(const CostReport& costs,
                                     const std::vector<std::string>& sections) {
  std::vector<ReportTable> tables;
  if (wants(sections, "io")) tables.push_back(io_table(costs));
  if (wants(sections, "history")) tables.push_back(history_table(costs));
  if (wants(sections, "prefill")) tables.push_back(prefill_table(costs));
  if (wants(sections, "pipeline")) tables.push_back(pipeline_table(costs));
  if (wants(sections, "boundaries")) tables.push_back(boundaries_table(costs));
  if (wants(sections, "flops")) tables.push_back(flops_table(costs));
  return tables;
}

void add_scaling_section(const ScenarioScaling& scaling, Report& report) {
  const auto at = scaling_at_loss(scaling.target_loss);
  // The key does not change with the target loss; the displayed header says it.
  ReportTable fits = typed_table(
      "scaling_fits", "Scaling-law fits (paper Fig. 4): loss = A · C^(-a), C in PFLOP/s-days",
      {{"scheme", "scheme", Shown::text},
       {"coefficient", "A", Shown::number},
       {"exponent", "a", Shown::number},
       {"compute_to_target_pflop_s_days",
        "compute to reach loss " + num(scaling.target_loss) + " (PFLOP/s-days)", Shown::number},
       {"compute_multiplier", "compute multiplier vs baseline", Shown::number}},
      "scaling_loss");
  const double computes[3] = {at.compute_baseline, at.compute_block, at.compute_full};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& fit = paper_scaling_fits()[i];
    add_row(fits, {fit.name, fit.A, fit.a, computes[i], at.compute_baseline / computes[i]});
  }
  fits.note =
      "Multiplier = baseline compute / scheme compute at the same loss: how much more compute "
      "the baseline needs to match the scheme.";
  report.tables.push_back(fits);

  ChartSpec loss_chart = detail::xy_chart("scaling_loss", "Loss against compute (paper fits)",
                                          "compute (PFLOP/s-days)", "validation loss");
  loss_chart.log_x = true;
  for (const auto& fit : paper_scaling_fits()) {
    ChartSeries series{fit.name, {}, ChartSeries::Style::line, false};
    for (int i = 0; i <= 60; ++i) {
      const double compute = std::pow(10.0, -1.0 + 3.0 * i / 60.0);
      series.points.emplace_back(compute, fit.loss_at(compute));
    }
    loss_chart.series.push_back(std::move(series));
  }
  loss_chart.caption = "The three fits over 0.1 to 100 PFLOP/s-days.";
  report.charts.push_back(loss_chart);

  ReportTable multipliers =
      typed_table("scaling_multiplier", "Compute multiplier against target loss",
                  {{"target_loss", "target loss", Shown::number},
                   {"block_multiplier", "Block multiplier", Shown::number},
                   {"full_multiplier", "Full multiplier", Shown::number}},
                  "scaling_multiplier");
  ChartSpec multiplier_chart =
      detail::xy_chart("scaling_multiplier", "Compute multiplier over the baseline",
                       "target validation loss", "baseline compute / scheme compute");
  multiplier_chart.marker_x = scaling.target_loss;
  multiplier_chart.marker_label = "target " + num(scaling.target_loss);
  ChartSeries block{"Block AttnRes", {}, ChartSeries::Style::line, false};
  ChartSeries full{"Full AttnRes", {}, ChartSeries::Style::line, false};
  for (int i = 0; i <= 30; ++i) {
    const double loss = scaling.loss_from + (scaling.loss_to - scaling.loss_from) * i / 30.0;
    const auto point = scaling_at_loss(loss);
    block.points.emplace_back(loss, point.multiplier_block);
    full.points.emplace_back(loss, point.multiplier_full);
    if (i % 5 == 0) {
      add_row(multipliers,
              {std::round(loss * 1e4) / 1e4, point.multiplier_block, point.multiplier_full});
    }
  }
  multiplier_chart.series = {block, full};
  multiplier_chart.caption = "Block AttnRes is worth about 1.25x compute near loss 1.69-1.70.";
  report.tables.push_back(multipliers);
  report.charts.push_back(multiplier_chart);
  report.json["scaling"] = {
      {"target_loss", at.target_loss},
      {"compute_pflop_s_days",
       {{"baseline", at.compute_baseline}, {"block", at.compute_block}, {"full", at.compute_full}}},
      {"compute_multiplier", {{"block", at.multiplier_block}, {"full", at.multiplier_full}}}};
}

}  // namespace attnres
