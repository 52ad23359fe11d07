// Memory per rank and communication per step (rank_memory.hpp, docs/math.md §3.7).
#include "attnres/rank_memory.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/architecture.hpp"
#include "attnres/block_layout.hpp"
#include "attnres/format.hpp"
#include "attnres/pipeline_payload.hpp"

namespace attnres {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double D(std::int64_t v) {
  return static_cast<double>(v);
}

bool sp_on(const CostInputs& r) {
  return r.sequence_parallel && r.tp > 1;
}

// Sublayers of chunk c: first..last (1-based).
struct ChunkRange {
  std::int64_t first = 1, last = 0;
};
std::vector<ChunkRange> chunk_ranges(const CostInputs& r) {
  const auto last = stage_last_sublayers(r);
  std::vector<ChunkRange> out;
  std::int64_t first = 1;
  for (const std::int64_t l : last) {
    out.push_back({first, l});
    first = l + 1;
  }
  return out;
}

// Activation bytes of one sublayer for one micro-batch under `policy` (full handled by callers).
double sublayer_bytes(const CostInputs& r, std::int64_t sublayer, RecomputePolicy policy) {
  const std::int64_t layer = (sublayer + 1) / 2;
  const double b = bytes_per_element(r.dtype), t = D(r.tp);
  const double tokens = D(r.batch) * D(r.tokens) / D(r.cp);
  const double rep = sp_on(r) ? 1.0 / t : 1.0;  // replicated across TP ranks unless SP splits it
  const double h = D(r.d_model), H = D(r.heads), dh = D(r.head_dim);
  const bool gelu = r.mlp == MlpKind::gelu;  // GPT: dropout after attention and after the MLP
  const double mask = gelu ? h : 0.0;        // dropout mask, 1 byte per element
  if (sublayer % 2 == 1) {
    const AttentionKind kind = layer_attention(r, layer);
    double rep_bytes = 2.0 * h * b + mask;  // norm input, projection input
    double split_bytes = 0;
    bool scores = true;
    switch (kind) {
      case AttentionKind::mha:
      case AttentionKind::gqa:
      case AttentionKind::mqa:
        split_bytes = (2.0 * H * dh + 2.0 * D(r.kv_heads) * dh) * b;  // Q, out-proj input; K, V
        break;
      case AttentionKind::mla: {
        const double dr = D(r.rope_dim);
        rep_bytes += (D(r.q_latent) + D(r.kv_latent) + dr) * b;  // the latents
        split_bytes = (2.0 * H * (dh + dr) + 2.0 * H * dh) * b;  // q, k; v, out-proj input
        break;
      }
      case AttentionKind::linear:
        // q, k, v, forget gate, output gate, out-proj input; chunk states (fp32, one per 64
        // tokens) for the chunked backward.
        split_bytes = 6.0 * H * dh * b + H * dh * dh * kLinearStateBytes / 64.0;
        scores = false;
        break;
    }
    double score_bytes = 0;
    if (scores && policy == RecomputePolicy::none) {
      // Softmax output (and, with dropout, its mask and output) for every key: a·s per token.
      score_bytes = H * D(r.tokens) * (gelu ? 2.0 * b + 1.0 : b);
    }
    return tokens * (rep * rep_bytes + (split_bytes + score_bytes) / t);
  }
  const double rep_bytes = 2.0 * h * b + mask;  // norm input, MLP input
  if (!layer_is_moe(r, layer)) {
    const double F = D(r.ffn);
    return tokens * (rep * rep_bytes + (gelu ? 2.0 : 3.0) * F * b / t);
  }
  // MoE (experts not split by TP): dispatched copies and expert outputs (k·h each), the
  // intermediate of every routed and shared expert, the router's probabilities in fp32.
  const double k = D(r.active), Fe = D(r.expert_ffn);
  const double per_token = rep_bytes + 2.0 * k * h * b +
                           (k + D(r.shared)) * (gelu ? 2.0 : 3.0) * Fe * b + D(r.experts) * 4.0;
  return tokens * rep * per_token;
}

double chunk_history_vectors(const CostInputs& r, ResidualMode mode, std::int64_t chunk,
                             const std::vector<BoundaryPayload>& boundaries) {
  if (mode == ResidualMode::standard) return 0;
  const std::int64_t C = r.pp * r.vpp;
  if (chunk + 1 < C) return D(boundaries[static_cast<std::size_t>(chunk)].naive_vectors);
  // The last chunk: every source of the final read.
  return mode == ResidualMode::full ? D(r.sublayers + 1) : D(r.blocks + 1);
}

// Bytes per logit element the cross entropy keeps (cost.hpp, docs/math.md §3.7).
double cross_entropy_bytes(CrossEntropy kind, double b) {
  switch (kind) {
    case CrossEntropy::unfused:
      return 12.0;
    case CrossEntropy::fused:
      return 4.0 + b;
    case CrossEntropy::chunked:
      return 0.0;
  }
  return 0.0;
}

// The tensors the strategy saves for backward, vectors per sublayer (spread evenly).
double saved_vectors_per_sublayer(const CostInputs& r, const MemorySettings& s) {
  if (s.mode == ResidualMode::standard) return 0.0;
  const StrategyCost cost = strategy_cost(s.strategy, mode_layout(s.mode, r),
                                          s.strategy == Strategy::fused_two_phase
                                              ? std::optional<BlockLayout>(mode_groups(s.mode, r))
                                              : std::nullopt);
  return D(cost.saved_vectors) / D(r.sublayers);
}

}  // namespace

