#include "attnres/strategy_report.hpp"

#include <cmath>

#include "attnres/format.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;

namespace {

std::string rounded(double value, double scale) {
  return format_number(std::round(value * scale) / scale);
}
std::string percent(double fraction) {
  return rounded(fraction * 100, 1e3);
}
std::string micro(double seconds) {
  return rounded(seconds * 1e6, 1e3);
}

AttnResConfig mode_scheme(ResidualMode mode) {
  AttnResConfig scheme;
  scheme.mode = mode;
  return scheme;
}

std::string scheme_title(const AttnResConfig& scheme) {
  if (scheme.paper_defaults() && scheme.block_size == 0)
    return scheme.mode == ResidualMode::full ? "Full AttnRes" : "Block AttnRes";
  return scheme.describe();
}

std::string scheme_id(const AttnResConfig& scheme) {
  if (scheme.paper_defaults() && scheme.block_size == 0) return to_string(scheme.mode);
  std::string id = scheme_spec(scheme);
  for (char& c : id)
    if (c == ':' || c == ',' || c == '=') c = '_';
  return id;
}

// A strategy the scheme's read rules out (fused_two_phase with an input-dependent query) gets a
// row of n/a (null); returns whether it did.
bool not_applicable_row(ReportTable& t, Strategy strategy, std::string_view name,
                        const ReadOps& ops) {
  if (strategy != Strategy::fused_two_phase || ops.two_phase_limit.empty()) return false;
  std::vector<nlohmann::json> row(t.columns.size(), nullptr);
  row[0] = std::string(name);
  add_row(t, std::move(row));
  return true;
}

}  // namespace

ReportTable strategies_table(ResidualMode mode, const CostInputs& in, const Hardware& hw) {
  return strategies_table(mode_scheme(mode), in, hw);
}

ReportTable decode_table(ResidualMode mode, const CostInputs& in, const Hardware& hw) {
  return decode_table(mode_scheme(mode), in, hw);
}

ReportTable strategies_table(const AttnResConfig& scheme, const CostInputs& in,
                             const Hardware& hw) {
  ReportTable t = typed_table(
      "strategies_" + scheme_id(scheme),
      scheme_title(scheme) + ": implementation strategies per training step (docs/math.md §3.6)",
      {{"strategy", "strategy", Shown::text},
       {"forward_read_bytes", "forward read (MB)", Shown::megabytes},
       {"forward_write_bytes", "forward write (MB)", Shown::megabytes},
       {"forward_launches", "forward launches", Shown::integer},
       {"backward_read_bytes", "backward read (MB)", Shown::megabytes},
       {"backward_write_bytes", "backward write (MB)", Shown::megabytes},
       {"backward_launches", "backward launches", Shown::integer},
       {"history_copy_bytes", "history copies (MB)", Shown::megabytes},
       {"temporary_bytes", "temporary (MB)", Shown::megabytes},
       {"saved_for_backward_bytes", "saved for backward (MB)", Shown::megabytes},
       {"mechanism_seconds", "mechanism time (ms)", Shown::milliseconds},
       {"step_overhead_fraction", "step overhead (%)", Shown::percent}});
  const double tokens = static_cast<double>(in.batch) * static_cast<double>(in.tokens);
  const double vector_bytes =
      static_cast<double>(in.d_model) * tokens * bytes_per_element(in.dtype);
  const ReadOps ops = read_ops_of(scheme);
  for (const auto& [strategy, name] : kStrategyNames) {
    if (not_applicable_row(t, strategy, name, ops)) continue;
    const StrategyCost cost = scheme_strategy_cost(strategy, scheme, in);
    const StrategyStep step = strategy_step(strategy, scheme, in, Phase::prefill, true, hw);
    auto bytes = [&](std::int64_t vectors) { return static_cast<double>(vectors) * vector_bytes; };
    add_row(t,
            {std::string(name), bytes(cost.forward.read_vectors), bytes(cost.forward.write_vectors),
             cost.forward.launches, bytes(cost.backward.read_vectors),
             bytes(cost.backward.write_vectors), cost.backward.launches, bytes(cost.copy_vectors),
             bytes(cost.forward.temp_vectors), bytes(cost.saved_vectors),
             step.forward.seconds + step.backward.seconds, step.overhead_fraction});
  }
  const StrategyStep reference =
      strategy_step(Strategy::fused_one_shot, scheme, in, Phase::prefill, true, hw);
  t.note = "One micro-batch of B = " + num(in.batch) + " x T = " + num(in.tokens) +
           " tokens, d = " + num(in.d_model) + ", L = " + num(in.sublayers) + ", blocks " +
           (scheme.mode == ResidualMode::block ? scheme_layout(scheme, in).describe()
                                               : std::string("of one sublayer (every output)")) +
           ", " + std::to_string(bytes_per_element(in.dtype)) +
           " bytes per element. Each call takes max(kernel floor " + micro(hw.kernel_floor) +
           " us, bytes / (" + num(hw.hbm_bandwidth / 1e12) + " TB/s x " +
           num(hw.memory_efficiency) + ")) on " + hw.name +
           ". Step overhead = (mechanism - standard residual adds) / the model's step (forward + "
           "backward = 3 x forward, " +
           rounded(reference.model_seconds * 1e3, 1e4) +
           " ms), on one device without a pipeline: the mechanism part of the training step; "
           "attnres pipeline gives the whole step with bubbles and communication (docs/math.md "
           "§3.8). Saved = tensors kept for the backward beyond the stored history." +
           (ops.two_phase_limit.empty() ? std::string()
                                        : " fused_two_phase: n/a, " + ops.two_phase_limit + ".");
  return t;
}

