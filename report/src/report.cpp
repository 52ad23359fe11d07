#include "attnres/report.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/strategy_report.hpp"
#include "attnres/version.hpp"

namespace attnres {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string num(double value) {
  return format_number(value);
}
std::string num(std::int64_t value) {
  return std::to_string(value);
}
std::string gb(double bytes) {
  return format_number(std::round(bytes / 1e9 * 1e4) / 1e4);
}
std::string gib(double bytes) {
  return format_number(std::round(bytes / 1073741824.0 * 1e4) / 1e4);
}

// A table's rows as JSON objects keyed by the header (the v2 sections' report.json entries).
json table_rows_json(const ReportTable& t) {
  json rows = json::array();
  for (const auto& row : t.rows) {
    json entry = json::object();
    for (std::size_t i = 0; i < row.size() && i < t.header.size(); ++i) entry[t.header[i]] = row[i];
    rows.push_back(std::move(entry));
  }
  return rows;
}

bool wants(const std::vector<std::string>& sections, const std::string& section) {
  return std::find(sections.begin(), sections.end(), section) != sections.end();
}

ReportTable io_table(const CostReport& r) {
  const double d = static_cast<double>(r.inputs.d_model);
  const double b = bytes_per_element(r.inputs.dtype);
  ReportTable t{"io",
                "Residual-mechanism memory I/O per sublayer (paper Table 1)",
                {"scheme", "reads (elements/token)", "writes (elements/token)",
                 "total (elements/token)", "total (x d)", "total (bytes/token)", "formula"},
                {},
                "",
                ""};
  auto row = [&](const std::string& name, const ResidualIo& io, const std::string& formula) {
    t.rows.push_back({name, num(io.reads), num(io.writes), num(io.total()), num(io.total() / d),
                      num(io.total() * b), formula});
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
  ReportTable t{"history",
                "Stored depth history",
                {"scheme", "vectors per token", "bytes per token", "per batch of sequences (GB)",
                 "per batch of sequences (GiB)"},
                {},
                "",
                ""};
  auto row = [&](const std::string& name, std::int64_t vectors) {
    const double bytes = static_cast<double>(vectors) * per_vector;
    t.rows.push_back({name, num(vectors), num(bytes), gb(bytes * sequence), gib(bytes * sequence)});
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
  ReportTable t{"prefill",
                "Long-context prefill memory of the block history (docs/math.md §3.2)",
                {"quantity", "bytes", "GB", "GiB"},
                {},
                "",
                ""};
  auto row = [&](const std::string& name, std::int64_t bytes) {
    t.rows.push_back(
        {name, num(bytes), gb(static_cast<double>(bytes)), gib(static_cast<double>(bytes))});
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
  ReportTable t{"pipeline",
                "Pipeline communication of block representations (docs/math.md §3.3)",
                {"accounting", "elements/token", "x N_p·d", "bytes per micro-batch (B·T)",
                 "GB per micro-batch"},
                {},
                "",
                ""};
  auto row = [&](const std::string& name, double elements) {
    t.rows.push_back(
        {name, num(elements), num(elements / unit), num(elements * bytes), gb(elements * bytes)});
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
  ReportTable t{
      "boundaries",
      "Exact payload at every stage boundary (forward; block layout)",
      {"boundary", "ranks", "sublayers done", "completed blocks", "open partial", "naive (vectors)",
       "cached (vectors)", "cached + own (vectors)", "naive (elements/token)"},
      {},
      "",
      ""};
  for (const auto& b : r.boundaries) {
    t.rows.push_back({"chunk " + num(b.from_chunk) + " -> " + num(b.to_chunk),
                      num(b.from_rank) + " -> " + num(b.to_rank), num(b.last_sublayer),
                      num(b.completed_blocks), b.partial ? "yes" : "no", num(b.naive_vectors),
                      num(b.cached_vectors), num(b.cached_own_vectors),
                      num(b.naive_vectors * r.inputs.d_model)});
  }
  t.note =
      "Vectors are d-wide, per token: the embedding b_0, completed blocks, and the open block's "
      "partial sum. 'cached' keeps what a rank received in earlier virtual stages (the paper's "
      "policy); 'cached + own' also keeps the blocks the rank produced itself.";
  return t;
}

ReportTable flops_table(const CostReport& r) {
  ReportTable t{"flops",
                "Depth-attention arithmetic next to the model's own",
                {"quantity", "FLOP/token", "fraction of model"},
                {},
                "",
                ""};
  t.rows.push_back({"model sublayers (forward)", num(r.model_flops), "1"});
  t.rows.push_back({"depth attention, Block AttnRes", num(r.depth_flops_block),
                    num(r.depth_flops_block / r.model_flops)});
  t.rows.push_back({"depth attention, Full AttnRes", num(r.depth_flops_full),
                    num(r.depth_flops_full / r.model_flops)});
  t.note =
      "Depth attention: 6d per (read, source) pair + 2d per read; model: 8d^2 + 2Td per attention "
      "sublayer (H_kv = H, causal mean context T/2), 6dF per SwiGLU sublayer (F = " +
      num(r.inputs.ffn) + "); LM head excluded.";
  return t;
}

}  // namespace

void add_scaling_section(const ScenarioScaling& scaling, Report& report) {
  const auto at = scaling_at_loss(scaling.target_loss);
  ReportTable fits{
      "scaling_fits",
      "Scaling-law fits (paper Fig. 4): loss = A · C^(-a), C in PFLOP/s-days",
      {"scheme", "A", "a", "compute to reach loss " + num(scaling.target_loss) + " (PFLOP/s-days)",
       "compute multiplier vs baseline"},
      {},
      "",
      "scaling_loss"};
  const double computes[3] = {at.compute_baseline, at.compute_block, at.compute_full};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& fit = paper_scaling_fits()[i];
    fits.rows.push_back({fit.name, num(fit.A), num(fit.a), num(computes[i]),
                         num(at.compute_baseline / computes[i])});
  }
  fits.note =
      "Multiplier = baseline compute / scheme compute at the same loss: how much more compute "
      "the baseline needs to match the scheme.";
  report.tables.push_back(fits);

  ChartSpec loss_chart;
  loss_chart.id = "scaling_loss";
  loss_chart.title = "Loss against compute (paper fits)";
  loss_chart.x_label = "compute (PFLOP/s-days)";
  loss_chart.y_label = "validation loss";
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

  ReportTable multipliers{"scaling_multiplier",
                          "Compute multiplier against target loss",
                          {"target loss", "Block multiplier", "Full multiplier"},
                          {},
                          "",
                          "scaling_multiplier"};
  ChartSpec multiplier_chart;
  multiplier_chart.id = "scaling_multiplier";
  multiplier_chart.title = "Compute multiplier over the baseline";
  multiplier_chart.x_label = "target validation loss";
  multiplier_chart.y_label = "baseline compute / scheme compute";
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
      multipliers.rows.push_back({num(std::round(loss * 1e4) / 1e4), num(point.multiplier_block),
                                  num(point.multiplier_full)});
    }
  }
  multiplier_chart.series = {block, full};
  multiplier_chart.caption = "Block AttnRes is worth about 1.25x compute near loss 1.69-1.70.";
  report.tables.push_back(multipliers);
  report.charts.push_back(multiplier_chart);
  report.json["scaling"] = {
      {"target_loss", at.target_loss},
      {"compute_pflops_days",
       {{"baseline", at.compute_baseline}, {"block", at.compute_block}, {"full", at.compute_full}}},
      {"compute_multiplier", {{"block", at.multiplier_block}, {"full", at.multiplier_full}}}};
}

namespace {

std::string markdown_table(const ReportTable& t) {
  std::ostringstream out;
  out << "|";
  for (const auto& h : t.header) out << " " << h << " |";
  out << "\n|";
  for (std::size_t i = 0; i < t.header.size(); ++i) {
    // Right-align columns that hold only numbers.
    bool numeric = i > 0 && !t.rows.empty();
    for (const auto& row : t.rows) {
      char* end = nullptr;
      if (i < row.size()) std::strtod(row[i].c_str(), &end);
      numeric = numeric && i < row.size() && !row[i].empty() && end && *end == '\0';
    }
    out << (numeric ? "---:|" : "---|");
  }
  out << "\n";
  for (const auto& row : t.rows) {
    out << "|";
    for (const auto& cell : row) out << " " << cell << " |";
    out << "\n";
  }
  return out.str();
}

}  // namespace

ReportTable time_table(const CostInputs& in, const StackTime& prefill, const StackTime& decode,
                       const Hardware& hw) {
  ReportTable t{"time",
                "Residual-mechanism time overhead (roofline model)",
                {"scheme", "prefill stack (s)", "prefill overhead (%)", "decode stack (s)",
                 "decode overhead (%)", "residual op per sublayer, decode (s)"},
                {},
                "",
                ""};
  for (const auto& [scheme, name] : kResidualSchemeNames) {
    const auto i = static_cast<std::size_t>(scheme);
    t.rows.push_back({std::string(name), num(prefill.stack_seconds[i]),
                      num(std::round(prefill.overhead_fraction[i] * 1e5) / 1e3),
                      num(decode.stack_seconds[i]),
                      num(std::round(decode.overhead_fraction[i] * 1e5) / 1e3),
                      num(decode.residual[i].seconds)});
  }
  t.note =
      "Forward time of all L = " + num(in.sublayers) + " sublayers on " + hw.name + " (" +
      format_number(hw.peak_flops / 1e12) + " TFLOP/s x " + format_number(hw.compute_efficiency) +
      ", " + format_number(hw.hbm_bandwidth / 1e12) + " TB/s x " +
      format_number(hw.memory_efficiency) + "); prefill: B = " + num(in.batch) +
      " x T = " + num(in.tokens) + " tokens; decode: one token for each of B = " + num(in.batch) +
      " sequences at context T. Overhead = stack time / standard - 1. Source: " + hw.source + ".";
  return t;
}

ChartSpec pipeline_gantt_chart(const PipelineReport& p) {
  ChartSpec chart;
  chart.kind = ChartSpec::Kind::gantt;
  chart.id = "pipeline_gantt";
  const auto& s = p.settings;
  chart.title = to_string(s.schedule) + " schedule, P = " + num(s.model.pp) +
                ", V = " + num(s.model.vpp) +
                ", m = " + num(static_cast<std::int64_t>(s.microbatches)) + " (AttnRes, " +
                to_string(s.cache) + ")";
  chart.x_label = "time (ms)";
  for (std::int64_t r = 0; r < s.model.pp; ++r) chart.lanes.push_back("rank " + num(r));
  for (const auto& op : p.attnres.ops) {
    ChartBox box;
    box.x0 = op.start * 1e3;
    box.x1 = op.end * 1e3;
    box.lane = op.rank;
    box.category = op.backward ? GanttCategory::backward : GanttCategory::forward;
    box.label = std::string(op.backward ? "B" : "F") + " mb " + std::to_string(op.microbatch) +
                ", chunk " + std::to_string(op.chunk);
    box.tag = std::to_string(op.microbatch);
    chart.boxes.push_back(std::move(box));
  }
  for (const auto& transfer : p.attnres.transfers) {
    if (transfer.end > transfer.start) {
      ChartBox box;
      box.x0 = transfer.start * 1e3;
      box.x1 = transfer.end * 1e3;
      box.lane = transfer.from_rank;
      box.category = transfer.backward ? GanttCategory::send_backward : GanttCategory::send_forward;
      box.label = std::string(transfer.backward ? "send B" : "send F") + " mb " +
                  std::to_string(transfer.microbatch) + ", chunk " +
                  std::to_string(transfer.from_chunk) + " -> " + std::to_string(transfer.to_chunk) +
                  " (rank " + std::to_string(transfer.to_rank) + ")";
      chart.boxes.push_back(std::move(box));
    }
  }
  chart.caption = "Iteration " + num(p.iteration_time_s * 1e3) + " ms; standard residual " +
                  num(p.standard.iteration_seconds * 1e3) +
                  " ms; thin bars are transfers on the sender's lane.";
  return chart;
}

ChartSpec pipeline_memory_chart(const PipelineReport& p) {
  ChartSpec chart;
  chart.id = "pipeline_memory";
  chart.title = "Live memory per rank (activations + AttnRes history)";
  chart.x_label = "time (ms)";
  chart.y_label = "GB (1e9 bytes)";
  const std::size_t P = p.attnres.memory.size();
  std::vector<std::size_t> ranks;
  for (std::size_t r = 0; r < P; ++r) {
    if (P <= 8 || r == 0 || r == P - 1 || r % (P / 6) == 0) ranks.push_back(r);
  }
  for (std::size_t r : ranks) {
    ChartSeries series{
        "rank " + num(static_cast<std::int64_t>(r)), {}, ChartSeries::Style::line, false};
    double previous = 0;
    for (const auto& point : p.attnres.memory[r]) {
      series.points.emplace_back(point.time * 1e3, previous / 1e9);  // steps
      series.points.emplace_back(point.time * 1e3, point.bytes / 1e9);
      previous = point.bytes;
    }
    chart.series.push_back(std::move(series));
  }
  chart.caption = "Peak per rank " + num(p.peak_memory_bytes_per_rank / 1e9) + " GB (" +
                  num(p.peak_memory_bytes_per_rank / 1073741824.0) + " GiB).";
  return chart;
}

void add_pipeline_section(const PipelineReport& p, Report& report) {
  const auto& s = p.settings;
  ReportTable t{"pipeline_sim",
                "Pipeline schedule simulation: does the AttnRes traffic hide?",
                {"quantity", "value"},
                {},
                "",
                "pipeline_gantt"};
  auto row = [&](const std::string& name, const std::string& value) {
    t.rows.push_back({name, value});
  };
  row("iteration time, AttnRes (s)", num(p.iteration_time_s));
  row("iteration time, standard residual (s)", num(p.standard.iteration_seconds));
  row("AttnRes overhead (%)", num(std::round(p.attnres_overhead_fraction * 1e5) / 1e3));
  row("bubble (% of the busiest rank's compute)", num(std::round(p.bubble_fraction * 1e5) / 1e3));
  row("closed-form bubble (%)", num(std::round(p.closed_form_bubble * 1e5) / 1e3));
  row("exposed communication (s)", num(p.exposed_comm_s));
  row("peak memory per rank (GB)", num(p.peak_memory_bytes_per_rank / 1e9));
  row("peak memory per rank (GiB)", num(p.peak_memory_bytes_per_rank / 1073741824.0));
  row("bytes transferred per iteration (both directions)", num(p.attnres.transferred_bytes));
  row("link bandwidth (GB/s per direction, before efficiency)", num(p.link_bandwidth / 1e9));
  t.note = to_string(s.schedule) + " schedule, P = " + num(s.model.pp) +
           ", V = " + num(s.model.vpp) + ", m = " + num(static_cast<std::int64_t>(s.microbatches)) +
           " micro-batches of B = " + num(s.model.batch) + " x T = " + num(s.model.tokens) +
           " tokens; " + to_string(s.mode) + " AttnRes, " + to_string(s.cache) +
           " history; transfers " +
           (s.ideal_links ? "free"
            : s.overlap   ? "overlapped with compute"
                          : "blocking the sender") +
           ". Backward = 2 x forward. The bubble's denominator is the busiest rank's compute time.";
  report.tables.push_back(t);
  report.charts.push_back(pipeline_gantt_chart(p));
  ReportTable memory{"pipeline_memory",
                     "Peak live memory per rank",
                     {"rank", "peak (GB)", "activations only (GB)"},
                     {},
                     "",
                     "pipeline_memory"};
  for (std::size_t r = 0; r < p.attnres.peak_memory_bytes.size(); ++r) {
    memory.rows.push_back({num(static_cast<std::int64_t>(r)),
                           num(p.attnres.peak_memory_bytes[r] / 1e9),
                           num(p.attnres.peak_activation_bytes[r] / 1e9)});
  }
  memory.note =
      "Activations 17·B·T·d·(b/2) bytes per sublayer (34·sbh per layer, flash attention), plus the "
      "received AttnRes history, held from a chunk's forward to its backward.";
  report.tables.push_back(memory);
  report.charts.push_back(pipeline_memory_chart(p));
}

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

Report build_report(const Scenario& s, const Progress& progress) {
  Report report;
  report.title = s.title.empty() ? s.source : s.title;
  report.description = s.description;
  if (!s.model_source.empty()) {
    report.description +=
        (report.description.empty() ? "" : "\n\n") + std::string("Model source: ") + s.model_source;
  }
  report.source = s.source;
  if (s.has_model) {
    const EvaluatedScenario evaluated = evaluate_scenario(
        s.scenario_inputs(), wants(s.sections, "time"), wants(s.sections, "pipeline_sim"), true);
    report.json = evaluation_to_json(evaluated.view());
    report.tables = cost_tables(evaluated.cost, s.sections);
    if (evaluated.prefill)
      report.tables.push_back(
          time_table(s.inputs, *evaluated.prefill, *evaluated.decode, *s.hardware));
    if (evaluated.pipeline) add_pipeline_section(*evaluated.pipeline, report);
    std::vector<ReportTable> v2;
    for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
      if (!wants(s.sections, "strategies")) continue;
      v2.push_back(strategies_table(mode, s.inputs, s.moe, *s.hardware));
      AttnResConfig scheme;
      scheme.mode = mode;
      v2.back().chart = "strategies_" + to_string(mode);
      report.charts.push_back(strategies_chart(scheme, s.inputs, *s.hardware));
    }
    for (ResidualMode mode : {ResidualMode::block, ResidualMode::full}) {
      if (wants(s.sections, "decode"))
        v2.push_back(decode_table(mode, s.inputs, s.moe, *s.hardware));
    }
    if (wants(s.sections, "layout")) v2.push_back(layout_table(s.inputs));
    if (wants(s.sections, "recompute"))
      v2.push_back(recompute_table(s.strategy_mode, s.strategy, s.inputs));
    for (auto& table : v2) {
      report.json[table.id] = table_rows_json(table);
      report.tables.push_back(std::move(table));
    }
  }
  if (wants(s.sections, "calibration")) {
    const CalibrationTable table = s.calibration_table.empty()
                                       ? builtin_calibration()
                                       : load_calibration(s.calibration_table.string());
    const auto rows = evaluate_calibration(table);
    report.tables.push_back(calibration_table(rows));
    report.charts.push_back(calibration_chart(rows));
    report.conclusions.push_back("**Calibration against public measurements**\n\n" +
                                 calibration_summary(rows) + "\n");
    json points = json::array();
    for (const auto& row : rows) {
      points.push_back({{"id", row.point.id},
                        {"source", row.point.source},
                        {"url", row.point.url},
                        {"quantity", to_string(row.point.quantity)},
                        {"measured", row.point.measured},
                        {"modelled", row.modelled},
                        {"ratio", row.ratio},
                        {"bound", row.bound},
                        {"within_bound", row.within},
                        {"fitted", row.point.fitted}});
    }
    const CalibrationError error = calibration_error(rows);
    report.json["calibration"] = {{"table", table.source},
                                  {"points", points},
                                  {"typical_factor", error.typical_factor},
                                  {"worst_factor", error.worst_factor},
                                  {"worst", error.worst_id},
                                  {"measured_points", error.points}};
  }
  report.json["scenario"] = {
      {"source", s.source}, {"title", report.title}, {"sections", s.sections}};
  if (wants(s.sections, "scaling")) add_scaling_section(s.scaling, report);

