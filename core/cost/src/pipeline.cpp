#include "attnres/pipeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "attnres/architecture.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/rank_memory.hpp"
#include "attnres/strategy.hpp"
#include "attnres/time_model.hpp"

namespace attnres {

std::string to_string(CachePolicy policy) {
  return enum_name(kCachePolicyNames, policy);
}

CachePolicy parse_cache_policy(const std::string& text, const std::string& where) {
  return parse_enum(kCachePolicyNames, text, where, "unknown cache policy");
}

namespace {

// One micro-batch's times on chunk c: attention and MLP, the residual mechanism, and the
// exposed tensor-, context- and expert-parallel collectives, forward and backward.
struct ChunkTimes {
  double model_forward = 0, model_backward = 0;
  double residual_forward = 0, residual_backward = 0;
  double comm_forward[3] = {}, comm_backward[3] = {};  // tp, cp, ep exposed
  double forward() const {
    return model_forward + residual_forward + comm_forward[0] + comm_forward[1] + comm_forward[2];
  }
  double backward() const {
    return model_backward + residual_backward + comm_backward[0] + comm_backward[1] +
           comm_backward[2];
  }
};

constexpr CommGroup kChunkGroups[] = {CommGroup::tp, CommGroup::cp, CommGroup::ep};

std::vector<ChunkTimes> chunk_times(const PipelineSettings& s, ResidualMode mode) {
  const CostInputs& in = s.model;
  const Hardware& hw = s.hardware;
  const auto last = stage_last_sublayers(in);
  const std::size_t C = last.size();
  auto chunk_of = [&](std::int64_t sublayer) {
    return static_cast<std::size_t>(std::lower_bound(last.begin(), last.end(), sublayer) -
                                    last.begin());
  };
  // Attention and MLP: per-sublayer roofline times of one micro-batch, each rank doing 1/(t·c)
  // of the work (tensor and context parallelism split it).
  const double share = 1.0 / static_cast<double>(in.tp * in.cp);
  std::array<double, kAttentionKindNames.size()> attention{}, scores{};
  for (const auto& [kind, name] : kAttentionKindNames) {
    if (count_attention_layers(in, kind) == 0) continue;
    const auto k = static_cast<std::size_t>(kind);
    attention[k] = attention_cost(in, Phase::prefill, hw, kind).seconds * share;
    // The attention-score part of its FLOPs, which selective recompute runs again.
    const double all = attention_flops_per_token(in, kind, static_cast<double>(in.tokens) / 2.0);
    const double projections = attention_flops_per_token(in, kind, 0.0);
    scores[k] = all > 0 ? attention[k] * (all - projections) / all : 0.0;
  }
  const double dense_mlp = mlp_cost(in, false, Phase::prefill, hw).seconds * share;
  const double moe_mlp =
      in.experts > 0 ? mlp_cost(in, true, Phase::prefill, hw).seconds * share : 0.0;
  const double again = in.recompute == RecomputePolicy::full ? 1.0 : 0.0;
  std::vector<ChunkTimes> out(C);
  std::vector<SublayerComm> comm(C);
  for (std::int64_t sublayer = 1; sublayer <= in.sublayers; ++sublayer) {
    const std::size_t c = chunk_of(sublayer);
    const std::int64_t layer = (sublayer + 1) / 2;
    double forward = 0, score = 0;
    if (sublayer % 2 == 1) {
      const auto k = static_cast<std::size_t>(layer_attention(in, layer));
      forward = attention[k];
      score = scores[k];
    } else {
      forward = layer_is_moe(in, layer) ? moe_mlp : dense_mlp;
    }
    out[c].model_forward += forward;
    // Backward is twice the forward; full recompute runs the forward again first, selective
    // recompute the attention scores.
    out[c].model_backward += (kBackwardFlopsPerForward + again) * forward +
                             (in.recompute == RecomputePolicy::selective ? score : 0.0);
    const SublayerComm one = sublayer_communication(in, sublayer);
    for (const CommGroup g : kChunkGroups) {
      comm[c].of(g).forward += one.of(g).forward;
      comm[c].of(g).backward += one.of(g).backward;
    }
  }
  // The residual mechanism on the rank's share of the tokens (÷ t with sequence parallelism):
  // the strategy's kernels of the reads each chunk runs (read r forms the input of sublayer
  // r + 1; the last read, the output, runs on the last chunk), or the standard residual's adds.
  const double tokens = local_tokens(in, true);
  const int b = bytes_per_element(in.dtype);
  if (mode == ResidualMode::standard) {
    for (std::size_t c = 0; c < C; ++c) {
      const std::int64_t first = c == 0 ? 1 : last[c - 1] + 1;
      const CallTime adds =
          calls_time(standard_residual_calls(last[c] - first + 1), in.d_model, tokens, b, hw);
      out[c].residual_forward = adds.seconds;
      out[c].residual_backward = (1.0 + again) * adds.seconds;
    }
  } else {
    const StrategyCost cost =
        strategy_cost(s.strategy, mode_layout(mode, in), mode_groups(mode, in));
    auto per_chunk = [&](const std::vector<KernelCall>& calls) {
      std::vector<std::vector<KernelCall>> split(C);
      for (const KernelCall& call : calls)
        split[call.read >= in.sublayers ? C - 1
                                        : chunk_of(std::max<std::int64_t>(call.read, 0) + 1)]
            .push_back(call);
      std::vector<double> seconds(C);
      for (std::size_t c = 0; c < C; ++c)
        seconds[c] = calls_time(split[c], in.d_model, tokens, b, hw).seconds;
      return seconds;
    };
    const auto forward = per_chunk(cost.forward_calls);
    const auto backward = per_chunk(cost.backward_calls);
    for (std::size_t c = 0; c < C; ++c) {
      out[c].residual_forward = forward[c];
      out[c].residual_backward = backward[c] + again * forward[c];
    }
  }
  // Collectives: an exposed group adds its time; a hidden one what exceeds the chunk's compute.
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t g = 0; g < 3; ++g) {
      const CommGroup group = kChunkGroups[g];
      const double f = collective_seconds(in, hw, group, comm[c].of(group).forward);
      const double w = collective_seconds(in, hw, group, comm[c].of(group).backward);
      const bool hidden = s.comm_overlap.of(group);
      out[c].comm_forward[g] = hidden ? std::max(0.0, f - out[c].model_forward) : f;
      out[c].comm_backward[g] = hidden ? std::max(0.0, w - out[c].model_backward) : w;
    }
  }
  return out;
}