std::optional<CostInputProblem> memory_allowance_problem(const MemoryAllowance& a) {
  if (!(a.runtime_bytes >= 0) || !std::isfinite(a.runtime_bytes))
    return CostInputProblem{"runtime_bytes", "the runtime reserve must be a size >= 0"};
  if (!(a.fragmentation >= 0) || !(a.fragmentation < 1))
    return CostInputProblem{"fragmentation",
                            "the allocator's fragmentation is a fraction from 0 up to (not "
                            "including) 1"};
  if (!(a.margin_bytes >= 0) || !std::isfinite(a.margin_bytes))
    return CostInputProblem{"margin_bytes", "the memory margin must be a size >= 0"};
  return std::nullopt;
}

double logits_bytes(const CostInputs& r) {
  if (r.vocab == 0) return 0.0;
  const double tokens = D(r.batch) * D(r.tokens) / D(r.cp);
  return tokens * D(r.vocab) / D(r.tp) *
         cross_entropy_bytes(r.cross_entropy, bytes_per_element(r.dtype));
}

std::vector<ChunkMemory> chunk_memory(const CostInputs& r, const MemorySettings& s) {
  const auto chunks = chunk_ranges(r);
  const double vector_bytes = local_tokens(r, true) * D(r.d_model) * bytes_per_element(r.dtype);
  const double saved = saved_vectors_per_sublayer(r, s);
  std::vector<ChunkMemory> out(chunks.size());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    for (std::int64_t sub = chunks[c].first; sub <= chunks[c].last; ++sub)
      out[c].activations += sublayer_activation_bytes(r, sub);
    out[c].attnres = saved * D(chunks[c].last - chunks[c].first + 1) * vector_bytes;
  }
  if (s.mode != ResidualMode::standard) {
    for (const BoundaryPayload& boundary : pipeline_boundaries(r, s.mode))
      out[static_cast<std::size_t>(boundary.to_chunk)].attnres +=
          D(sent_vectors(boundary, s.cache)) * vector_bytes;
  }
  return out;
}

ModelStates model_state_bytes(double parameters, int bytes_per_element, double optimizer_bytes,
                              int zero_stage, double group) {
  ModelStates s;
  const double b = bytes_per_element;
  s.weights = b * parameters / (zero_stage >= 3 ? group : 1.0);
  s.gradients = b * parameters / (zero_stage >= 2 ? group : 1.0);
  s.optimizer = optimizer_bytes * parameters / (zero_stage >= 1 ? group : 1.0);
  return s;
}

double local_tokens(const CostInputs& r, bool split_by_tp) {
  return D(r.batch) * D(r.tokens) / D(r.cp) / (split_by_tp && sp_on(r) ? D(r.tp) : 1.0);
}

double layer_input_bytes(const CostInputs& r) {
  return local_tokens(r, true) * D(r.d_model) * bytes_per_element(r.dtype);
}