  json sweeps = json::array();
  for (const auto& spec : s.sweeps) {
    for (const auto& table : report.tables) {
      if (table.id == spec.name) {
        throw Error(s.source + ": sweep '" + spec.name +
                    "' has the name of the report's own table '" + table.id + "' (tables/" +
                    table.id + ".csv); give the sweep another name");
      }
    }
    for (const auto& chart : report.charts) {
      if (chart.id == spec.name) {
        throw Error(s.source + ": sweep '" + spec.name +
                    "' has the name of the report's own chart '" + chart.id + "' (charts/" +
                    chart.id + ".png); give the sweep another name");
      }
    }
    const SweepResult result = run_sweep(s.scenario_inputs(), spec, progress);
    ReportTable table{spec.name, spec.title.empty() ? "Sweep " + spec.name : spec.title, {}, {}, "",
                      spec.name};
    table.header.push_back(spec.x.parameter);
    if (spec.y) table.header.push_back(spec.y->parameter);
    for (const auto& key : spec.metrics)
      table.header.push_back(key + " (" + find_cost_metric(key)->unit + ")");
    json points = json::array();
    for (const auto& point : result.points) {
      std::vector<std::string> row{num(point.x)};
      json entry = {{spec.x.parameter, point.x}};
      if (point.y) {
        row.push_back(num(*point.y));
        entry[spec.y->parameter] = *point.y;
      }
      for (std::size_t m = 0; m < point.values.size(); ++m) {
        row.push_back(num(point.values[m]));
        entry[spec.metrics[m]] = point.values[m];
      }
      table.rows.push_back(std::move(row));
      points.push_back(std::move(entry));
    }
    if (!result.skipped.empty()) {
      table.note = std::to_string(result.skipped_count) +
                   " settings rejected as impossible, e.g. " + result.skipped.front() + ".";
      report.notes.push_back("sweep " + spec.name + ": " + table.note);
    }
    sweeps.push_back({{"name", spec.name},
                      {"x", spec.x.parameter},
                      {"y", spec.y ? json(spec.y->parameter) : json(nullptr)},
                      {"metrics", spec.metrics},
                      {"points", points},
                      {"skipped", result.skipped},
                      {"conclusion", sweep_conclusion(result)}});
    report.charts.push_back(sweep_chart(result, s.scenario_inputs()));
    if (const std::string warning = paper_fig6_warning(spec, s.scenario_inputs().cost);
        !warning.empty()) {
      report.notes.push_back("sweep " + spec.name + ": " + warning);
    }
    if (const std::string conclusion = sweep_conclusion(result); !conclusion.empty()) {
      table.note += (table.note.empty() ? "" : " ") + std::string("Claim check:\n\n") + conclusion;
      report.conclusions.push_back("**" + (spec.title.empty() ? spec.name : spec.title) + "**\n\n" +
                                   conclusion);
    }
    report.tables.push_back(std::move(table));
  }
  report.json["sweeps"] = sweeps;
  report.json["provenance"] = report_provenance(s);
  report.provenance = report.json["provenance"];
  report_progress(progress, 1, 1, "report");  // a Ctrl-C during the sections stops here
  return report;
}