ChartSpec strategies_chart(const AttnResConfig& scheme, const CostInputs& in, const Hardware& hw) {
  ChartSpec chart = detail::xy_chart(
      "strategies_" + scheme_id(scheme),
      scheme_title(scheme) + ": forward time of the mechanism per pass",
      "tokens per call (B for decode, B x T for prefill)", "time per forward pass (s)");
  chart.log_x = chart.log_y = true;
  const ReadOps ops = read_ops_of(scheme);
  const int b = bytes_per_element(in.dtype);
  auto series_of = [&](const std::string& name, const std::vector<KernelCall>& calls) {
    ChartSeries series{name, {}, ChartSeries::Style::line, false};
    for (int k = 0; k <= 20; ++k) {
      const double tokens = std::ldexp(1.0, k);
      series.points.emplace_back(tokens, calls_time(calls, in.d_model, tokens, b, hw).seconds);
    }
    return series;
  };
  for (const auto& [strategy, name] : kStrategyNames) {
    if (strategy == Strategy::fused_two_phase && !ops.two_phase_limit.empty()) continue;
    chart.series.push_back(
        series_of(std::string(name), scheme_strategy_cost(strategy, scheme, in).forward_calls));
  }
  chart.series.push_back(
      series_of("standard residual (adds)", standard_residual_calls(in.sublayers)));
  chart.caption = "Flat while every call sits at the " + micro(hw.kernel_floor) +
                  " us floor (the cost is the number of launches), then rising with the bytes; " +
                  hw.name + ", d = " + num(in.d_model) + ", L = " + num(in.sublayers) + ".";
  return chart;
}