double sublayer_activation_bytes(const CostInputs& r, std::int64_t sublayer) {
  if (r.recompute == RecomputePolicy::full) return sublayer % 2 == 1 ? layer_input_bytes(r) : 0.0;
  return sublayer_bytes(r, sublayer, r.recompute);
}

double in_flight_microbatches(PipelineSchedule schedule, std::int64_t pp, std::int64_t vpp,
                              int microbatches, std::int64_t rank) {
  const double m = microbatches;
  if (schedule == PipelineSchedule::one_f_one_b || vpp == 1) return std::min(m, D(pp - rank));
  const double warmup = std::min(m * D(vpp), 2.0 * D(pp - rank - 1) + D((vpp - 1) * pp));
  return std::min(m, (warmup + 1.0) / D(vpp));
}

std::vector<RankMemory> memory_per_rank(const CostInputs& r, const MemorySettings& s) {
  if (r.sublayers > kMaxStrategySublayers) {
    // Every sublayer of every rank is visited (its kind, its activations).
    throw Error("memory per rank visits every sublayer: L = " + std::to_string(r.sublayers) +
                " is above the " + std::to_string(kMaxStrategySublayers) + " it takes");
  }
  const std::int64_t P = r.pp, V = r.vpp, C = P * V;
  const auto chunks = chunk_ranges(r);
  const int b = bytes_per_element(r.dtype);
  const bool training = s.workload == Workload::training;
  // Inference keeps one pass's widest history; training takes its history from chunk_memory.
  const auto boundaries = training || s.mode == ResidualMode::standard
                              ? std::vector<BoundaryPayload>{}
                              : pipeline_boundaries(r, s.mode);
  const double vector_bytes = local_tokens(r, true) * D(r.d_model) * b;
  if (const auto problem = memory_allowance_problem(s.allowance)) throw Error(problem->message);
  // Training: the schedule's peak of what each chunk holds, as the pipeline simulation places it
  // (ideal links and unit times: a rank runs its ops one at a time in the schedule's order, so
  // the peak does not depend on the times).
  PipelineSimResult peaks;
  std::vector<ChunkMemory> held;
  if (training) {
    if (static_cast<double>(s.microbatches) * D(C) > static_cast<double>(kMaxPipelinePairs))
      throw Error("memory per rank places m x P·V = " + std::to_string(s.microbatches) + " x " +
                  std::to_string(C) + " (micro-batch, chunk) pairs; at most " +
                  std::to_string(kMaxPipelinePairs));
    held = chunk_memory(r, s);
    PipelineSimInputs sim;
    sim.ranks = static_cast<int>(P);
    sim.virtual_stages = static_cast<int>(V);
    sim.microbatches = s.microbatches;
    sim.schedule = s.schedule;
    sim.ideal_links = true;
    sim.record_timeline = false;
    for (const ChunkMemory& chunk : held) {
      sim.forward_seconds.push_back(1.0);
      sim.backward_seconds.push_back(2.0);
      sim.activation_bytes.push_back(chunk.activations);
      sim.history_bytes.push_back(chunk.attnres);
    }
    sim.boundary_bytes.assign(static_cast<std::size_t>(C - 1), 0.0);
    peaks = simulate_pipeline(sim);
  }
  const double dense_group = D(r.dp * r.cp);
  const double expert_group = D(r.tp * r.cp * r.dp / r.ep);
  const ParameterCounts whole = parameter_counts(r);
  std::vector<RankMemory> out;
  for (std::int64_t rank = 0; rank < P; ++rank) {
    RankMemory m;
    m.rank = static_cast<int>(rank);
    m.capacity = s.capacity_bytes;
    m.dense_group = dense_group;
    m.expert_group = expert_group;
    double dense = 0, routed = 0, per_mb = 0, one_layer = 0, kv = 0;
    for (std::int64_t c = rank; c < C; c += P) {
      const ChunkRange range = chunks[static_cast<std::size_t>(c)];
      if (c == 0) dense += whole.embedding;
      if (c == C - 1) dense += whole.lm_head + D(r.d_model);  // and the final norm
      for (std::int64_t sub = range.first; sub <= range.last; ++sub) {
        ++m.sublayers;
        const std::int64_t layer = (sub + 1) / 2;
        dense += D(r.d_model);  // the sublayer's norm
        per_mb += sublayer_activation_bytes(r, sub);
        // One sublayer while it is recomputed (or in a prefill), flash-style: no stored scores.
        const double recomputed = sublayer_bytes(r, sub, RecomputePolicy::selective);
        one_layer = std::max(one_layer, recomputed);
        if (sub % 2 == 1) {
          const AttentionKind kind = layer_attention(r, layer);
          dense += attention_params(r, kind);
          double cache = kv_cache_bytes_per_sequence(r, kind, r.tokens) * D(r.batch);
          if (kind == AttentionKind::linear) {
            cache /= D(r.tp);  // state split by heads
          } else if (kind != AttentionKind::mla) {
            cache *= std::max(1.0, D(r.kv_heads) / D(r.tp)) / D(r.kv_heads) / D(r.cp);
          } else {
            cache /= D(r.cp);  // the latent is replicated over TP ranks
          }
          kv += cache;
        } else if (layer_is_moe(r, layer)) {
          const double m_ = mlp_matrices(r.mlp), d = D(r.d_model), Fe = D(r.expert_ffn);
          routed += D(r.experts) * m_ * d * Fe;
          dense += D(r.shared) * m_ * d * Fe + d * D(r.experts);
        } else {
          dense += mlp_params(r, false);
        }
      }
    }
    m.parameters = dense / D(r.tp) + routed / D(r.ep);
    if (training) {
      const ModelStates a = model_state_bytes(dense / D(r.tp), b, D(r.optimizer_bytes),
                                              static_cast<int>(r.zero), dense_group);
      const ModelStates e = model_state_bytes(routed / D(r.ep), b, D(r.optimizer_bytes),
                                              static_cast<int>(r.zero), expert_group);
      m.weights = a.weights + e.weights;
      m.gradients = a.gradients + e.gradients;
      m.optimizer = a.optimizer + e.optimizer;
      const std::size_t at = static_cast<std::size_t>(rank);
      const double activations = peaks.peak_activation_bytes[at];
      m.in_flight = per_mb > 0 ? activations / per_mb : 0.0;
      // Full recompute adds one layer's activations while it is recomputed.
      m.activations = activations + (r.recompute == RecomputePolicy::full ? 2.0 * one_layer : 0.0);
      m.attnres_history = peaks.peak_memory_bytes[at] - activations;
      // The loss buffers: one micro-batch's on the last chunk's rank, from the LM head's forward
      // to its backward (1F1B runs them back to back on the last stage).
      if ((C - 1) % P == rank) m.logits = logits_bytes(r);
    } else {
      m.weights = b * m.parameters;
      m.in_flight = 1;
      m.activations = 2.0 * one_layer;  // one layer of a prefill pass, transient
      double widest = 0;
      for (std::int64_t c = rank; c < C; c += P)
        widest = std::max(widest, chunk_history_vectors(r, s.mode, c, boundaries));
      m.attnres_history = widest * vector_bytes;
      m.kv_cache = kv;
    }
    m.reserve = s.allowance.runtime_bytes + s.allowance.fragmentation * m.tensors();
    m.headroom = s.allowance.margin_bytes;
    out.push_back(m);
  }
  return out;
}

