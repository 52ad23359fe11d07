#include "attnres/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "attnres/architecture.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/rank_memory.hpp"

namespace attnres {

std::string to_string(CachePolicy policy) {
  return enum_name(kCachePolicyNames, policy);
}

CachePolicy parse_cache_policy(const std::string& text, const std::string& where) {
  return parse_enum(kCachePolicyNames, text, where, "unknown cache policy");
}

namespace {

std::int64_t sent_vectors(const BoundaryPayload& b, CachePolicy policy) {
  switch (policy) {
    case CachePolicy::naive:
      return b.naive_vectors;
    case CachePolicy::cached:
      return b.cached_vectors;
    case CachePolicy::cached_own:
      return b.cached_own_vectors;
  }
  return 0;
}

PipelineSimInputs simulation_inputs(const PipelineSettings& s, ResidualMode mode,
                                    double bandwidth) {
  const CostInputs& in = s.model;
  const int P = static_cast<int>(in.pp), V = static_cast<int>(in.vpp), C = P * V;
  const ResidualScheme scheme = mode == ResidualMode::standard ? ResidualScheme::standard
                                : mode == ResidualMode::full   ? ResidualScheme::full_two_phase
                                                               : ResidualScheme::block_two_phase;
  // Per-sublayer roofline times of one micro-batch, each rank doing 1/(t·c) of the work (tensor
  // and context parallelism split it); the residual mechanism works per token on the rank's
  // share of the sequence.
  const double share = 1.0 / static_cast<double>(in.tp * in.cp);
  const double residual = residual_cost(in, scheme, Phase::prefill, s.hardware).seconds * share;
  std::array<double, kAttentionKindNames.size()> attention{};
  for (const auto& [kind, name] : kAttentionKindNames) {
    if (count_attention_layers(in, kind) > 0)
      attention[static_cast<std::size_t>(kind)] =
          attention_cost(in, Phase::prefill, s.hardware, kind).seconds * share;
  }
  const double dense_mlp = mlp_cost(in, false, Phase::prefill, s.hardware).seconds * share;
  const double moe_mlp =
      in.experts > 0 ? mlp_cost(in, true, Phase::prefill, s.hardware).seconds * share : 0.0;
  const double b = bytes_per_element(in.dtype);
  const double vector_bytes = static_cast<double>(in.d_model) * local_tokens(in, true) * b;

  PipelineSimInputs sim;
  sim.ranks = P;
  sim.virtual_stages = V;
  sim.microbatches = s.microbatches;
  sim.schedule = s.schedule;
  sim.link_bandwidth = bandwidth * s.hardware.link_efficiency;
  sim.link_latency = s.hardware.link_latency;
  sim.ideal_links = s.ideal_links;
  sim.overlap = s.overlap;
  sim.record_timeline = s.record_timeline;
  sim.progress = s.progress;
  const auto last = chunk_last_sublayers(in.sublayers, C);
  for (int c = 0; c < C; ++c) {
    const std::int64_t first = c == 0 ? 1 : last[static_cast<std::size_t>(c - 1)] + 1;
    double forward = 0, activations = 0;
    for (std::int64_t sublayer = first; sublayer <= last[static_cast<std::size_t>(c)]; ++sublayer) {
      const std::int64_t layer = (sublayer + 1) / 2;
      forward += residual + (sublayer % 2 == 1
                                 ? attention[static_cast<std::size_t>(layer_attention(in, layer))]
                                 : (layer_is_moe(in, layer) ? moe_mlp : dense_mlp));
      activations += sublayer_activation_bytes(in, sublayer);
    }
    sim.forward_seconds.push_back(forward);
    // Backward is twice the forward; full recompute runs the forward again first.
    sim.backward_seconds.push_back((in.recompute == RecomputePolicy::full ? 3.0 : 2.0) * forward);
    sim.activation_bytes.push_back(activations);
  }
  const auto boundaries = pipeline_boundaries(mode, in.sublayers, in.block_size, in.pp, in.vpp);
  sim.history_bytes.assign(static_cast<std::size_t>(C), 0.0);
  for (const auto& boundary : boundaries) {
    const double bytes = static_cast<double>(sent_vectors(boundary, s.cache)) * vector_bytes;
    sim.boundary_bytes.push_back(bytes);
    if (mode != ResidualMode::standard) {
      sim.history_bytes[static_cast<std::size_t>(boundary.to_chunk)] = bytes;
    }
  }
  return sim;
}

}  // namespace

std::optional<CostInputProblem> pipeline_settings_problem(const PipelineSettings& s) {
  if (s.mode == ResidualMode::standard) {
    return CostInputProblem{"mode",
                            "mode must be block or full (the standard residual is the comparison)"};
  }
  if (s.microbatches < 1 || s.microbatches > kMaxMicrobatches) {
    return CostInputProblem{"microbatches", "micro-batches m must be between 1 and " +
                                                std::to_string(kMaxMicrobatches) + ", got " +
                                                std::to_string(s.microbatches)};
  }
  // The pairs the simulation places, m x P·V, counted in double: unresolved P and V may be large.
  const double pairs = static_cast<double>(std::max<std::int64_t>(1, s.model.pp)) *
                       static_cast<double>(std::max<std::int64_t>(1, s.model.vpp)) *
                       static_cast<double>(s.microbatches);
  if (pairs > static_cast<double>(kMaxPipelinePairs)) {
    auto megabytes = [](double count) {
      return format_number(std::round(count * static_cast<double>(kPipelineBytesPerPair) / 1e6)) +
             " MB";
    };
    return CostInputProblem{
        "microbatches", "m x P·V = " + std::to_string(s.microbatches) + " x " +
                            format_number(pairs / s.microbatches) + " = " + format_number(pairs) +
                            " (micro-batch, chunk) pairs would take about " + megabytes(pairs) +
                            " to simulate; at most " + std::to_string(kMaxPipelinePairs) +
                            " pairs (about " + megabytes(static_cast<double>(kMaxPipelinePairs)) +
                            "): use fewer micro-batches, ranks or virtual stages"};
  }
  if (s.schedule == PipelineSchedule::one_f_one_b && s.model.vpp > 1) {
    return CostInputProblem{
        "schedule",
        "the 1f1b schedule runs one stage per rank (V = 1); use the interleaved schedule "
        "with V = " +
            std::to_string(s.model.vpp)};
  }
  if (s.link_bandwidth < 0 || std::isnan(s.link_bandwidth)) {
    return CostInputProblem{"link_bandwidth",
                            "the link bandwidth must be > 0 (or ideal links for free transfers)"};
  }
  return std::nullopt;
}

PipelineSchedule default_pipeline_schedule(std::int64_t vpp) {
  return vpp > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
}

PipelineReport evaluate_pipeline(const PipelineSettings& s) {
  if (const auto problem = pipeline_settings_problem(s))
    throw Error("pipeline: " + problem->message);
  PipelineReport report;
  report.settings = s;
  report.link_bandwidth = s.link_bandwidth > 0 ? s.link_bandwidth
                          : s.intra_node_link  ? s.hardware.intra_node_bandwidth
                                               : s.hardware.scale_out_bandwidth;
  if (!s.ideal_links && s.model.pp > 1 && !(report.link_bandwidth > 0)) {
    throw Error("pipeline: link bandwidth must be > 0 (or use ideal links)");
  }
  const PipelineSimInputs attnres = simulation_inputs(s, s.mode, report.link_bandwidth);
  report.attnres = simulate_pipeline(attnres);
  PipelineSimInputs standard = simulation_inputs(s, ResidualMode::standard, report.link_bandwidth);
  standard.record_timeline = false;
  report.standard = simulate_pipeline(standard);
  PipelineSimInputs free_links = attnres;
  free_links.ideal_links = true;
  free_links.record_timeline = false;
  report.ideal_links_seconds = simulate_pipeline(free_links).iteration_seconds;

  report.iteration_time_s = report.attnres.iteration_seconds;
  report.bubble_fraction = report.attnres.bubble_fraction;
  report.exposed_comm_s = report.iteration_time_s - report.ideal_links_seconds;
  report.attnres_overhead_fraction =
      report.iteration_time_s / report.standard.iteration_seconds - 1.0;
  report.peak_memory_bytes_per_rank = *std::max_element(report.attnres.peak_memory_bytes.begin(),
                                                        report.attnres.peak_memory_bytes.end());
  report.closed_form_bubble = closed_form_bubble(s.schedule, static_cast<int>(s.model.pp),
                                                 static_cast<int>(s.model.vpp), s.microbatches);
  MemorySettings memory;
  memory.microbatches = s.microbatches;
  memory.schedule = s.schedule;
  memory.mode = s.mode;
  memory.strategy = s.strategy;
  memory.capacity_bytes = s.hardware.memory_bytes;
  report.memory = memory_per_rank(s.model, memory);
  for (std::size_t r = 0; r < report.memory.size(); ++r) {
    const double activations = report.attnres.peak_activation_bytes[r];
    report.memory[r].activations = activations;
    report.memory[r].attnres_history = report.attnres.peak_memory_bytes[r] - activations;
  }
  report.chunk_forward_seconds = attnres.forward_seconds;
  report.boundary_bytes = attnres.boundary_bytes;
  return report;
}

}  // namespace attnres