ReportTable decode_table(const AttnResConfig& scheme, const CostInputs& in, const Hardware& hw) {
  ReportTable t = typed_table(
      "decode_" + scheme_id(scheme), scheme_title(scheme) + " per decode step (docs/math.md §3.6)",
      {{"strategy", "strategy", Shown::text},
       {"launches_per_step", "launches per step", Shown::integer},
       {"launches_at_kernel_floor", "at the floor", Shown::integer},
       {"mechanism_seconds", "mechanism (us)", Shown::microseconds},
       {"standard_adds_seconds", "standard adds (us)", Shown::microseconds},
       {"decode_step_seconds", "decode step (us)", Shown::microseconds},
       {"decode_overhead_fraction", "overhead (%)", Shown::percent},
       {"prefill_overhead_fraction", "prefill overhead (%)", Shown::percent}});
  const ReadOps ops = read_ops_of(scheme);
  for (const auto& [strategy, name] : kStrategyNames) {
    if (not_applicable_row(t, strategy, name, ops)) continue;
    const StrategyStep decode = strategy_step(strategy, scheme, in, Phase::decode, false, hw);
    const StrategyStep prefill = strategy_step(strategy, scheme, in, Phase::prefill, false, hw);
    add_row(t, {std::string(name), decode.forward.launches, decode.forward.floor_bound,
                decode.forward.seconds, decode.standard_forward.seconds, decode.model_seconds,
                decode.overhead_fraction, prefill.overhead_fraction});
  }
  const auto reads = read_sources(scheme_layout(scheme, in));
  double mean = 0;
  for (const auto& read : reads) mean += static_cast<double>(read.sources());
  mean /= static_cast<double>(reads.size());
  const auto vectors = static_cast<std::int64_t>(std::llround(mean)) + 2;
  t.note = "Reads per forward: L + 1 = " + num(in.sublayers + 1) +
           " (two per transformer layer and the final read), one token for each of B = " +
           num(in.batch) + " sequences per call, context T = " + num(in.tokens) +
           ". A fused read of the mean " + rounded(mean, 100) + " sources (" + num(vectors) +
           " vectors per token with its output and store) stays at the " + micro(hw.kernel_floor) +
           " us floor below " +
           num(std::round(crossover_tokens(vectors, in.d_model, bytes_per_element(in.dtype), hw))) +
           " tokens per call on " + hw.name +
           "; decode is latency-bound far below that, prefill (B x T tokens per call) "
           "bandwidth-bound.";
  return t;
}

ReportTable layout_table(const CostInputs& in) {
  const BlockLayout layout = block_layout_of(in);
  ReportTable t =
      typed_table("layout",
                  "Block layout: " + layout.describe() + " sublayers against P = " + num(in.pp) +
                      ", V = " + num(in.vpp) + " pipeline stages (docs/math.md §3.6)",
                  {{"block", "block", Shown::integer},
                   {"first_sublayer", "first sublayer", Shown::integer},
                   {"last_sublayer", "last sublayer", Shown::integer},
                   {"sublayers", "size", Shown::integer},
                   {"first_layer", "first layer", Shown::integer},
                   {"last_layer", "last layer", Shown::integer},
                   {"sources_per_read_min", "min sources", Shown::integer},
                   {"sources_per_read_max", "max sources", Shown::integer},
                   {"first_chunk", "first chunk", Shown::integer},
                   {"last_chunk", "last chunk", Shown::integer},
                   {"ranks", "ranks", Shown::text},
                   {"crosses_stage", "crosses a stage", Shown::yes_no},
                   {"splits_layer", "splits a layer", Shown::yes_no}});
  for (const auto& row : layout_rows(layout, in.pp, in.vpp, stage_last_sublayers(in))) {
    std::string ranks;
    for (std::int64_t c = row.first_chunk; c <= row.last_chunk; ++c) {
      if (!ranks.empty()) ranks.push_back(',');
      ranks.append(std::to_string(c % in.pp));
    }
    add_row(t, {row.block, row.first_sublayer, row.last_sublayer, row.size, row.first_layer,
                row.last_layer, row.sources_min, row.sources_max, row.first_chunk, row.last_chunk,
                ranks, row.crosses_stage, row.splits_layer});
  }
  const auto layers = layers_per_block(in.block_size);
  t.note = "Sublayer s is in transformer layer ceil(s/2). " +
           (layout.equal() && layers
                ? "S = " + num(in.block_size) + " sublayers = " + num(*layers) +
                      " transformer layers per block (--block-layers " + num(*layers) + ")."
                : std::string("Blocks counted in sublayers.")) +
           " A block that crosses a stage sends its open partial sum over the boundary "
           "(docs/math.md §3.3).";
  return t;
}

