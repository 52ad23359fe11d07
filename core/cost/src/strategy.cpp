#include "attnres/strategy.hpp"

#include <algorithm>
#include <cmath>

#include "attnres/architecture.hpp"
#include "attnres/error.hpp"
#include "attnres/rank_memory.hpp"

namespace attnres {

std::string to_string(Strategy strategy) {
  return enum_name(kStrategyNames, strategy);
}

Strategy parse_strategy(const std::string& text, const std::string& where) {
  return parse_enum(kStrategyNames, text, where, "unknown implementation strategy");
}

std::string strategy_summary(Strategy strategy) {
  switch (strategy) {
    case Strategy::stack:
      return "framework ops; every read stacks its sources into a new tensor (5 launches per "
             "read, O(L^2) copies for Full)";
    case Strategy::arena:
      return "framework ops over a preallocated history; each source stored once, reads take "
             "views (4 launches per read + 1 store per sublayer)";
    case Strategy::fused_one_shot:
      return "one fused kernel per read: one pass over its sources, store of the newest source "
             "fused in";
    case Strategy::fused_two_phase:
      return "one phase-1 kernel per block for all its reads, one merge kernel per later read";
  }
  return "";
}

std::string to_string(Checkpointing policy) {
  return enum_name(kCheckpointingNames, policy);
}

namespace {

struct Builder {
  std::vector<KernelCall>& calls;
  void add(const char* op, std::int64_t read, std::int64_t reads, std::int64_t writes,
           std::int64_t count = 1) {
    KernelCall call;
    call.op = op;
    call.read = read;
    call.read_vectors = reads;
    call.write_vectors = writes;
    call.count = count;
    calls.push_back(call);
  }
};

PassCounts totals(const std::vector<KernelCall>& calls) {
  PassCounts counts;
  for (const auto& call : calls) {
    counts.read_vectors += call.read_vectors * call.count;
    counts.write_vectors += call.write_vectors * call.count;
    counts.launches += call.count;
  }
  return counts;
}

}  // namespace

ReadOps read_ops_of(const AttnResConfig& scheme) {
  ReadOps ops;
  switch (scheme.mode) {
    case ResidualMode::standard:
    case ResidualMode::rescaled:
    case ResidualMode::mhc:
      throw Error("implementation strategies cost reads over a stored history; " +
                  scheme.describe() + " has none" +
                  (scheme.mode == ResidualMode::rescaled ? std::string(": it keeps a running mean")
                                                         : ": " + scheme.two_phase_limit()));
    case ResidualMode::denseformer:
      ops.key_norm = false;
      ops.scores = false;
      return ops;
    case ResidualMode::full:
    case ResidualMode::block:
      break;
  }
  ops.scores = scheme.mixing == DepthMixing::attention;
  ops.key_norm = ops.scores && scheme.key_norm;
  ops.input_query = scheme.uses_query() && scheme.query_source == QuerySource::input;
  ops.window = scheme.mode == ResidualMode::full ? scheme.window : 0;
  ops.two_phase_limit = scheme.two_phase_limit();
  return ops;
}

ReadOps cpu_engine_read_ops() {
  ReadOps ops;
  ops.finish_call = true;
  ops.separate_store = true;
  ops.final_read_in_last_group = true;
  return ops;
}

StrategyCost strategy_cost(Strategy strategy, const BlockLayout& layout,
                           const std::optional<BlockLayout>& groups_in, const ReadOps& ops) {
  const std::int64_t L = layout.sublayers();
  if (layout.sizes.empty() || L < 1) throw Error("strategy cost: the layout has no blocks");
  if (L > kMaxStrategySublayers) {
    throw Error("implementation strategies count each of the L + 1 reads: L = " +
                std::to_string(L) + " sublayers exceeds " + std::to_string(kMaxStrategySublayers));
  }
  const BlockLayout groups = groups_in ? *groups_in : layout;
  if (groups.sublayers() != L) {
    throw Error("strategy cost: two-phase groups cover " + std::to_string(groups.sublayers()) +
                " sublayers, the layout " + std::to_string(L));
  }
  StrategyCost cost;
  cost.strategy = strategy;
  cost.layout = layout;
  cost.groups = groups;
  cost.reads = L + 1;
  if (strategy == Strategy::fused_two_phase && !ops.two_phase_limit.empty()) {
    throw Error("fused_two_phase does not apply here: " + ops.two_phase_limit);
  }
  cost.history_vectors = layout.blocks() + 1;
  auto reads = read_sources(layout);
  if (ops.window > 0) {
    // Full AttnRes with a window: the embedding and the last W outputs (docs/schemes.md).
    if (layout.blocks() != L) throw Error("strategy cost: a window needs Full AttnRes' layout");
    for (std::int64_t r = 0; r <= L; ++r)
      reads[static_cast<std::size_t>(r)].completed = 1 + std::min(r, ops.window);
    cost.history_vectors = std::min(L, ops.window) + 1;
  }
  for (const auto& read : reads) cost.inherent_read_vectors += read.sources();

  Builder fwd{cost.forward_calls}, bwd{cost.backward_calls};
  std::int64_t temp = 0;
  auto n_of = [&](std::int64_t r) { return reads[static_cast<std::size_t>(r)].sources(); };
  auto u_of = [&](std::int64_t r) {
    return reads[static_cast<std::size_t>(r)].accumulates ? std::int64_t{1} : std::int64_t{0};
  };
  // separate_store: what keeping the history costs before read r (r >= 1) when the read does not
  // store its newest source. Block (a block of more than one sublayer): v_r added into its
  // block's slot, the slot zeroed first when sublayer r starts a block after the first; Full: the
  // sublayer wrote its slot.
  const bool block_slots =
      std::any_of(layout.sizes.begin(), layout.sizes.end(), [](std::int64_t s) { return s > 1; });
  std::vector<bool> starts_block(static_cast<std::size_t>(L) + 1, false);
  {
    std::int64_t first = 1;
    for (std::int64_t size : layout.sizes) {
      if (first > 1) starts_block[static_cast<std::size_t>(first)] = true;
      first += size;
    }
  }
  auto store = [&](std::int64_t r) {
    if (r < 1 || !block_slots) return;
    if (starts_block[static_cast<std::size_t>(r)]) fwd.add("zero_fill", r, 0, 1);
    fwd.add("store_add", r, 2, 1);
  };

  switch (strategy) {
    case Strategy::stack:
    case Strategy::arena: {
      const bool stack = strategy == Strategy::stack;
      for (std::int64_t r = 0; r <= L; ++r) {
        const std::int64_t n = n_of(r);
        // Maintaining the history: stack keeps references, adding v_r to the open block's
        // partial sum as a new tensor; arena copies each new source into its slot (or adds it in
        // place).
        if (stack && ops.separate_store) {
          store(r);
        } else if (stack) {
          if (u_of(r)) fwd.add("partial_add", r, 2, 1);
        } else {
          if (u_of(r)) {
            fwd.add("arena_add", r, 2, 1);
          } else {
            fwd.add("arena_copy", r, 1, 1);
          }
        }
        if (ops.input_query) fwd.add("query_projection", r, 1, 1);
        if (stack) {
          fwd.add("stack", r, n, n);
          cost.copy_vectors += n;
        }
        if (ops.key_norm) fwd.add("key_norm", r, n, n);
        if (ops.scores) {
          fwd.add("score", r, n, 0);
          fwd.add("softmax", r, 0, 0);
        }
        fwd.add("weighted_sum", r, n, 1);
        const std::int64_t keys = ops.key_norm ? n : 0;
        temp = std::max(temp, (stack ? n : 0) + keys);
        cost.saved_vectors += (stack ? n : 0) + keys;
      }
      if (!stack) cost.copy_vectors = L + 1;
      // Autograd, reads in reverse: dα and dV of the weighted sum, softmax, dK and dw of the
      // score, the norm's backward, the sum of the key and value gradients, then the fan-in into
      // the sources' gradients: one add per source (stack) or one strided add into the
      // history's gradient (arena).
      for (std::int64_t r = L; r >= 0; --r) {
        const std::int64_t n = n_of(r);
        bwd.add("weighted_sum_dalpha", r, n + 1, 0);
        bwd.add("weighted_sum_dvalues", r, 1, n);
        if (ops.scores) {
          bwd.add("softmax_backward", r, 0, 0);
          bwd.add("score_dkeys", r, 0, n);
          bwd.add("score_dw", r, n, 0);
          if (ops.key_norm) bwd.add("key_norm_backward", r, 2 * n, n);
          bwd.add("key_value_grad_add", r, 2 * n, n);
        }
        if (ops.input_query) bwd.add("query_projection_backward", r, 2, 1);
        if (stack) {
          bwd.add("grad_accumulate", r, 2, 1, n);  // one add per source
        } else {
          bwd.add("grad_accumulate", r, 2 * n, n);
        }
      }
      break;
    }
    case Strategy::fused_one_shot: {
      for (std::int64_t r = 0; r <= L; ++r) {
        // Read the n sources (the newest as old partial + v_r when it accumulates), write the
        // output and the newest source's slot.
        if (ops.input_query) fwd.add("query_projection", r, 1, 1);
        if (ops.separate_store) {
          store(r);
          fwd.add("fused_read", r, n_of(r), 1);
        } else {
          fwd.add("fused_read", r, n_of(r) + u_of(r), 2);
        }
        if (ops.finish_call) fwd.add("finish", r, 1, 1);
      }
      cost.copy_vectors = L + 1;
      for (std::int64_t r = L; r >= 0; --r) {
        const std::int64_t n = n_of(r);
        // Output gradient, the sources (norms and scores recomputed), and the read-modify-write
        // of the sources' gradient accumulators.
        bwd.add("fused_read_backward", r, 1 + 2 * n, n);
        if (ops.input_query) bwd.add("query_projection_backward", r, 2, 1);
      }
      break;
    }
    case Strategy::fused_two_phase: {
      // Group k covers the reads that form the inputs of its sublayers; the final read is a
      // group of its own. Phase 1 reads the sources available at the group's first read once
      // for all the group's reads; each later read merges its intra-group sources.
      struct Group {
        std::int64_t first = 0, last = 0;  // reads
      };
      // The sources of read r that phase 1 did not see: the outputs made inside the group (Full;
      // with a window the older ones slide out, so not n_r - pre) or the open partial sum
      // (Block).
      auto intra_of = [&](std::int64_t first, std::int64_t r, std::int64_t pre) {
        return ops.window > 0 ? std::min(r - first, n_of(r) - 1) : n_of(r) - pre;
      };
      std::vector<Group> list;
      std::int64_t start = 1;
      for (std::int64_t size : groups.sizes) {
        list.push_back({start - 1, start + size - 2});
        start += size;
      }
      if (ops.final_read_in_last_group) {
        list.back().last = L;
      } else {
        list.push_back({L, L});
      }
      // With separate_store the reads store nothing (store() keeps the history); with
      // finish_call phase 1 writes the members' o only and every read has one more call: the
      // group's first its finish (o in, h out), a later one its merges and finish together.
      const std::int64_t stored = ops.separate_store ? 0 : 1;
      for (const Group& g : list) {
        const std::int64_t members = g.last - g.first + 1;
        const std::int64_t pre = n_of(g.first);
        if (ops.separate_store) store(g.first);
        fwd.add("phase1", g.first, pre + stored * u_of(g.first),
                members + (ops.finish_call ? 0 : 1));
        if (ops.finish_call) fwd.add("finish", g.first, 1, 1);
        temp = std::max(temp, members);
        cost.saved_vectors += members;
        for (std::int64_t r = g.first + 1; r <= g.last; ++r) {
          if (ops.separate_store) store(r);
          fwd.add(ops.finish_call ? "merge_finish" : "merge", r,
                  1 + intra_of(g.first, r, pre) + stored * u_of(r), 2);
        }
      }
      cost.copy_vectors = L + 1;
      for (auto it = list.rbegin(); it != list.rend(); ++it) {
        const Group& g = *it;
        const std::int64_t members = g.last - g.first + 1;
        const std::int64_t pre = n_of(g.first);
        for (std::int64_t r = g.last; r > g.first; --r) {
          const std::int64_t intra = intra_of(g.first, r, pre);
          bwd.add("merge_backward", r, 2 + 2 * intra, 1 + intra);
        }
        bwd.add("phase1_backward", g.first, 2 * members + 2 * pre, pre);
      }
      break;
    }
  }
  cost.forward = totals(cost.forward_calls);
  cost.forward.temp_vectors = temp;
  cost.backward = totals(cost.backward_calls);
  cost.backward.temp_vectors = temp;
  return cost;
}

std::vector<KernelCall> standard_residual_calls(std::int64_t sublayers) {
  return {KernelCall{"residual_add", -1, 2, 1, sublayers}};
}

PassCounts standard_residual_counts(std::int64_t sublayers) {
  return totals(standard_residual_calls(sublayers));
}

double call_seconds(double bytes, const Hardware& hardware) {
  return std::max(hardware.kernel_floor,
                  bytes / (hardware.hbm_bandwidth * hardware.memory_efficiency));
}

CallTime calls_time(const std::vector<KernelCall>& calls, std::int64_t d, double tokens,
                    int bytes_per_element, const Hardware& hardware) {
  CallTime time;
  const double per_vector = static_cast<double>(d) * tokens * bytes_per_element;
  for (const auto& call : calls) {
    const double bytes = static_cast<double>(call.vectors()) * per_vector;  // one launch
    const double bandwidth_seconds = bytes / (hardware.hbm_bandwidth * hardware.memory_efficiency);
    const auto count = static_cast<double>(call.count);
    time.bytes += bytes * count;
    time.seconds += std::max(hardware.kernel_floor, bandwidth_seconds) * count;
    time.launches += call.count;
    if (bandwidth_seconds <= hardware.kernel_floor) time.floor_bound += call.count;
  }
  return time;
}

double crossover_tokens(std::int64_t vectors, std::int64_t d, int bytes_per_element,
                        const Hardware& hardware) {
  const double per_token =
      static_cast<double>(vectors) * static_cast<double>(d) * bytes_per_element;
  if (per_token <= 0) return 0;
  return hardware.kernel_floor * hardware.hbm_bandwidth * hardware.memory_efficiency / per_token;
}

BlockLayout mode_layout(ResidualMode mode, const CostInputs& resolved) {
  if (mode == ResidualMode::full) return uniform_block_layout(resolved.sublayers, 1);
  if (mode == ResidualMode::block) return block_layout_of(resolved);
  throw Error("implementation strategies apply to Full and Block AttnRes, not " + to_string(mode));
}

BlockLayout mode_groups(ResidualMode mode, const CostInputs& resolved) {
  if (mode == ResidualMode::full) {
    return uniform_block_layout(
        resolved.sublayers,
        best_full_schedule_block(resolved.sublayers, resolved.d_model).block_size);
  }
  return mode_layout(mode, resolved);
}

BlockLayout scheme_layout(const AttnResConfig& scheme, const CostInputs& resolved) {
  if (scheme.mode == ResidualMode::block && scheme.block_size > 0)
    return uniform_block_layout(resolved.sublayers, scheme.block_size);
  if (scheme.mode == ResidualMode::denseformer) return mode_layout(ResidualMode::full, resolved);
  return mode_layout(scheme.mode, resolved);
}

BlockLayout scheme_groups(const AttnResConfig& scheme, const CostInputs& resolved) {
  if (scheme.mode == ResidualMode::block) return scheme_layout(scheme, resolved);
  return mode_groups(ResidualMode::full, resolved);
}

StrategyCost scheme_strategy_cost(Strategy strategy, const AttnResConfig& scheme,
                                  const CostInputs& resolved) {
  const ReadOps ops = read_ops_of(scheme);
  return strategy_cost(strategy, scheme_layout(scheme, resolved), scheme_groups(scheme, resolved),
                       ops);
}

StrategyStep strategy_step(Strategy strategy, ResidualMode mode, const CostInputs& resolved,
                           Phase phase, bool training, const Hardware& hardware) {
  AttnResConfig scheme;
  scheme.mode = mode;
  return strategy_step(strategy, scheme, resolved, phase, training, hardware);
}

StrategyStep strategy_step(Strategy strategy, const AttnResConfig& scheme,
                           const CostInputs& resolved, Phase phase, bool training,
                           const Hardware& hardware) {
  const StrategyCost cost = scheme_strategy_cost(strategy, scheme, resolved);
  StrategyStep step;
  step.strategy = strategy;
  const double B = static_cast<double>(resolved.batch);
  step.tokens = phase == Phase::decode ? B : B * static_cast<double>(resolved.tokens);
  const int b = bytes_per_element(resolved.dtype);
  const std::int64_t d = resolved.d_model;
  step.forward = calls_time(cost.forward_calls, d, step.tokens, b, hardware);
  // The standard residual: one add per sublayer each way (read h and f(h), write h').
  const std::vector<KernelCall> adds = standard_residual_calls(resolved.sublayers);
  step.standard_forward = calls_time(adds, d, step.tokens, b, hardware);
  const StackTime stack = stack_time(resolved, phase, hardware);
  const double model_forward = stack.stack_seconds[static_cast<int>(ResidualScheme::standard)];
  step.model_seconds = model_forward;
  double mechanism = step.forward.seconds - step.standard_forward.seconds;
  if (training) {
    step.backward = calls_time(cost.backward_calls, d, step.tokens, b, hardware);
    step.standard_backward = step.standard_forward;
    step.model_seconds = 3 * model_forward;  // backward = 2 x forward (docs/math.md §3.4)
    mechanism += step.backward.seconds - step.standard_backward.seconds;
  }
  step.overhead_seconds = mechanism;
  step.overhead_fraction = step.model_seconds > 0 ? mechanism / step.model_seconds : 0;
  return step;
}

RecomputeReport recompute_report(Checkpointing policy, ResidualMode mode, Strategy strategy,
                                 const CostInputs& in) {
  RecomputeReport report;
  report.policy = policy;
  report.mode = mode;
  report.strategy = strategy;
  const BlockLayout layout = mode_layout(mode, in);
  const auto reads = read_sources(layout);
  const std::int64_t P = in.pp, C = in.pp * in.vpp;
  const auto last = stage_last_sublayers(in);
  const auto boundaries = pipeline_boundaries(layout, in.pp, in.vpp, last);
  const double tokens = static_cast<double>(in.batch) * static_cast<double>(in.tokens);
  const double b = bytes_per_element(in.dtype);
  const double vector_bytes = static_cast<double>(in.d_model) * tokens * b;
  // Activations per sublayer (rank_memory.hpp: Korthikanti et al. 2022 term by term, for this
  // architecture, under its attention-score policy; the checkpointing policy here replaces full
  // recompute) and forward FLOPs per sublayer (architecture.hpp).
  CostInputs stored = in;
  if (stored.recompute == RecomputePolicy::full) stored.recompute = RecomputePolicy::selective;
  auto activations_of = [&](std::int64_t s) { return sublayer_activation_bytes(stored, s); };
  auto flops_of = [&](std::int64_t s) {
    return sublayer_flops_per_token(in, s, static_cast<double>(in.tokens) / 2.0) * tokens;
  };
  const double D = static_cast<double>(in.d_model);
  report.forward_flops = model_flops_per_token(in) * tokens;
  // Saved tensors of each read, spread over the reads (the strategy's per-read pattern).
  auto saved_of_read = [&](std::int64_t r) -> double {
    const std::int64_t n = reads[static_cast<std::size_t>(r)].sources();
    switch (strategy) {
      case Strategy::stack:
        return 2.0 * static_cast<double>(n);
      case Strategy::arena:
        return static_cast<double>(n);
      case Strategy::fused_two_phase:
        return 1.0;
      case Strategy::fused_one_shot:
        return 0.0;
    }
    return 0.0;
  };
  report.ranks.resize(static_cast<std::size_t>(P));
  for (std::int64_t r = 0; r < P; ++r) report.ranks[static_cast<std::size_t>(r)].rank = r;
  for (std::int64_t c = 0; c < C; ++c) {
    RecomputeRank& rank = report.ranks[static_cast<std::size_t>(c % P)];
    const std::int64_t first = c == 0 ? 1 : last[static_cast<std::size_t>(c - 1)] + 1;
    const std::int64_t end = last[static_cast<std::size_t>(c)];
    const std::int64_t sublayers = end - first + 1;
    ++rank.chunks;
    rank.sublayers += sublayers;
    // History: what the chunk received (the embedding alone for chunk 0) and the blocks it
    // completes plus its open partial sum.
    const double received =
        c == 0 ? 1.0
               : static_cast<double>(boundaries[static_cast<std::size_t>(c - 1)].naive_vectors);
    const double produced =
        static_cast<double>(layout.completed_after(end) - layout.completed_after(first - 1)) +
        (c + 1 < C && boundaries[static_cast<std::size_t>(c)].partial ? 1.0 : 0.0);
    double saved = 0, depth_flops = 0, chunk_activations = 0, chunk_flops = 0, one_layer = 0;
    for (std::int64_t s = first; s <= end; ++s) {
      saved += saved_of_read(s - 1);
      chunk_activations += activations_of(s);
      chunk_flops += flops_of(s);
      if (s % 2 == 1)
        one_layer =
            std::max(one_layer, activations_of(s) + (s < end ? activations_of(s + 1) : 0.0));
      const double n = static_cast<double>(reads[static_cast<std::size_t>(s - 1)].sources());
      depth_flops += (6 * n + 2) * D * tokens;
    }
    if (first % 2 == 0) one_layer = std::max(one_layer, activations_of(first));
    chunk_flops += depth_flops;
    switch (policy) {
      case Checkpointing::none:
        rank.activation_bytes += chunk_activations;
        rank.history_bytes += (received + produced) * vector_bytes;
        rank.saved_bytes += saved * vector_bytes;
        break;
      case Checkpointing::layers: {
        // One checkpoint (the layer's input: the partial sum, or h) per transformer layer the
        // chunk touches; block summaries kept; one layer's activations live while it recomputes.
        const std::int64_t layers = (end + 1) / 2 - (first + 1) / 2 + 1;
        rank.activation_bytes += static_cast<double>(layers) * vector_bytes;
        rank.history_bytes += (received + produced) * vector_bytes;
        rank.transient_bytes = std::max(rank.transient_bytes, one_layer + saved * vector_bytes);
        rank.recompute_flops += chunk_flops;
        break;
      }
      case Checkpointing::chunk:
        // Only the received history stays; the chunk's activations, its block summaries and
        // saved tensors come back while its backward runs.
        rank.history_bytes += received * vector_bytes;
        rank.transient_bytes =
            std::max(rank.transient_bytes, chunk_activations + (produced + saved) * vector_bytes);
        rank.recompute_flops += chunk_flops;
        break;
    }
  }
  return report;
}

}  // namespace attnres