json report_provenance(const Scenario& s) {
  json inputs;
  if (s.has_model) inputs["model"] = cost_inputs_to_json(s.inputs);
  if (s.hardware) {
    const Hardware& h = *s.hardware;
    inputs["hardware"] = {{"name", h.name},
                          {"source", h.source},
                          {"peak_flops", h.peak_flops},
                          {"hbm_bandwidth_bytes_per_s", h.hbm_bandwidth},
                          {"intra_node_bandwidth_bytes_per_s", h.intra_node_bandwidth},
                          {"scale_out_bandwidth_bytes_per_s", h.scale_out_bandwidth},
                          {"link_latency_s", h.link_latency},
                          {"gpus_per_node", h.gpus_per_node},
                          {"efficiency",
                           {{"compute", h.compute_efficiency},
                            {"memory", h.memory_efficiency},
                            {"link", h.link_efficiency}}}};
  }
  if (s.moe.experts > 0) {
    inputs["moe"] = {{"experts", s.moe.experts},
                     {"active", s.moe.active},
                     {"shared", s.moe.shared},
                     {"expert_ffn", s.moe.expert_ffn}};
  }
  if (s.pipeline) {
    const PipelineSettings& p = *s.pipeline;
    inputs["pipeline"] = {{"mode", to_string(p.mode)},
                          {"microbatches", p.microbatches},
                          {"schedule", to_string(p.schedule)},
                          {"cache", to_string(p.cache)},
                          {"link", p.intra_node_link ? "intra_node" : "scale_out"},
                          {"link_bandwidth_bytes_per_s",
                           p.link_bandwidth > 0 ? json(p.link_bandwidth) : json(nullptr)},
                          {"overlap", p.overlap},
                          {"ideal_links", p.ideal_links}};
  }
  if (wants(s.sections, "scaling")) {
    inputs["scaling"] = {{"target_loss", s.scaling.target_loss},
                         {"loss_from", s.scaling.loss_from},
                         {"loss_to", s.scaling.loss_to}};
  }
  return {{"tool", "attnres"},         {"version", kVersion},     {"command", "attnres report"},
          {"scenario_file", s.source}, {"scenario_text", s.text}, {"sections", s.sections},
          {"inputs", inputs}};
}

