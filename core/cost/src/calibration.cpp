#include "attnres/calibration.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/hardware_reader.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/toml_reader.hpp"
#include "calibration_table.hpp"  // generated from resources/calibration/public-measurements.toml

namespace attnres {

std::string to_string(CalibrationQuantity quantity) {
  return enum_name(kCalibrationQuantityNames, quantity);
}

namespace {

bool is_call(CalibrationQuantity q) {
  return q == CalibrationQuantity::call_seconds;
}

CalibrationPoint read_point(const detail::TomlReader& reader, const toml::table& t,
                            std::size_t index) {
  const std::string prefix = "point[" + std::to_string(index + 1) + "].";
  reader.check_keys(
      t, prefix, {"id",          "title",     "source",   "url",    "measured_text", "assumptions",
                  "quantity",    "measured",  "hardware", "mode",   "strategy",      "phase",
                  "layers",      "sublayers", "d_model",  "blocks", "block_size",    "block_layers",
                  "block_sizes", "tokens",    "batch",    "ffn",    "dtype",         "moe",
                  "call",        "sources",   "fitted"});
  CalibrationPoint p;
  p.location = reader.location(t.source());
  auto text = [&](const char* key, std::string& out, bool required) {
    if (const toml::node* node = t.get(key)) {
      out = reader.string(*node, prefix + key);
      if (required && out.empty()) reader.fail(node->source(), prefix + key + " is empty");
    } else if (required) {
      reader.fail(t.source(), "missing '" + prefix + key + "' (a string)");
    }
  };
  text("id", p.id, true);
  text("title", p.title, false);
  text("source", p.source, true);
  text("url", p.url, false);
  text("measured_text", p.measured_text, true);
  text("assumptions", p.assumptions, false);
  std::string quantity, hardware, mode = "block", strategy = "fused_one_shot", phase = "prefill";
  text("quantity", quantity, true);
  text("hardware", hardware, true);
  const toml::node* quantity_node = t.get("quantity");
  try {
    p.quantity =
        parse_enum(kCalibrationQuantityNames, quantity, prefix + "quantity", "unknown quantity");
  } catch (const Error& error) {
    reader.fail(quantity_node->source(), error.what());
  }
  const toml::node* measured = t.get("measured");
  if (!measured) reader.fail(t.source(), "missing '" + prefix + "measured' (a number)");
  p.measured = reader.number(*measured, prefix + "measured");
  if (!std::isfinite(p.measured) || p.measured == 0 ||
      (p.quantity != CalibrationQuantity::throughput_change && p.measured < 0) ||
      (p.quantity == CalibrationQuantity::throughput_change &&
       !(p.measured > -1 && p.measured < 0))) {
    reader.fail(measured->source(),
                prefix + "measured must be " +
                    (p.quantity == CalibrationQuantity::throughput_change
                         ? std::string("a fraction in (-1, 0) (a throughput loss)")
                         : std::string("a positive number")) +
                    ", got " + format_number(p.measured));
  }
  p.hardware_name = hardware;
  try {
    p.hardware = load_hardware(hardware);
  } catch (const Error& error) {
    reader.fail(t.get("hardware")->source(), prefix + "hardware: " + error.what());
  }
  auto parse_with = [&](const char* key, std::string& value, auto parse) {
    const toml::node* node = t.get(key);
    if (node) value = reader.string(*node, prefix + key);
    try {
      parse(value, prefix + key);
    } catch (const Error& error) {
      reader.fail(node ? node->source() : t.source(), error.what());
    }
  };
  parse_with("mode", mode, [&](const std::string& v, const std::string& where) {
    p.mode = parse_residual_mode(v, where);
    if (p.mode != ResidualMode::block && p.mode != ResidualMode::full)
      throw Error(where + ": expected block or full, got '" + v + "'");
  });
  parse_with("strategy", strategy, [&](const std::string& v, const std::string& where) {
    p.strategy = parse_strategy(v, where);
  });
  parse_with("phase", phase, [&](const std::string& v, const std::string& where) {
    p.phase = parse_enum(kPhaseNames, v, where, "unknown phase");
  });
  if (const toml::node* node = t.get("fitted")) p.fitted = reader.boolean(*node, prefix + "fitted");
  auto integer = [&](const char* key, std::int64_t& out) {
    if (const toml::node* node = t.get(key)) out = reader.integer(*node, prefix + key);
  };
  CostInputs& in = p.inputs;
  integer("layers", in.layers);
  integer("sublayers", in.sublayers);
  integer("d_model", in.d_model);
  integer("blocks", in.blocks);
  integer("block_size", in.block_size);
  integer("block_layers", in.block_layers);
  integer("tokens", in.tokens);
  integer("batch", in.batch);
  integer("ffn", in.ffn);
  integer("sources", p.sources);
  if (const toml::node* node = t.get("block_sizes")) {
    if (!node->is_array()) reader.fail(node->source(), prefix + "block_sizes must be an array");
    for (const auto& item : *node->as_array())
      in.block_sizes.push_back(reader.integer(item, prefix + "block_sizes entry"));
  }
  if (const toml::node* node = t.get("dtype")) {
    try {
      in.dtype = parse_dtype(reader.string(*node, prefix + "dtype"), prefix + "dtype");
    } catch (const Error& error) {
      reader.fail(node->source(), error.what());
    }
  }
  if (const toml::table* moe = reader.table(t, "moe")) {
    reader.check_keys(*moe, prefix + "moe.", {"experts", "active", "shared", "expert_ffn"});
    auto moe_integer = [&](const char* key, std::int64_t& out) {
      if (const toml::node* node = moe->get(key))
        out = reader.integer(*node, prefix + "moe." + key);
    };
    moe_integer("experts", in.experts);
    moe_integer("active", in.active);
    moe_integer("shared", in.shared);
    moe_integer("expert_ffn", in.expert_ffn);
  }
  if (is_call(p.quantity)) {
    text("call", p.call, true);
    if (p.call != "fused_read" && p.call != "merge") {
      reader.fail(t.get("call")->source(),
                  prefix + "call: expected \"fused_read\" or \"merge\", got \"" + p.call + "\"");
    }
    if (p.sources < 1)
      reader.fail(t.source(), prefix + "sources must be >= 1 for a call_seconds point");
    if (in.d_model < 1 || in.batch < 1 || in.tokens < 1) {
      reader.fail(t.source(), prefix + "a call_seconds point needs d_model >= 1 and batch >= 1");
    }
  } else {
    if (t.get("call") || t.get("sources")) {
      reader.fail(t.source(), prefix + "call and sources apply to call_seconds points only");
    }
    if (auto problem = try_resolve_cost_inputs(in)) {
      reader.fail(t.source(), prefix + problem->field + ": " + problem->message);
    }
  }
  return p;
}

}  // namespace

CalibrationTable parse_calibration(const std::string& text, const std::string& source) {
  const detail::TomlReader reader(source);
  const toml::table root = reader.parse(text);
  reader.check_keys(root, "", {"point"});
  CalibrationTable table;
  table.source = source;
  const toml::node* points = root.get("point");
  if (!points || !points->is_array_of_tables()) {
    reader.fail(points ? points->source() : root.source(),
                "expected [[point]] tables (the calibration points)");
  }
  std::size_t index = 0;
  for (const auto& node : *points->as_array()) {
    CalibrationPoint point = read_point(reader, *node.as_table(), index++);
    for (const auto& earlier : table.points) {
      if (earlier.id == point.id) {
        reader.fail(node.as_table()->get("id")->source(),
                    "duplicate id \"" + point.id + "\" (first at " + earlier.location + ")");
      }
    }
    table.points.push_back(std::move(point));
  }
  return table;
}

CalibrationTable load_calibration(const std::string& path) {
  return parse_calibration(read_document(path, "a calibration .toml file"), path);
}

const std::string& builtin_calibration_text() {
  static const std::string text = kCalibrationTableText;
  return text;
}

CalibrationTable builtin_calibration() {
  return parse_calibration(builtin_calibration_text(), "public-measurements.toml");
}

std::vector<CalibrationRow> evaluate_calibration(const CalibrationTable& table) {
  std::vector<CalibrationRow> rows;
  for (const CalibrationPoint& p : table.points) {
    CalibrationRow row;
    row.point = p;
    const Hardware& hw = p.hardware;
    const int b = bytes_per_element(p.inputs.dtype);
    if (p.quantity == CalibrationQuantity::call_seconds) {
      const double tokens = p.phase == Phase::decode
                                ? static_cast<double>(p.inputs.batch)
                                : static_cast<double>(p.inputs.batch * p.inputs.tokens);
      // fused_read: the n sources in, output and newest-source store out; merge: phase-1
      // result, partial sum and new output in, output and partial sum out (docs/math.md §3.6).
      const std::int64_t vectors = p.call == "merge" ? 5 : p.sources + 2;
      const double bytes =
          static_cast<double>(vectors) * static_cast<double>(p.inputs.d_model) * tokens * b;
      row.modelled = call_seconds(bytes, hw);
      const bool floor = bytes / (hw.hbm_bandwidth * hw.memory_efficiency) <= hw.kernel_floor;
      row.regime = floor ? "floor-bound" : "bandwidth-bound";
      row.detail = std::to_string(vectors) + " vectors x d = " + std::to_string(p.inputs.d_model) +
                   " x " + format_number(tokens) + " tokens x " + std::to_string(b) +
                   " B = " + format_number(bytes) + " bytes; crossover at " +
                   format_number(std::round(crossover_tokens(vectors, p.inputs.d_model, b, hw))) +
                   " tokens";
    } else {
      const bool decode = p.quantity == CalibrationQuantity::decode_overhead_max;
      const StrategyStep step = strategy_step(p.strategy, p.mode, p.inputs,
                                              decode ? Phase::decode : p.phase, !decode, hw);
      row.modelled = p.quantity == CalibrationQuantity::throughput_change
                         ? 1 / (1 + step.overhead_fraction) - 1
                         : step.overhead_fraction;
      const std::int64_t launches = step.forward.launches + step.backward.launches;
      const std::int64_t floor = step.forward.floor_bound + step.backward.floor_bound;
      row.regime =
          std::to_string(launches) + " launches, " + std::to_string(floor) + " at the floor";
      row.detail = "mechanism " + format_number(step.forward.seconds + step.backward.seconds) +
                   " s (standard adds " +
                   format_number(step.standard_forward.seconds + step.standard_backward.seconds) +
                   " s) against the model's " + format_number(step.model_seconds) + " s";
    }
    row.bound = p.quantity == CalibrationQuantity::step_overhead_max ||
                p.quantity == CalibrationQuantity::decode_overhead_max;
    row.ratio = row.modelled / p.measured;
    row.within = row.bound && row.modelled <= p.measured;
    rows.push_back(std::move(row));
  }
  return rows;
}

CalibrationError calibration_error(const std::vector<CalibrationRow>& rows) {
  CalibrationError error;
  double log_sum = 0;
  for (const auto& row : rows) {
    if (row.bound || row.point.fitted || !(row.ratio > 0)) continue;
    const double factor = std::max(row.ratio, 1 / row.ratio);
    log_sum += std::log(factor);
    ++error.points;
    if (factor > error.worst_factor) {
      error.worst_factor = factor;
      error.worst_id = row.point.id;
    }
  }
  if (error.points > 0) error.typical_factor = std::exp(log_sum / error.points);
  return error;
}

}  // namespace attnres
