// The named outputs of the cost engine: one catalogue that gives the JSON keys of
// `attnres cost --format json` and of reports, the CSV columns, and the metrics a sweep can plot.
// A metric key is a JSON path, e.g. "io_elements_per_sublayer.block_two_phase".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnres/cost.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

// What a metric is computed from: the cost engine always; the time model (prefill and decode)
// when a scenario names hardware; the pipeline simulation when it has a [pipeline] table; memory
// per rank (docs/math.md §3.7) when it is asked for (memory.* metrics, the memory section).
struct Evaluation {
  const CostReport* cost = nullptr;
  const StackTime* prefill = nullptr;
  const StackTime* decode = nullptr;
  const PipelineReport* pipeline = nullptr;
  const std::vector<RankMemory>* memory = nullptr;
};

struct CostMetric {
  enum class Needs { cost, time, pipeline, memory };
  std::string key;          // JSON path "group.name"
  std::string unit;         // "elements/token/sublayer", "bytes", "vectors/token", ...
  std::string description;  // one line, with the formula's source
  double (*value)(const Evaluation&);
  Needs needs = Needs::cost;
};

const std::vector<CostMetric>& cost_metrics();
// "Block AttnRes (two-phase)", "per device, chunked", ...: a series name for charts.
std::string cost_metric_label(const std::string& key);
// "residual I/O per sublayer (x d)": an axis title for the metric's group, with its unit.
std::string cost_metric_axis(const std::string& key);

// nullptr when unknown.
const CostMetric* find_cost_metric(const std::string& key);
// The closest known keys to `key` (for "did you mean").
std::string closest_cost_metric(const std::string& key);

// A metric's value as JSON: an integer where the unit counts whole things (vectors, blocks,
// sublayers, bytes) and the value is whole, null when not finite, else the number.
nlohmann::json metric_json_value(const CostMetric& metric, double value);
// Every metric the evaluation can give, at its JSON path.
nlohmann::json evaluation_to_json(const Evaluation& evaluation);

// Every cost metric at its JSON path, plus "inputs" (the resolved inputs), "conventions" (units),
// "pipeline_comm_elements_per_token.boundaries" (the exact per-boundary list) and "schemes" (every
// named scheme, as scheme_cost_to_json).
nlohmann::json cost_report_to_json(const CostReport& report);
nlohmann::json cost_inputs_to_json(const CostInputs& inputs);
// A hardware preset's figures and efficiencies (docs/json.md §4), the same in every output.
nlohmann::json hardware_to_json(const Hardware& hardware);
// Memory per rank (rank_memory.hpp, docs/json.md): "per_rank" is the largest rank as
// {rank, weights_bytes, gradients_bytes, optimizer_bytes, activations_bytes,
// attnres_history_bytes, kv_cache_bytes, total_bytes, capacity_bytes (null: unknown), margin_bytes,
// fits (null: unknown), verdict}, "ranks" every rank the same way, "assumptions" the lines.
nlohmann::json memory_to_json(const std::vector<RankMemory>& ranks,
                              const std::vector<std::string>& assumptions = {});
// A pipeline simulation's settings beyond the model and hardware: mode, microbatches, schedule,
// cache, link, link bandwidth override (null: the hardware's), overlap, ideal links.
nlohmann::json pipeline_settings_to_json(const PipelineSettings& settings);
// The step's parts (AttnRes and standard), the three overheads with the step's split, the stage
// layout and its warnings (docs/json.md): `attnres pipeline --format json`'s "step".
nlohmann::json step_to_json(const PipelineReport& pipeline);
// Everything that changes a result, as every output's "inputs" holds it (docs/json.md §4):
// "model" (cost_inputs_to_json: sizes, architecture, MoE and parallel degrees), and where they
// are set "hardware", "moe" (version 1's copy of the MoE shape, with experts) and "pipeline".
nlohmann::json inputs_to_json(const CostInputs& model, const Hardware* hardware,
                              const PipelineSettings* pipeline);
// One scheme's costs (docs/scheme-costs.md): spec, description, io_elements_per_sublayer {reads,
// writes, total, multiples_of_d, formula, schedule}, io_one_shot_elements_per_sublayer, history,
// params, mixing_flops, two_phase {applies, reason}. `cost_report_to_json` lists every named
// scheme this way under "schemes".
nlohmann::json scheme_cost_to_json(const SchemeCost& cost, std::int64_t d_model);

}  // namespace attnres