std::string table_csv(const ReportTable& t) {
  auto quote = [](const std::string& cell) {
    if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
    std::string out = "\"";
    for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  std::ostringstream out;
  for (std::size_t i = 0; i < t.header.size(); ++i) out << (i ? "," : "") << quote(t.header[i]);
  out << "\n";
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << quote(row[i]);
    out << "\n";
  }
  return out.str();
}

std::string report_markdown(const Report& report) {
  std::ostringstream out;
  out << "# " << report.title << "\n\n";
  if (!report.description.empty()) out << report.description << "\n\n";
  out << "Scenario: `" << report.source << "`. Generated by `attnres report`.\n\n"
      << "**Conventions.** Elements are vector elements per token (multiply by B·T·b for bytes). "
         "Residual I/O is per token and per sublayer, excluding the I/O inside attention and MLP. "
         "Pipeline traffic is per token, forward, one direction. GB = 10^9 bytes, GiB = 2^30 "
         "bytes; "
         "both are printed.\n\n";
  if (!report.conclusions.empty()) {
    out << "## Conclusions\n\nEach claim below is checked against the sweep named in bold; the "
           "tables "
           "and charts further down hold the numbers.\n\n";
    for (const auto& conclusion : report.conclusions) out << conclusion << "\n";
  }
  for (const auto& table : report.tables) {
    out << "## " << table.title << "\n\n";
    constexpr std::size_t kMaxRowsInMarkdown = 40;
    if (table.rows.size() <= kMaxRowsInMarkdown) {
      out << markdown_table(table);
    } else {
      ReportTable head = table;
      head.rows.resize(kMaxRowsInMarkdown);
      out << markdown_table(head) << "\n(" << table.rows.size() - kMaxRowsInMarkdown
          << " more rows in the CSV.)\n";
    }
    out << "\nCSV: [tables/" << table.id << ".csv](tables/" << table.id << ".csv)\n\n";
    if (!table.note.empty()) out << table.note << "\n\n";
    if (!table.chart.empty()) {
      for (const auto& chart : report.charts) {
        if (chart.id != table.chart) continue;
        out << "![" << chart.title << "](charts/" << chart.id << ".png)\n\n";
        if (!chart.caption.empty())
          out << "*" << chart.caption << "* ([SVG](charts/" << chart.id << ".svg))\n\n";
      }
    }
  }
  for (const auto& note : report.notes) out << "> " << note << "\n\n";
  if (!report.provenance.is_null()) {
    const json& p = report.provenance;
    out << "## Provenance\n\nWritten by attnres " << p.value("version", "") << " (`"
        << p.value("command", "") << "`) from `" << p.value("scenario_file", "") << "`.\n\n";
    if (p.contains("inputs")) {
      out << "Inputs that change the results:\n\n```json\n" << p["inputs"].dump(2) << "\n```\n\n";
    }
    const std::string text = p.value("scenario_text", "");
    if (!text.empty()) {
      std::string fence = "```";
      while (text.find(fence) != std::string::npos) fence += "`";
      out << "The scenario file as read:\n\n"
          << fence << "toml\n"
          << text << (text.back() == '\n' ? "" : "\n") << fence << "\n";
    }
  }
  return out.str();
}

