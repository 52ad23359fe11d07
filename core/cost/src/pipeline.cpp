#include "attnres/pipeline.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/error.hpp"
#include "attnres/format.hpp"

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
  const double attention = attention_cost(in, Phase::prefill, s.hardware).seconds;
  const double mlp = mlp_cost(in, s.moe, Phase::prefill, s.hardware).seconds;
  const double residual = residual_cost(in, scheme, Phase::prefill, s.hardware).seconds;
  const double tokens = static_cast<double>(in.batch) * static_cast<double>(in.tokens);
  const double b = bytes_per_element(in.dtype);
  const double vector_bytes = static_cast<double>(in.d_model) * tokens * b;
  const double activation_per_sublayer =
      17.0 * tokens * static_cast<double>(in.d_model) * (b / 2.0);

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
    double forward = 0;
    for (std::int64_t sublayer = first; sublayer <= last[static_cast<std::size_t>(c)]; ++sublayer) {
      forward += (sublayer % 2 == 1 ? attention : mlp) + residual;  // odd sublayers are attention
    }
    sim.forward_seconds.push_back(forward);
    sim.backward_seconds.push_back(2.0 * forward);
    sim.activation_bytes.push_back(
        activation_per_sublayer *
        static_cast<double>(last[static_cast<std::size_t>(c)] - first + 1));
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

std::optional<CostInputProblem> moe_problem(const MoeShape& moe) {
  if (moe.experts < 0)
    return CostInputProblem{
        "experts", "experts must be >= 0 (0: a dense MLP), got " + std::to_string(moe.experts)};
  if (moe.experts == 0) return std::nullopt;
  if (moe.active < 1 || moe.active > moe.experts) {
    return CostInputProblem{"active", "active experts must be between 1 and the " +
                                          std::to_string(moe.experts) + " experts, got " +
                                          std::to_string(moe.active)};
  }
  if (moe.shared < 0)
    return CostInputProblem{"shared",
                            "shared experts must be >= 0, got " + std::to_string(moe.shared)};
  if (moe.expert_ffn < 1) {
    return CostInputProblem{"expert_ffn", "the expert SwiGLU width must be >= 1, got " +
                                              std::to_string(moe.expert_ffn)};
  }
  return std::nullopt;
}

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
  return moe_problem(s.moe);
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
  report.chunk_forward_seconds = attnres.forward_seconds;
  report.boundary_bytes = attnres.boundary_bytes;
  return report;
}

}  // namespace attnres