PipelineSimInputs simulation_inputs(const PipelineSettings& s, ResidualMode mode,
                                    const std::vector<ChunkTimes>& times, double bandwidth) {
  const CostInputs& in = s.model;
  const int C = static_cast<int>(in.pp * in.vpp);
  const double b = bytes_per_element(in.dtype);
  const double vector_bytes = static_cast<double>(in.d_model) * local_tokens(in, true) * b;

  PipelineSimInputs sim;
  sim.ranks = static_cast<int>(in.pp);
  sim.virtual_stages = static_cast<int>(in.vpp);
  sim.microbatches = s.microbatches;
  sim.schedule = s.schedule;
  sim.link_bandwidth = bandwidth * s.hardware.link_efficiency;
  sim.link_latency = s.hardware.link_latency;
  sim.ideal_links = s.ideal_links;
  sim.overlap = s.overlap;
  sim.record_timeline = s.record_timeline;
  sim.progress = s.progress;
  // What each chunk holds per micro-batch: the one memory model's terms (rank_memory.hpp).
  MemorySettings memory = memory_settings(s);
  memory.mode = mode;
  const std::vector<ChunkMemory> held = chunk_memory(in, memory);
  for (int c = 0; c < C; ++c) {
    sim.forward_seconds.push_back(times[static_cast<std::size_t>(c)].forward());
    sim.backward_seconds.push_back(times[static_cast<std::size_t>(c)].backward());
    sim.activation_bytes.push_back(held[static_cast<std::size_t>(c)].activations);
    sim.history_bytes.push_back(held[static_cast<std::size_t>(c)].attnres);
  }
  for (const auto& boundary : pipeline_boundaries(in, mode))
    sim.boundary_bytes.push_back(static_cast<double>(sent_vectors(boundary, s.cache)) *
                                 vector_bytes);
  return sim;
}

