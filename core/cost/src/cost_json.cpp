// The JSON objects every output shares (cost_metrics.hpp, docs/json.md): the inputs (model,
// hardware, pipeline settings), memory per rank, the simulated step, the cost report and a
// scheme's costs. The metric catalogue and its JSON paths are in cost_metrics.cpp.
#include <cmath>

#include "attnres/cost_input_fields.hpp"
#include "attnres/cost_metrics.hpp"

namespace attnres {

using nlohmann::json;

json cost_inputs_to_json(const CostInputs& in) {
  json inputs = json::object();
  for (const auto& field : cost_input_fields())
    inputs[std::string(field.key)] = cost_input_value(in, field);
  for (const auto& choice : cost_input_choices()) inputs[std::string(choice.key)] = choice.get(in);
  inputs["bytes_per_element"] = bytes_per_element(in.dtype);
  for (const auto& list : cost_input_lists()) inputs[std::string(list.key)] = in.*list.member;
  return inputs;
}

json hardware_to_json(const Hardware& h) {
  return {{"name", h.name},
          {"source", h.source},
          {"peak_flop_per_second", h.peak_flops},
          {"hbm_bandwidth_bytes_per_second", h.hbm_bandwidth},
          {"intra_node_bandwidth_bytes_per_second", h.intra_node_bandwidth},
          {"scale_out_bandwidth_bytes_per_second", h.scale_out_bandwidth},
          {"link_latency_seconds", h.link_latency},
          {"kernel_floor_seconds", h.kernel_floor},
          {"gpus_per_node", h.gpus_per_node},
          {"memory_bytes", h.memory_bytes > 0 ? json(h.memory_bytes) : json(nullptr)},
          {"compute_efficiency_fraction", h.compute_efficiency},
          {"memory_efficiency_fraction", h.memory_efficiency},
          {"link_efficiency_fraction", h.link_efficiency}};
}

json memory_to_json(const std::vector<RankMemory>& ranks,
                    const std::vector<std::string>& assumptions) {
  auto rank_json = [](const RankMemory& m) {
    const bool known = m.known_capacity();
    return json{{"rank", m.rank},
                {"weights_bytes", m.weights},
                {"gradients_bytes", m.gradients},
                {"optimizer_bytes", m.optimizer},
                {"activations_bytes", m.activations},
                {"attnres_history_bytes", m.attnres_history},
                {"kv_cache_bytes", m.kv_cache},
                {"logits_bytes", m.logits},
                {"reserve_bytes", m.reserve},
                {"tensors_bytes", m.tensors()},
                {"total_bytes", m.total()},
                {"headroom_bytes", m.headroom},
                {"capacity_bytes", known ? json(m.capacity) : json(nullptr)},
                {"margin_bytes", known ? json(m.margin()) : json(nullptr)},
                {"capacity_fraction", known ? json(m.total() / m.capacity) : json(nullptr)},
                {"fits", known ? json(m.fits()) : json(nullptr)},
                {"verdict", fit_verdict(m)},
                {"parameters", m.parameters},
                {"sublayers", m.sublayers},
                {"in_flight_microbatches", m.in_flight}};
  };
  json out = json::object();
  json all = json::array();
  const RankMemory* worst = nullptr;
  for (const RankMemory& m : ranks) {
    all.push_back(rank_json(m));
    if (!worst || m.total() > worst->total()) worst = &m;
  }
  out["per_rank"] = worst ? rank_json(*worst) : json(nullptr);
  out["ranks"] = all;
  out["assumptions"] = assumptions;
  return out;
}

json pipeline_settings_to_json(const PipelineSettings& p) {
  return {{"mode", to_string(p.mode)},
          {"microbatches", p.microbatches},
          {"schedule", to_string(p.schedule)},
          {"cache", to_string(p.cache)},
          {"link", enum_name(kPipelineLinkNames, p.link)},
          {"link_intra_node", pipeline_link_intra_node(p)},
          {"link_bandwidth_bytes_per_second",
           p.link_bandwidth > 0 ? json(p.link_bandwidth) : json(nullptr)},
          {"overlap", p.overlap},
          {"overlap_comm", to_string(p.comm_overlap)},
          {"strategy", to_string(p.strategy)},
          {"ideal_links", p.ideal_links},
          {"reserve_bytes", p.allowance.runtime_bytes},
          {"fragmentation", p.allowance.fragmentation},
          {"margin_bytes", p.allowance.margin_bytes}};
}

json step_to_json(const PipelineReport& p) {
  auto parts = [](const StepParts& s) {
    return json{{"rank", s.rank},
                {"attention_mlp_seconds", s.attention_mlp},
                {"residual_seconds", s.residual},
                {"tp_seconds", s.tp},
                {"cp_seconds", s.cp},
                {"ep_seconds", s.ep},
                {"bubble_seconds", s.bubble},
                {"pp_seconds", s.pp},
                {"dp_seconds", s.dp},
                {"step_seconds", s.total()}};
  };
  const StepReconciliation& r = p.reconciliation;
  json out = {{"attnres", parts(p.step_attnres)},
              {"standard", parts(p.step_standard)},
              {"overhead_fraction",
               {{"time_model", r.time_model},
                {"strategies", r.strategy},
                {"step", r.step},
                {"step_parts",
                 {{"residual", r.residual},
                  {"pp", r.pp},
                  {"bubble", r.bubble},
                  {"dp", r.dp},
                  {"other", r.other}}}}},
              {"stage_last_sublayers", stage_last_sublayers(p.settings.model)},
              {"warnings", json::array()}};
  if (!p.stage_warning.empty()) out["warnings"].push_back(p.stage_warning);
  return out;
}

json inputs_to_json(const CostInputs& model, const Hardware* hardware,
                    const PipelineSettings* pipeline) {
  json inputs = {{"model", cost_inputs_to_json(model)}};
  if (hardware) inputs["hardware"] = hardware_to_json(*hardware);
  // Version 1's MoE object, kept beside model's experts, active, shared and expert_ffn.
  if (model.experts > 0) {
    inputs["moe"] = {{"experts", model.experts},
                     {"active_experts", model.active},
                     {"shared_experts", model.shared},
                     {"expert_ffn", model.expert_ffn}};
  }
  if (pipeline) inputs["pipeline"] = pipeline_settings_to_json(*pipeline);
  return inputs;
}

json cost_report_to_json(const CostReport& report) {
  json root;
  root["inputs"] = {{"model", cost_inputs_to_json(report.inputs)}};
  root["conventions"] = {
      {"elements", "vector elements per token; multiply by B·T·b for bytes"},
      {"io",
       "residual mechanism only, per token per sublayer (paper Table 1); I/O inside f_l excluded"},
      {"pipeline", "per token, one direction, forward; backward sends the same per boundary"},
      {"gb", "decimal, 1e9 bytes"},
      {"gib", "binary, 2^30 bytes"}};
  const Evaluation evaluation{&report, nullptr, nullptr, nullptr};
  for (const auto& metric : cost_metrics()) {
    if (metric.needs != CostMetric::Needs::cost) continue;
    const auto dot = metric.key.find('.');
    root[metric.key.substr(0, dot)][metric.key.substr(dot + 1)] =
        metric_json_value(metric, metric.value(evaluation));
  }
  json boundaries = json::array();
  for (const auto& b : report.boundaries) {
    boundaries.push_back({{"from_chunk", b.from_chunk},
                          {"to_chunk", b.to_chunk},
                          {"from_rank", b.from_rank},
                          {"to_rank", b.to_rank},
                          {"last_sublayer", b.last_sublayer},
                          {"completed_blocks", b.completed_blocks},
                          {"partial", b.partial},
                          {"naive_vectors", b.naive_vectors},
                          {"cached_vectors", b.cached_vectors},
                          {"cached_own_vectors", b.cached_own_vectors},
                          {"naive_elements", b.naive_vectors * report.inputs.d_model},
                          {"cached_elements", b.cached_vectors * report.inputs.d_model}});
  }
  root["pipeline_comm_elements_per_token"]["boundaries"] = boundaries;
  // Every named scheme in full (docs/scheme-costs.md).
  json schemes = json::object();
  for (const auto& name : scheme_names()) {
    schemes[name] = scheme_cost_to_json(
        scheme_cost(named_scheme(name, report.inputs), report.inputs), report.inputs.d_model);
  }
  root["schemes"] = schemes;
  return root;
}

json scheme_cost_to_json(const SchemeCost& c, std::int64_t d_model) {
  const double d = static_cast<double>(d_model);
  auto io = [d](const ResidualIo& row, const std::string& formula) {
    return json{{"reads", row.reads},
                {"writes", row.writes},
                {"total", row.total()},
                {"multiples_of_d", row.total() / d},
                {"formula", formula}};
  };
  json out = {{"spec", c.spec},
              {"description", c.description},
              {"io_elements_per_sublayer", io(c.io, c.io_formula)},
              {"io_one_shot_elements_per_sublayer", io(c.io_one_shot, c.io_one_shot_formula)},
              {"history",
               {{"vectors_per_token", c.history_vectors},
                {"bytes_per_token", c.history_bytes},
                {"formula", c.history_formula}}},
              {"params", {{"count", c.params}, {"formula", c.params_formula}}},
              {"mixing_flops",
               {{"per_token", c.mixing_flops},
                {"per_token_per_sublayer", c.mixing_flops_per_sublayer},
                {"formula", c.flops_formula}}},
              {"two_phase", {{"applies", c.two_phase}, {"reason", c.two_phase_reason}}}};
  out["io_elements_per_sublayer"]["schedule"] = c.io_schedule;
  return out;
}

}  // namespace attnres