ReportTable recompute_table(ResidualMode mode, Strategy strategy, const CostInputs& in) {
  ReportTable t =
      typed_table("recompute",
                  "Activation checkpointing: memory per rank and recompute per micro-batch (" +
                      to_string(mode) + ", " + to_string(strategy) + ", docs/math.md §3.6)",
                  {{"policy", "policy", Shown::text},
                   {"rank", "rank", Shown::integer},
                   {"sublayers", "sublayers", Shown::integer},
                   {"activation_bytes", "activations (GB)", Shown::gigabytes},
                   {"history_bytes", "history (GB)", Shown::gigabytes},
                   {"saved_bytes", "saved (GB)", Shown::gigabytes},
                   {"held_bytes", "held (GB)", Shown::gigabytes},
                   {"recompute_transient_bytes", "recompute transient (GB)", Shown::gigabytes},
                   {"recompute_flop", "recompute (TFLOP)", Shown::teraflop}});
  double forward = 0;
  for (const auto& [policy, name] : kCheckpointingNames) {
    const RecomputeReport report = recompute_report(policy, mode, strategy, in);
    forward = report.forward_flops;
    for (const auto& rank : report.ranks) {
      add_row(t, {std::string(name), rank.rank, rank.sublayers, rank.activation_bytes,
                  rank.history_bytes, rank.saved_bytes, rank.total_bytes(), rank.transient_bytes,
                  rank.recompute_flops});
    }
  }
  t.note = "Per micro-batch of B = " + num(in.batch) + " x T = " + num(in.tokens) +
           " tokens held from a chunk's forward to its backward; multiply by the micro-batches in "
           "flight (P - rank for 1F1B). none: the activations of docs/math.md §3.7 per sublayer "
           "plus the history received and produced; layers: one checkpoint per transformer layer, "
           "block summaries kept, one forward recomputed; chunk: only the received history kept, "
           "the chunk (block summaries included) recomputed. Model forward: " +
           rounded(forward / 1e12, 1e3) +
           " TFLOP per micro-batch. Weights, gradients, optimizer states and the device's "
           "capacity are not here: attnres memory gives the whole rank and whether it fits.";
  return t;
}

ReportTable calibration_table(const std::vector<CalibrationRow>& rows) {
  ReportTable t = typed_table(
      "calibration",
      "Modelled vs measured: public AttnRes overhead measurements (docs/calibration.md)",
      {{"point", "point", Shown::text},
       {"hardware", "hardware", Shown::text},
       {"implementation", "implementation", Shown::text},
       {"quantity", "quantity", Shown::text},
       {"measured", "measured", Shown::number},
       {"modelled", "modelled", Shown::number},
       {"modelled_over_measured", "modelled / measured", Shown::decimals3},
       {"bound", "bound", Shown::yes_no},
       {"within_bound", "within the bound", Shown::yes_no},
       {"fitted", "fitted", Shown::yes_no},
       {"regime", "regime", Shown::text},
       {"source", "source", Shown::text},
       {"url", "url", Shown::text}},
      "calibration");
  // Shown with its unit: seconds per call in us, a fraction of the step in %.
  auto shown = [](const CalibrationRow& row, double v) {
    return row.point.quantity == CalibrationQuantity::call_seconds ? micro(v) + " us"
                                                                   : percent(v) + " %";
  };
  for (const auto& row : rows) {
    const auto& p = row.point;
    const std::string implementation = p.quantity == CalibrationQuantity::call_seconds
                                           ? p.call + ", " + std::to_string(p.sources) + " sources"
                                           : to_string(p.strategy);
    std::string ratio = rounded(row.ratio, 1e3);
    if (row.bound) ratio = row.within ? "within the bound" : "exceeds the bound";
    if (p.fitted) ratio += " (fitted)";
    add_row(t,
            {p.id, p.hardware_name, implementation, to_string(p.quantity), p.measured, row.modelled,
             row.bound ? nlohmann::json(nullptr) : nlohmann::json(row.ratio), row.bound,
             row.bound ? nlohmann::json(row.within) : nlohmann::json(nullptr), p.fitted, row.regime,
             p.source, p.url.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.url)},
            {"", "", "", "", (row.bound ? "< " : "") + shown(row, p.measured),
             shown(row, row.modelled), ratio, "", "", "", "", "", ""});
  }
  t.note = calibration_summary(rows) +
           " Each point's shape, implementation and assumptions: "
           "resources/calibration/public-measurements.toml.";
  return t;
}