const RankMemory& largest_rank(const std::vector<RankMemory>& ranks) {
  if (ranks.empty()) throw Error("memory per rank: no ranks");
  return *std::max_element(
      ranks.begin(), ranks.end(),
      [](const RankMemory& a, const RankMemory& b) { return a.total() < b.total(); });
}

RankMemory peak_rank_memory(const CostInputs& r, const MemorySettings& s) {
  return largest_rank(memory_per_rank(r, s));
}

std::string fit_verdict(const RankMemory& m) {
  const auto gb = [](double bytes) { return format_number(std::round(bytes / 1e7) / 100) + " GB"; };
  if (!m.known_capacity()) return "capacity unknown: " + gb(m.total()) + " per rank";
  // The capacity also in GiB, the unit parts are sold in ("80 GB" of HBM: 80 GiB, less what the
  // driver keeps).
  const std::string of = gb(m.total()) + " of " + gb(m.capacity) + " (" +
                         format_number(std::round(m.capacity / kGiB * 100) / 100) + " GiB)" +
                         (m.headroom > 0 ? " keeping " + gb(m.headroom) + " free" : std::string());
  if (m.fits()) return "fits: " + of + ", " + gb(m.margin()) + " spare";
  return "does not fit: " + of + ", over by " + gb(-m.margin());
}