// The step of one run: simulated with the links and with free links, the busiest rank's parts,
// and the exposed gradient collectives.
struct SimulatedStep {
  PipelineSimInputs inputs;  // chunk times and boundary payloads as simulated
  PipelineSimResult result;
  double free_links_seconds = 0;
  StepParts parts;
};

SimulatedStep simulate_step(const PipelineSettings& s, ResidualMode mode, double bandwidth,
                            bool timeline) {
  const CostInputs& in = s.model;
  const auto times = chunk_times(s, mode);
  PipelineSimInputs sim = simulation_inputs(s, mode, times, bandwidth);
  sim.record_timeline = timeline;
  SimulatedStep out;
  out.result = simulate_pipeline(sim);
  out.inputs = sim;
  PipelineSimInputs free_links = sim;
  free_links.ideal_links = true;
  free_links.record_timeline = false;
  out.free_links_seconds = simulate_pipeline(free_links).iteration_seconds;
  // The busiest rank: the most compute over its chunks.
  const double m = s.microbatches;
  const std::int64_t P = in.pp, C = in.pp * in.vpp;
  // The gradient collectives, once per step (the same on every rank).
  double dp = 0;
  for (const CommTerm& term : step_communication(in, s.hardware, s.microbatches, mode))
    if (term.group == "dp") dp += term.seconds;
  double most = -1;
  for (std::int64_t rank = 0; rank < P; ++rank) {
    StepParts p;
    p.rank = static_cast<int>(rank);
    double last_backward = 0;  // one micro-batch's backward over the rank's chunks
    for (std::int64_t c = rank; c < C; c += P) {
      const ChunkTimes& t = times[static_cast<std::size_t>(c)];
      p.attention_mlp += (t.model_forward + t.model_backward) * m;
      p.residual += (t.residual_forward + t.residual_backward) * m;
      p.tp += (t.comm_forward[0] + t.comm_backward[0]) * m;
      p.cp += (t.comm_forward[1] + t.comm_backward[1]) * m;
      p.ep += (t.comm_forward[2] + t.comm_backward[2]) * m;
      last_backward += t.backward();
    }
    if (p.compute() > most) {
      most = p.compute();
      p.dp = s.comm_overlap.dp ? std::max(0.0, dp - last_backward) : dp;
      out.parts = p;
    }
  }
  // The simulation's busiest compute is this rank's; the rest of the iteration is idle time
  // (with free links) and exposed transfers.
  out.parts.bubble = std::max(0.0, out.free_links_seconds - out.parts.compute());
  out.parts.pp = out.result.iteration_seconds - out.free_links_seconds;
  return out;
}

}  // namespace

std::optional<CostInputProblem> pipeline_settings_problem(const PipelineSettings& s) {
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
  if (s.model.sublayers > kMaxStrategySublayers) {
    return CostInputProblem{"sublayers",
                            "the simulation times the implementation's kernels of "
                            "every depth read: at most " +
                                std::to_string(kMaxStrategySublayers) +
                                " sublayers, got L = " + std::to_string(s.model.sublayers)};
  }
  if (s.link_bandwidth < 0 || std::isnan(s.link_bandwidth)) {
    return CostInputProblem{"link_bandwidth",
                            "the link bandwidth must be > 0 (or ideal links for free transfers)"};
  }
  return std::nullopt;
}

std::string to_string(const CommOverlap& overlap) {
  std::string out;
  for (const auto& [group, name] : kCommGroupNames) {
    if (!overlap.of(group)) continue;
    if (!out.empty()) out += ',';
    out.append(name);
  }
  return out.empty() ? "none" : out;
}

CommOverlap parse_comm_overlap(const std::string& text, const std::string& where) {
  CommOverlap out{false, false, false, false};
  if (text == "none") return out;
  if (text == "all") return CommOverlap{true, true, true, true};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    out.of(parse_enum(kCommGroupNames, name, where, "unknown parallel group")) = true;
    start = comma + 1;
  }
  return out;
}

PipelineSchedule default_pipeline_schedule(std::int64_t vpp) {
  return vpp > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
}

bool pipeline_link_intra_node(const PipelineSettings& s) {
  switch (s.link) {
    case PipelineLink::intra_node:
      return true;
    case PipelineLink::scale_out:
      return false;
    case PipelineLink::placed:
      break;
  }
  return pipeline_group_span(s.model) <= s.hardware.gpus_per_node;
}