OutputDirectoryResult write_report(const Report& report, const fs::path& directory,
                                   const ChartRenderer& render_chart,
                                   OutputDirectoryOptions options) {
  options.owner = "report";
  const Progress progress = options.progress;
  const std::size_t total = report.tables.size() + report.charts.size() + report.files.size() + 2;
  std::size_t done = 0;
  auto step = [&] { report_progress(progress, ++done, total, "writing the report"); };
  return write_output_directory(directory, options, [&](const fs::path& staging) {
    fs::create_directories(staging / "tables");
    fs::create_directories(staging / "charts");
    for (const auto& table : report.tables) {
      write_file_atomically(staging / "tables" / (table.id + ".csv"), table_csv(table));
      step();
    }
    for (const auto& chart : report.charts) {
      render_chart(chart, staging / "charts" / (chart.id + ".png"),
                   staging / "charts" / (chart.id + ".svg"));
      step();
    }
    for (const auto& [relative, bytes] : report.files) {
      fs::create_directories((staging / relative).parent_path());
      write_file_atomically(staging / relative, bytes);
      step();
    }
    write_file_atomically(staging / "report.json", report.json.dump(2) + "\n");
    step();
    write_file_atomically(staging / "report.md", report_markdown(report));
    step();
  });
}

}  // namespace attnres