std::vector<std::string> memory_assumptions(const CostInputs& r, const MemorySettings& s) {
  std::vector<std::string> out;
  const bool training = s.workload == Workload::training;
  out.push_back("world = t·c·P·D = " + std::to_string(r.tp) + "·" + std::to_string(r.cp) + "·" +
                std::to_string(r.pp) + "·" + std::to_string(r.dp) + " = " +
                std::to_string(r.tp * r.cp * r.pp * r.dp) + " GPUs; " + describe_architecture(r));
  if (training) {
    out.push_back(
        "model states: " + to_string(r.dtype) + " weights and gradients, K = " +
        std::to_string(r.optimizer_bytes) + " optimizer bytes per parameter; ZeRO stage " +
        std::to_string(r.zero) + " over D·c = " + std::to_string(r.dp * r.cp) +
        " ranks (routed experts over t·c·D/e = " + std::to_string(r.tp * r.cp * r.dp / r.ep) + ")");
    out.push_back(
        "activations: Korthikanti et al. 2022 term by term (docs/math.md §3.7), recompute " +
        enum_name(kRecomputePolicyNames, r.recompute) + ", sequence parallelism " +
        (sp_on(r) ? "on" : "off") + ", " + enum_name(kPipelineScheduleNames, s.schedule) +
        " schedule with m = " + std::to_string(s.microbatches) +
        " micro-batches in flight at most");
  } else {
    out.push_back(
        "inference: weights and the KV cache (linear attention: its fixed state, fp32) of B = " +
        std::to_string(r.batch) + " sequences at context T = " + std::to_string(r.tokens) +
        "; one layer's prefill activations");
  }
  if (r.vocab == 0) out.push_back("embedding and LM head not counted (vocab = 0)");
  if (training && r.vocab > 0)
    out.push_back("loss buffers on the last stage: " +
                  enum_name(kCrossEntropyNames, r.cross_entropy) + " cross entropy");
  out.push_back(
      "reserve: " + format_number(s.allowance.runtime_bytes / kGiB) +
      " GiB runtime (CUDA context, workspaces, NCCL buffers) + " +
      format_number(100 * s.allowance.fragmentation) + " % of the tensors (allocator)" +
      (s.allowance.margin_bytes > 0
           ? "; " + format_number(s.allowance.margin_bytes / kGiB) + " GiB margin kept free"
           : std::string()));
  return out;
}

namespace {

// One term of a group of `ranks` members `stride` ranks apart, at group_bandwidth.
void add_term(std::vector<CommTerm>& out, const Hardware& hw, std::string group, std::string what,
              double bytes, std::int64_t ranks, std::int64_t stride, bool ring) {
  CommTerm term;
  term.group = std::move(group);
  term.what = std::move(what);
  term.bytes = bytes;
  term.ranks = ranks;
  term.intra_node = ranks * stride <= hw.gpus_per_node;
  term.nics = term.intra_node || !ring ? 1 : group_ranks_per_node(hw, ranks, stride);
  const double bw = group_bandwidth(hw, ranks, stride, ring);
  term.seconds = bw > 0 ? bytes / (bw * hw.link_efficiency) : 0.0;
  out.push_back(std::move(term));
}

}  // namespace

std::int64_t group_ranks_per_node(const Hardware& hw, std::int64_t ranks, std::int64_t stride) {
  const std::int64_t per_node =
      std::max<std::int64_t>(1, hw.gpus_per_node / std::max<std::int64_t>(1, stride));
  return std::min(per_node, ranks);
}

double group_bandwidth(const Hardware& hw, std::int64_t ranks, std::int64_t stride, bool ring) {
  if (ranks * stride <= hw.gpus_per_node) return hw.intra_node_bandwidth;
  if (!ring) return hw.scale_out_bandwidth;
  // A ring over nodes runs as g parallel rings (NCCL's channels), each crossing the nodes on its
  // own GPU's NIC, with the reduction inside a node on NVLink: the node's g NICs together, at most
  // NVLink's rate.
  return std::min(hw.intra_node_bandwidth,
                  D(group_ranks_per_node(hw, ranks, stride)) * hw.scale_out_bandwidth);
}