ChartSpec calibration_chart(const std::vector<CalibrationRow>& rows,
                            std::vector<CalibrationPointPlace>* places) {
  ChartSpec chart = detail::xy_chart(
      "calibration", "Modelled against measured: public AttnRes overhead measurements",
      "measured (fraction of the step, or seconds per call)", "modelled (same unit)");
  chart.log_x = chart.log_y = true;
  ChartSeries measured{"measured", {}, ChartSeries::Style::scatter, false};
  ChartSeries fitted{"fitted (sets a model parameter)", {}, ChartSeries::Style::scatter, false};
  ChartSeries bounds{"claimed bound (x: the bound)", {}, ChartSeries::Style::scatter, false};
  if (places) places->clear();
  double low = 1e300, high = 0;
  for (const auto& row : rows) {
    // A throughput change is negative: drawn by its size.
    const double x = std::abs(row.point.measured), y = std::abs(row.modelled);
    if (!(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y)) {
      if (places) places->push_back({-1, 0});
      continue;
    }
    low = std::min({low, x, y});
    high = std::max({high, x, y});
    const int series = row.bound ? 2 : row.point.fitted ? 1 : 0;
    ChartSeries& target = series == 2 ? bounds : series == 1 ? fitted : measured;
    if (places) places->push_back({series, target.points.size()});
    target.points.emplace_back(x, y);
  }
  chart.series = {measured, fitted, bounds};
  if (high > 0) {
    ChartSeries diagonal{"modelled = measured", {}, ChartSeries::Style::line, false};
    diagonal.points = {{low / 2, low / 2}, {high * 2, high * 2}};
    chart.series.push_back(diagonal);
  }
  chart.caption =
      "Each public measurement of docs/calibration.md against the cost engine's value for its "
      "setting (docs/math.md §3.6): on the diagonal the model matches, above it the model "
      "overestimates. Overheads are fractions of the step, kernel calls seconds; a claimed bound "
      "is drawn at the bound. " +
      calibration_summary(rows);
  return chart;
}

std::string calibration_summary(const std::vector<CalibrationRow>& rows) {
  const CalibrationError error = calibration_error(rows);
  int bounds = 0, within = 0, fitted = 0;
  for (const auto& row : rows) {
    bounds += row.bound ? 1 : 0;
    within += row.bound && row.within ? 1 : 0;
    fitted += row.point.fitted ? 1 : 0;
  }
  std::string text = "Over the " + std::to_string(error.points) +
                     " measured points that are neither bounds nor fitted, the model is off by a "
                     "factor of " +
                     rounded(error.typical_factor, 100) + " typically (geometric mean) and " +
                     rounded(error.worst_factor, 100) + " at worst (" + error.worst_id + ").";
  if (bounds > 0)
    text += " " + std::to_string(within) + " of " + std::to_string(bounds) +
            " claimed bounds hold in the model.";
  if (fitted > 0) text += " " + std::to_string(fitted) + " point(s) set a model parameter.";
  return text;
}

nlohmann::json calibration_to_json(const std::string& table_source,
                                   const std::vector<CalibrationRow>& rows) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& row : rows) {
    const auto& p = row.point;
    points.push_back(
        {{"id", p.id},
         {"title", p.title},
         {"source", p.source},
         {"url", p.url},
         {"hardware", p.hardware_name},
         {"quantity", to_string(p.quantity)},
         {"measured", p.measured},
         {"measured_text", p.measured_text},
         {"modelled", row.modelled},
         {"modelled_over_measured",
          row.bound ? nlohmann::json(nullptr) : nlohmann::json(row.ratio)},
         {"bound", row.bound},
         {"within_bound", row.bound ? nlohmann::json(row.within) : nlohmann::json(nullptr)},
         {"fitted", p.fitted},
         {"regime", row.regime},
         {"detail", row.detail},
         {"assumptions", p.assumptions}});
  }
  const CalibrationError error = calibration_error(rows);
  return {{"table", table_source},
          {"points", points},
          {"error",
           {{"measured_points", error.points},
            {"typical_factor", error.typical_factor},
            {"worst_factor", error.worst_factor},
            {"worst_point", error.worst_id}}},
          {"summary", calibration_summary(rows)}};
}

}  // namespace attnres