MemorySettings memory_settings(const PipelineSettings& s) {
  MemorySettings memory;
  memory.microbatches = s.microbatches;
  memory.schedule = s.schedule;
  memory.mode = s.mode;
  memory.strategy = s.strategy;
  memory.cache = s.cache;
  memory.allowance = s.allowance;
  memory.capacity_bytes = s.hardware.memory_bytes;
  return memory;
}

double simulated_peak_bytes(const PipelineReport& report) {
  double peak = 0;
  for (const RankMemory& rank : report.memory) peak = std::max(peak, rank.total());
  return peak;
}

PipelineReport evaluate_pipeline(const PipelineSettings& s) {
  if (const auto problem = pipeline_settings_problem(s))
    throw Error("pipeline: " + problem->message);
  PipelineReport report;
  report.settings = s;
  report.link_bandwidth = s.link_bandwidth > 0          ? s.link_bandwidth
                          : pipeline_link_intra_node(s) ? s.hardware.intra_node_bandwidth
                                                        : s.hardware.scale_out_bandwidth;
  if (!s.ideal_links && s.model.pp > 1 && !(report.link_bandwidth > 0)) {
    throw Error("pipeline: link bandwidth must be > 0 (or use ideal links)");
  }
  SimulatedStep attnres = simulate_step(s, s.mode, report.link_bandwidth, s.record_timeline);
  SimulatedStep standard = simulate_step(s, ResidualMode::standard, report.link_bandwidth, false);
  report.attnres = std::move(attnres.result);
  report.standard = std::move(standard.result);
  report.ideal_links_seconds = attnres.free_links_seconds;
  report.step_attnres = attnres.parts;
  report.step_standard = standard.parts;
  report.stage_warning = stage_split_warning(s.model);

  report.iteration_time_s = report.attnres.iteration_seconds;
  report.step_time_s = report.iteration_time_s + report.step_attnres.dp;
  report.bubble_fraction = report.attnres.bubble_fraction;
  report.exposed_comm_s = report.iteration_time_s - report.ideal_links_seconds;
  const double standard_step = report.standard.iteration_seconds + report.step_standard.dp;
  report.attnres_overhead_fraction = report.step_time_s / standard_step - 1.0;
  report.closed_form_bubble = closed_form_bubble(s.schedule, static_cast<int>(s.model.pp),
                                                 static_cast<int>(s.model.vpp), s.microbatches);
  // The three overheads side by side, and the step's split into its parts (they sum to it).
  StepReconciliation& r = report.reconciliation;
  const ResidualScheme scheme = s.mode == ResidualMode::full ? ResidualScheme::full_two_phase
                                                             : ResidualScheme::block_two_phase;
  // The standard residual run is its own comparison: no overhead anywhere.
  if (s.mode != ResidualMode::standard) {
    r.time_model = stack_time(s.model, Phase::prefill, s.hardware)
                       .overhead_fraction[static_cast<std::size_t>(scheme)];
    r.strategy = strategy_step(s.strategy, s.mode, s.model, Phase::prefill, true, s.hardware)
                     .overhead_fraction;
  }
  r.step = report.attnres_overhead_fraction;
  const StepParts& a = report.step_attnres;
  const StepParts& b = report.step_standard;
  r.residual = (a.residual - b.residual) / standard_step;
  r.pp = (a.pp - b.pp) / standard_step;
  r.bubble = (a.bubble - b.bubble) / standard_step;
  r.dp = (a.dp - b.dp) / standard_step;
  r.other =
      (a.attention_mlp + a.tp + a.cp + a.ep - b.attention_mlp - b.tp - b.cp - b.ep) / standard_step;

  // The one memory model (rank_memory.hpp): the same chunk terms and schedule as simulated here.
  report.memory = memory_per_rank(s.model, memory_settings(s));
  report.peak_memory_bytes_per_rank = simulated_peak_bytes(report);
  report.chunk_forward_seconds = attnres.inputs.forward_seconds;
  report.boundary_bytes = attnres.inputs.boundary_bytes;
  return report;
}

}  // namespace attnres