std::int64_t comm_group_stride(const CostInputs& r, CommGroup group) {
  switch (group) {
    case CommGroup::tp:
    case CommGroup::ep:
      return 1;
    case CommGroup::cp:
    case CommGroup::dp:
      return r.tp;
  }
  return 1;
}

std::int64_t comm_group_ranks(const CostInputs& r, CommGroup group) {
  switch (group) {
    case CommGroup::tp:
      return r.tp;
    case CommGroup::cp:
      return r.cp;
    case CommGroup::ep:
      return r.ep;
    case CommGroup::dp:
      return r.dp * r.cp;
  }
  return 1;
}

std::int64_t comm_group_span(const CostInputs& r, CommGroup group) {
  switch (group) {
    case CommGroup::tp:
    case CommGroup::ep:
      return comm_group_ranks(r, group);
    case CommGroup::cp:
      return r.tp * r.cp;
    case CommGroup::dp:
      return r.tp * r.cp * r.dp;
  }
  return 1;
}

std::int64_t pipeline_group_span(const CostInputs& r) {
  return r.tp * r.cp * r.dp * r.pp;
}

double collective_seconds(const CostInputs& r, const Hardware& hw, CommGroup group, double bytes) {
  if (!(bytes > 0)) return 0.0;
  const double bw = group_bandwidth(hw, comm_group_ranks(r, group), comm_group_stride(r, group),
                                    group != CommGroup::ep);
  return bw > 0 ? bytes / (bw * hw.link_efficiency) : 0.0;
}

SublayerComm sublayer_communication(const CostInputs& r, std::int64_t sublayer) {
  SublayerComm out;
  const double b = bytes_per_element(r.dtype), t = D(r.tp), c = D(r.cp);
  const std::int64_t layer = (sublayer + 1) / 2;
  const bool attention = sublayer % 2 == 1;
  const bool moe = !attention && layer_is_moe(r, layer);
  // Full recompute runs the forward again before the backward, collectives included.
  const double again = r.recompute == RecomputePolicy::full ? 1.0 : 0.0;
  if (r.tp > 1 && !moe) {
    // All-reduce, or reduce-scatter + all-gather: 2(t-1)/t of one micro-batch's hidden states.
    const double per = 2.0 * (t - 1.0) / t * local_tokens(r, false) * D(r.d_model) * b;
    out.tp = {per, per * (1.0 + again)};
  }
  if (r.cp > 1 && attention) {
    const AttentionKind kind = layer_attention(r, layer);
    const double tokens = local_tokens(r, false);
    double per = 0;
    if (kind == AttentionKind::linear) {
      per = linear_state_elements(r) * kLinearStateBytes * D(r.batch) / t;
    } else if (kind == AttentionKind::mla) {
      per = (c - 1.0) * tokens * (2.0 * D(r.heads) * D(r.head_dim) + D(r.heads) * D(r.rope_dim)) *
            b / t;
    } else {
      per = (c - 1.0) * tokens * kv_cache_elements_per_token(r, kind) * b / t;
    }
    out.cp = {per, per * (2.0 + again)};  // keys and values out, their gradients back twice
  }
  if (r.ep > 1 && moe) {
    const double e = D(r.ep);
    const double per = (e - 1.0) / e * D(r.active) * local_tokens(r, true) * D(r.d_model) * b;
    out.ep = {2.0 * per, 2.0 * per * (1.0 + again)};  // dispatch and combine each way
  }
  return out;
}

std::vector<CommTerm> step_communication(const CostInputs& r, const Hardware& hw, int microbatches,
                                         ResidualMode mode) {
  std::vector<CommTerm> out;
  const double b = bytes_per_element(r.dtype), m = microbatches;
  const std::int64_t P = r.pp, V = r.vpp, C = P * V;
  const auto chunks = chunk_ranges(r);
  // The busiest rank: the most sublayers (rank 0 when L splits evenly).
  std::int64_t busiest = 0, most = -1;
  for (std::int64_t rank = 0; rank < P; ++rank) {
    std::int64_t n = 0;
    for (std::int64_t c = rank; c < C; c += P)
      n += chunks[static_cast<std::size_t>(c)].last - chunks[static_cast<std::size_t>(c)].first + 1;
    if (n > most) most = n, busiest = rank;
  }
  SublayerComm sum;
  std::int64_t moe_on = 0;
  for (std::int64_t c = busiest; c < C; c += P) {
    for (std::int64_t sub = chunks[static_cast<std::size_t>(c)].first;
         sub <= chunks[static_cast<std::size_t>(c)].last; ++sub) {
      const SublayerComm one = sublayer_communication(r, sub);
      for (const CommGroup g : {CommGroup::tp, CommGroup::cp, CommGroup::ep}) {
        sum.of(g).forward += one.of(g).forward;
        sum.of(g).backward += one.of(g).backward;
      }
      if (sub % 2 == 0 && layer_is_moe(r, (sub + 1) / 2)) ++moe_on;
    }
  }
  const double hidden = local_tokens(r, false) * D(r.d_model) * b;  // one micro-batch, one CP rank
  auto add = [&](CommGroup g, std::string what, double bytes) {
    add_term(out, hw, enum_name(kCommGroupNames, g), std::move(what), bytes, comm_group_ranks(r, g),
             comm_group_stride(r, g), g != CommGroup::ep);
  };
  const bool full = r.recompute == RecomputePolicy::full;
  const std::string again = full ? " and the recomputed forward" : "";
  if (r.tp > 1) {
    add(CommGroup::tp,
        std::string(sp_on(r) ? "reduce-scatter + all-gather" : "all-reduce") +
            " of attention and dense-MLP outputs, forward and backward" + again,
        sum.tp.total() * m);
  }
  if (r.cp > 1) {
    add(CommGroup::cp,
        "ring exchange of keys and values (linear attention: its state), forward and 2x "
        "backward" +
            again,
        sum.cp.total() * m);
  }
  if (r.ep > 1 && moe_on > 0) {
    add(CommGroup::ep,
        "all-to-all dispatch and combine of the routed tokens, forward and backward" + again,
        sum.ep.total() * m);
  }
  const ParameterCounts whole = parameter_counts(r);
  const double routed_rank = whole.routed_experts / D(P) / D(r.ep);
  const double dense_rank = (whole.total() - whole.routed_experts) / D(P) / D(r.tp);
  const double factor = r.zero >= 3 ? 3.0 : 2.0;
  const char* how = r.zero >= 3
                        ? "reduce-scatter of gradients + all-gather of weights twice (ZeRO-3)"
                    : r.zero >= 1 ? "reduce-scatter of gradients + all-gather of updated weights"
                                  : "all-reduce of gradients";
  const std::int64_t dpc = r.dp * r.cp;
  if (dpc > 1) {
    const double g = D(dpc);
    add_term(out, hw, "dp", std::string(how) + " (dense weights, once per step)",
             factor * (g - 1.0) / g * b * dense_rank, dpc, r.tp, true);
  }
  const std::int64_t edp = r.tp * r.cp * r.dp / r.ep;
  if (edp > 1 && whole.routed_experts > 0) {
    const double g = D(edp);
    add_term(out, hw, "dp", std::string(how) + " (routed experts, once per step)",
             factor * (g - 1.0) / g * b * routed_rank, edp, r.ep, true);
  }
  if (P > 1) {
    const double t_sp = sp_on(r) ? D(r.tp) : 1.0;
    std::int64_t sends = 0;
    double attnres_vectors = 0;
    const auto boundaries = mode == ResidualMode::standard ? std::vector<BoundaryPayload>{}
                                                           : pipeline_boundaries(r, mode);
    for (std::int64_t c = busiest; c + 1 < C; c += P) {
      ++sends;
      if (!boundaries.empty())
        attnres_vectors += D(boundaries[static_cast<std::size_t>(c)].cached_vectors - 1);
    }
    const std::int64_t world = pipeline_group_span(r);
    add_term(out, hw, "pp",
             "hidden state to the next stage and its gradient back (÷ t with sequence parallelism)",
             2.0 * D(sends) * hidden / t_sp * m, P, world / P, false);
    if (mode != ResidualMode::standard) {
      add_term(out, hw, "pp_attnres",
               "AttnRes block representations beyond the hidden state (cached policy), and their "
               "gradients",
               2.0 * attnres_vectors * hidden / t_sp * m, P, world / P, false);
    }
  }
  return out;
}

}  // namespace attnres
