#include "attnres/cost_metrics.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "attnres/cost_input_fields.hpp"
#include "attnres/format.hpp"

namespace attnres {

using nlohmann::json;

namespace {

double d_of(const CostReport& r) {
  return static_cast<double>(r.inputs.d_model);
}

// The I/O rows of the other schemes (kSchemeIoKeys): one metric per row in elements and in units
// of d. Descriptions carry the row's formula and schedule, taken from scheme_cost itself.
template <std::size_t I>
double scheme_io_total(const Evaluation& e) {
  return e.cost->scheme_io[I].total();
}
template <std::size_t I>
double scheme_io_multiple(const Evaluation& e) {
  return e.cost->scheme_io[I].total() / d_of(*e.cost);
}

std::string scheme_io_description(const SchemeIoKey& key) {
  CostInputs in;
  in.sublayers = 128;  // a size where every row takes its usual schedule (W = 8 < L)
  in.blocks = 8;
  in.d_model = 1024;
  const CostInputs resolved = resolve_cost_inputs(in);
  const SchemeCost cost = scheme_cost(named_scheme(key.scheme, resolved), resolved);
  std::string text = cost_metric_label(std::string("io_elements_per_sublayer.") + key.key);
  if (!key.one_shot) {
    text += ", ";
    text += cost.io_schedule.substr(0, cost.io_schedule.find_first_of(",:"));
  }
  text += ": ";
  text += key.one_shot ? cost.io_one_shot_formula : cost.io_formula;
  return text;
}

template <std::size_t... I>
std::vector<CostMetric> scheme_io_metrics(bool multiples, std::index_sequence<I...>) {
  return {(multiples
               ? CostMetric{std::string("io_multiples_of_d.") + kSchemeIoKeys[I].key, "x d",
                            "I/O per sublayer in units of d", &scheme_io_multiple<I>}
               : CostMetric{std::string("io_elements_per_sublayer.") + kSchemeIoKeys[I].key,
                            "elements/token/sublayer", scheme_io_description(kSchemeIoKeys[I]),
                            &scheme_io_total<I>})...};
}

// `paper` with the scheme rows inserted after the last io_elements_per_sublayer and
// io_multiples_of_d entries.
std::vector<CostMetric> with_scheme_io_metrics(const std::vector<CostMetric>& paper) {
  std::vector<CostMetric> out = paper;
  for (const bool multiples : {false, true}) {
    const std::string group = multiples ? "io_multiples_of_d." : "io_elements_per_sublayer.";
    auto last = out.begin();
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (it->key.rfind(group, 0) == 0) last = it + 1;
    }
    const auto rows = scheme_io_metrics(multiples, std::make_index_sequence<kSchemeIoKeyCount>{});
    out.insert(last, rows.begin(), rows.end());
  }
  return out;
}

}  // namespace

namespace {

RankMemory peak_of(const Evaluation& e) {
  RankMemory worst;
  for (const RankMemory& m : *e.memory)
    if (m.total() >= worst.total()) worst = m;
  return worst;
}

}  // namespace

const std::vector<CostMetric>& cost_metrics() {
  static const std::vector<CostMetric> paper_metrics = {
      // docs/math.md §3.1 / paper Table 1
      {"io_elements_per_sublayer.standard", "elements/token/sublayer",
       "standard residual: 2d reads + d writes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.standard.total();
       }},
      {"io_elements_per_sublayer.block_two_phase", "elements/token/sublayer",
       "Block AttnRes, two-phase: (N/S + 5)d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.block_two_phase.total();
       }},
      {"io_elements_per_sublayer.full_two_phase", "elements/token/sublayer",
       "Full AttnRes, two-phase (App. B): (S + N)d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_two_phase.total();
       }},
      {"io_elements_per_sublayer.full_naive", "elements/token/sublayer",
       "Full AttnRes, naive: mean over l of 2(l-1)d + d = L·d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_naive.total();
       }},
      {"io_elements_per_sublayer.mhc", "elements/token/sublayer",
       "mHC with m streams: (8m + 2)d + 2m^2 + 4m",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.mhc.total();
       }},
      {"io_reads_elements_per_sublayer.standard", "elements/token/sublayer", "reads only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.standard.reads;
       }},
      {"io_reads_elements_per_sublayer.block_two_phase", "elements/token/sublayer", "reads only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.block_two_phase.reads;
       }},
      {"io_reads_elements_per_sublayer.full_two_phase", "elements/token/sublayer", "reads only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_two_phase.reads;
       }},
      {"io_reads_elements_per_sublayer.full_naive", "elements/token/sublayer", "reads only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_naive.reads;
       }},
      {"io_reads_elements_per_sublayer.mhc", "elements/token/sublayer", "reads only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.mhc.reads;
       }},
      {"io_writes_elements_per_sublayer.standard", "elements/token/sublayer", "writes only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.standard.writes;
       }},
      {"io_writes_elements_per_sublayer.block_two_phase", "elements/token/sublayer", "writes only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.block_two_phase.writes;
       }},
      {"io_writes_elements_per_sublayer.full_two_phase", "elements/token/sublayer", "writes only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_two_phase.writes;
       }},
      {"io_writes_elements_per_sublayer.full_naive", "elements/token/sublayer", "writes only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_naive.writes;
       }},
      {"io_writes_elements_per_sublayer.mhc", "elements/token/sublayer", "writes only",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.mhc.writes;
       }},
      {"io_multiples_of_d.standard", "x d", "I/O per sublayer in units of d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.standard.total() / d_of(r);
       }},
      {"io_multiples_of_d.block_two_phase", "x d", "I/O per sublayer in units of d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.block_two_phase.total() / d_of(r);
       }},
      {"io_multiples_of_d.full_two_phase", "x d", "I/O per sublayer in units of d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_two_phase.total() / d_of(r);
       }},
      {"io_multiples_of_d.full_naive", "x d", "I/O per sublayer in units of d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.full_naive.total() / d_of(r);
       }},
      {"io_multiples_of_d.mhc", "x d", "I/O per sublayer in units of d (scalar terms / d)",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.io.mhc.total() / d_of(r);
       }},
      {"full_best_schedule.block_size", "sublayers", "schedule block S minimising (S + ceil(L/S))d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.full_best_schedule.block_size);
       }},
      {"full_best_schedule.blocks", "blocks", "N = ceil(L/S) at that S",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.full_best_schedule.blocks);
       }},
      {"full_best_schedule.io_elements", "elements/token/sublayer", "Full two-phase I/O at that S",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.full_best_schedule.io_elements;
       }},
      // docs/math.md §3.2
      {"history_vectors_per_token.full", "vectors/token", "Full AttnRes keeps L + 1 outputs",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.history_full_vectors);
       }},
      {"history_vectors_per_token.block", "vectors/token",
       "Block AttnRes keeps N + 1 summaries (+ the running partial)",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.history_block_vectors);
       }},
      {"history_bytes_per_token.full", "bytes/token", "(L + 1)·d·b",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.history_full_vectors) * d_of(r) *
                bytes_per_element(r.inputs.dtype);
       }},
      {"history_bytes_per_token.block", "bytes/token", "(N + 1)·d·b",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.history_block_vectors) * d_of(r) *
                bytes_per_element(r.inputs.dtype);
       }},
      {"prefill_history_bytes.total", "bytes", "B·b·N·T·d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.total_bytes);
       }},
      {"prefill_history_bytes.per_device", "bytes", "divided by the sequence shards",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_bytes);
       }},
      {"prefill_history_bytes.per_device_chunked", "bytes", "T replaced by the chunk length",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_chunked_bytes);
       }},
      {"prefill_history_gb.total", "GB (1e9 bytes)", "decimal gigabytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.total_bytes) / 1e9;
       }},
      {"prefill_history_gb.per_device", "GB (1e9 bytes)", "decimal gigabytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_bytes) / 1e9;
       }},
      {"prefill_history_gb.per_device_chunked", "GB (1e9 bytes)", "decimal gigabytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_chunked_bytes) / 1e9;
       }},
      {"prefill_history_gib.total", "GiB (2^30 bytes)", "binary gibibytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.total_bytes) / 1073741824.0;
       }},
      {"prefill_history_gib.per_device", "GiB (2^30 bytes)", "binary gibibytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_bytes) / 1073741824.0;
       }},
      {"prefill_history_gib.per_device_chunked", "GiB (2^30 bytes)", "binary gibibytes",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.prefill.per_device_chunked_bytes) / 1073741824.0;
       }},
      // docs/math.md §3.3, the paper's accounting
      {"pipeline_comm_elements_per_token.blocks_per_chunk", "blocks", "N_p = N / (P·V)",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.blocks_per_chunk;
       }},
      {"pipeline_comm_elements_per_token.naive", "elements/token", "paper: C(C-1)/2 · N_p · d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.naive_elements;
       }},
      {"pipeline_comm_elements_per_token.cached", "elements/token",
       "paper: [P(P-1)/2 + (V-1)P^2] · N_p · d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.cached_elements;
       }},
      {"pipeline_comm_elements_per_token.peak_transition_naive", "elements/token",
       "paper: (C-1) · N_p · d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.peak_naive_elements;
       }},
      {"pipeline_comm_elements_per_token.peak_transition_cached", "elements/token",
       "paper: P · N_p · d (P-1 when V = 1)",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.peak_cached_elements;
       }},
      {"pipeline_comm_elements_per_token.naive_per_d", "x N_p·d", "paper naive in units of N_p·d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.naive_elements / (r.pipeline_paper.blocks_per_chunk * d_of(r));
       }},
      {"pipeline_comm_elements_per_token.cached_per_d", "x N_p·d", "paper cached in units of N_p·d",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.pipeline_paper.cached_elements / (r.pipeline_paper.blocks_per_chunk * d_of(r));
       }},
      // docs/math.md §3.3, exact per-boundary sums (embedding and partial sums included)
      {"pipeline_exact_elements_per_token.naive", "elements/token", "sum over boundaries, naive",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.boundary_naive_elements);
       }},
      {"pipeline_exact_elements_per_token.cached", "elements/token",
       "sum over boundaries, cache of received summaries",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.boundary_cached_elements);
       }},
      {"pipeline_exact_elements_per_token.cached_own", "elements/token",
       "sum over boundaries, cache of received and own summaries",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.boundary_cached_own_elements);
       }},
      {"pipeline_exact_elements_per_token.peak_naive", "elements/token", "largest boundary, naive",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.boundary_peak_naive_elements);
       }},
      {"pipeline_exact_elements_per_token.peak_cached", "elements/token",
       "largest boundary, cached",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return static_cast<double>(r.boundary_peak_cached_elements);
       }},
      // arithmetic
      {"flops_per_token.depth_attention_full", "FLOP/token", "6d per (read, source) + 2d per read",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.depth_flops_full;
       }},
      {"flops_per_token.depth_attention_block", "FLOP/token", "6d per (read, source) + 2d per read",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.depth_flops_block;
       }},
      {"flops_per_token.model", "FLOP/token", "sublayers: 8d^2 + 2Td (attention), 6dF (SwiGLU)",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.model_flops;
       }},
      {"flops_per_token.block_fraction_of_model", "fraction", "depth attention (Block) / model",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.depth_flops_block / r.model_flops;
       }},
      {"flops_per_token.full_fraction_of_model", "fraction", "depth attention (Full) / model",
       [](const Evaluation& e) {
         const CostReport& r = *e.cost;
         return r.depth_flops_full / r.model_flops;
       }},
      {"time.prefill_overhead_block_two_phase", "fraction",
       "prefill: stack time with block_two_phase / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.prefill->overhead_fraction[1]; },
       CostMetric::Needs::time},
      {"time.prefill_overhead_block_one_shot", "fraction",
       "prefill: stack time with block_one_shot / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.prefill->overhead_fraction[2]; },
       CostMetric::Needs::time},
      {"time.prefill_overhead_full_two_phase", "fraction",
       "prefill: stack time with full_two_phase / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.prefill->overhead_fraction[3]; },
       CostMetric::Needs::time},
      {"time.prefill_overhead_full_naive", "fraction",
       "prefill: stack time with full_naive / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.prefill->overhead_fraction[4]; },
       CostMetric::Needs::time},
      {"time.prefill_stack_seconds_standard", "s",
       "prefill: roofline time of all L sublayers, standard residual",
       [](const Evaluation& e) { return e.prefill->stack_seconds[0]; }, CostMetric::Needs::time},
      {"time.decode_overhead_block_two_phase", "fraction",
       "decode: stack time with block_two_phase / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.decode->overhead_fraction[1]; }, CostMetric::Needs::time},
      {"time.decode_overhead_block_one_shot", "fraction",
       "decode: stack time with block_one_shot / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.decode->overhead_fraction[2]; }, CostMetric::Needs::time},
      {"time.decode_overhead_full_two_phase", "fraction",
       "decode: stack time with full_two_phase / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.decode->overhead_fraction[3]; }, CostMetric::Needs::time},
      {"time.decode_overhead_full_naive", "fraction",
       "decode: stack time with full_naive / standard - 1 (roofline)",
       [](const Evaluation& e) { return e.decode->overhead_fraction[4]; }, CostMetric::Needs::time},
      {"time.decode_stack_seconds_standard", "s",
       "decode: roofline time of all L sublayers, standard residual",
       [](const Evaluation& e) { return e.decode->stack_seconds[0]; }, CostMetric::Needs::time},
      {"pipeline.iteration_seconds", "s", "simulated training iteration, AttnRes",
       [](const Evaluation& e) { return e.pipeline->iteration_time_s; },
       CostMetric::Needs::pipeline},
      {"pipeline.standard_iteration_seconds", "s", "the same run with the standard residual",
       [](const Evaluation& e) { return e.pipeline->standard.iteration_seconds; },
       CostMetric::Needs::pipeline},
      {"pipeline.bubble_fraction", "fraction",
       "(iteration - busiest rank's compute) / busiest rank's compute",
       [](const Evaluation& e) { return e.pipeline->bubble_fraction; },
       CostMetric::Needs::pipeline},
      {"pipeline.closed_form_bubble_fraction", "fraction", "1F1B (P-1)/m, interleaved (P-1)/(V·m)",
       [](const Evaluation& e) { return e.pipeline->closed_form_bubble; },
       CostMetric::Needs::pipeline},
      {"pipeline.exposed_communication_seconds", "s", "iteration - iteration with free transfers",
       [](const Evaluation& e) { return e.pipeline->exposed_comm_s; }, CostMetric::Needs::pipeline},
      {"pipeline.step_seconds", "s",
       "training step, AttnRes: the iteration + exposed gradient collectives (docs/math.md §3.8)",
       [](const Evaluation& e) { return e.pipeline->step_time_s; }, CostMetric::Needs::pipeline},
      {"pipeline.standard_step_seconds", "s", "the same step with the standard residual",
       [](const Evaluation& e) { return e.pipeline->step_standard.total(); },
       CostMetric::Needs::pipeline},
      {"pipeline.attnres_overhead_fraction", "fraction",
       "AttnRes step / standard step - 1: the one step overhead (docs/math.md §3.8)",
       [](const Evaluation& e) { return e.pipeline->attnres_overhead_fraction; },
       CostMetric::Needs::pipeline},
      {"pipeline.overhead_residual_fraction", "fraction",
       "of the step overhead: the mechanism's kernels on the busiest rank, ÷ standard step",
       [](const Evaluation& e) { return e.pipeline->reconciliation.residual; },
       CostMetric::Needs::pipeline},
      {"pipeline.overhead_pp_fraction", "fraction",
       "of the step overhead: exposed pipeline transfers of the history, ÷ standard step",
       [](const Evaluation& e) { return e.pipeline->reconciliation.pp; },
       CostMetric::Needs::pipeline},
      {"pipeline.overhead_bubble_fraction", "fraction",
       "of the step overhead: the longer bubble, ÷ standard step",
       [](const Evaluation& e) { return e.pipeline->reconciliation.bubble; },
       CostMetric::Needs::pipeline},
      {"pipeline.strategies_overhead_fraction", "fraction",
       "the strategies view of the same setting: one device, forward + backward, no pipeline",
       [](const Evaluation& e) { return e.pipeline->reconciliation.strategy; },
       CostMetric::Needs::pipeline},
      {"pipeline.peak_memory_bytes_per_rank", "bytes",
       "largest live activations + history on a rank",
       [](const Evaluation& e) { return e.pipeline->peak_memory_bytes_per_rank; },
       CostMetric::Needs::pipeline},
      {"pipeline.transferred_bytes", "bytes",
       "all stage-boundary transfers of one iteration, both directions",
       [](const Evaluation& e) { return e.pipeline->attnres.transferred_bytes; },
       CostMetric::Needs::pipeline},
      // Memory of the largest pipeline rank (docs/math.md §3.7), JSON path memory.per_rank.*.
      {"memory.per_rank.weights_bytes", "bytes", "weights on the largest rank (docs/math.md §3.7)",
       [](const Evaluation& e) { return peak_of(e).weights; }, CostMetric::Needs::memory},
      {"memory.per_rank.gradients_bytes", "bytes", "gradients on the largest rank",
       [](const Evaluation& e) { return peak_of(e).gradients; }, CostMetric::Needs::memory},
      {"memory.per_rank.optimizer_bytes", "bytes", "optimizer states on the largest rank",
       [](const Evaluation& e) { return peak_of(e).optimizer; }, CostMetric::Needs::memory},
      {"memory.per_rank.activations_bytes", "bytes",
       "activations of the micro-batches in flight on the largest rank",
       [](const Evaluation& e) { return peak_of(e).activations; }, CostMetric::Needs::memory},
      {"memory.per_rank.attnres_history_bytes", "bytes",
       "AttnRes history and the strategy's saved tensors on the largest rank",
       [](const Evaluation& e) { return peak_of(e).attnres_history; }, CostMetric::Needs::memory},
      {"memory.per_rank.kv_cache_bytes", "bytes", "KV cache (inference) on the largest rank",
       [](const Evaluation& e) { return peak_of(e).kv_cache; }, CostMetric::Needs::memory},
      {"memory.per_rank.total_bytes", "bytes", "everything on the largest rank",
       [](const Evaluation& e) { return peak_of(e).total(); }, CostMetric::Needs::memory},
      {"memory.per_rank.capacity_fraction", "fraction",
       "largest rank's total / device memory (> 1: does not fit; NaN without a capacity)",
       [](const Evaluation& e) {
         const RankMemory m = peak_of(e);
         return m.known_capacity() ? m.total() / m.capacity
                                   : std::numeric_limits<double>::quiet_NaN();
       },
       CostMetric::Needs::memory},
  };
  // The other schemes' rows go after the last paper row of their group.
  static const std::vector<CostMetric> metrics = with_scheme_io_metrics(paper_metrics);
  return metrics;
}

std::string cost_metric_label(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"standard", "standard"},
      {"block_two_phase", "Block AttnRes (two-phase)"},
      {"full_two_phase", "Full AttnRes (two-phase)"},
      {"full_naive", "Full AttnRes (naive)"},
      {"block_one_shot", "Block AttnRes (one-shot)"},
      {"mhc", "mHC"},
      {"full", "Full AttnRes"},
      {"denseformer", "DenseFormer"},
      {"denseformer_one_shot", "DenseFormer (one-shot)"},
      {"rescaled", "rescaled residual"},
      {"mhc_static", "mHC (static)"},
      {"full_sigmoid", "Full, sigmoid"},
      {"full_sigmoid_normalized", "Full, normalised sigmoid"},
      {"full_no_key_norm", "Full, no key norm"},
      {"full_window", "Full, window 8"},
      {"full_multihead", "Full, multi-head"},
      {"full_input_query", "Full, input query"},
      {"full_scalars", "Full, scalars"},
      {"block_sigmoid", "Block, sigmoid"},
      {"block_sigmoid_normalized", "Block, normalised sigmoid"},
      {"block_no_key_norm", "Block, no key norm"},
      {"block_multihead", "Block, multi-head"},
      {"block_input_query", "Block, input query"},
      {"block_scalars", "Block, scalars"},
      {"block", "Block AttnRes"},
      {"total", "total"},
      {"per_device", "per device"},
      {"per_device_chunked", "per device, chunked prefill"},
      {"naive", "naive"},
      {"cached", "cached"},
      {"cached_own", "cached + own"},
      {"peak_naive", "peak boundary, naive"},
      {"peak_cached", "peak boundary, cached"},
      {"naive_per_d", "naive"},
      {"cached_per_d", "cached"},
      {"peak_transition_naive", "peak transition, naive"},
      {"peak_transition_cached", "peak transition, cached"},
      {"depth_attention_full", "depth attention, Full"},
      {"depth_attention_block", "depth attention, Block"},
      {"model", "model"},
      {"block_fraction_of_model", "Block / model"},
      {"full_fraction_of_model", "Full / model"},
      {"iteration_seconds", "iteration, AttnRes"},
      {"standard_iteration_seconds", "iteration, standard"},
      {"bubble_fraction", "bubble"},
      {"closed_form_bubble_fraction", "bubble, closed form"},
      {"exposed_communication_seconds", "exposed communication"},
      {"attnres_overhead_fraction", "AttnRes overhead"},
      {"peak_memory_bytes_per_rank", "peak memory per rank"},
      {"transferred_bytes", "transferred"}};
  if (key.rfind("time.", 0) == 0) {
    std::string name = key.substr(5);
    for (const char* phase : {"prefill_overhead_", "decode_overhead_"}) {
      if (name.rfind(phase, 0) == 0) {
        const std::string scheme = name.substr(std::string(phase).size());
        auto it = names.find(scheme);
        return std::string(phase).substr(0, std::string(phase).find('_')) + ", " +
               (it == names.end() ? scheme : it->second);
      }
    }
    return name;
  }
  const std::string name = key.substr(key.find('.') + 1);
  auto it = names.find(name);
  return it == names.end() ? name : it->second;
}

std::string cost_metric_axis(const std::string& key) {
  static const std::map<std::string, std::string> groups = {
      {"io_elements_per_sublayer", "residual I/O per sublayer"},
      {"io_reads_elements_per_sublayer", "residual reads per sublayer"},
      {"io_writes_elements_per_sublayer", "residual writes per sublayer"},
      {"io_multiples_of_d", "residual I/O per sublayer"},
      {"full_best_schedule", "best Full two-phase schedule"},
      {"history_vectors_per_token", "stored depth history"},
      {"history_bytes_per_token", "stored depth history"},
      {"prefill_history_bytes", "prefill block history"},
      {"prefill_history_gb", "prefill block history"},
      {"prefill_history_gib", "prefill block history"},
      {"pipeline_comm_elements_per_token", "pipeline traffic, paper accounting"},
      {"pipeline_exact_elements_per_token", "pipeline traffic, exact"},
      {"flops_per_token", "arithmetic"},
      {"time", "AttnRes time overhead (roofline)"},
      {"pipeline", "pipeline simulation"}};
  const CostMetric* metric = find_cost_metric(key);
  const std::string group = key.substr(0, key.find('.'));
  auto it = groups.find(group);
  return (it == groups.end() ? group : it->second) + (metric ? " (" + metric->unit + ")" : "");
}

const CostMetric* find_cost_metric(const std::string& key) {
  for (const auto& metric : cost_metrics()) {
    if (metric.key == key) return &metric;
  }
  return nullptr;
}

std::string closest_cost_metric(const std::string& key) {
  std::vector<std::string> keys;
  for (const auto& metric : cost_metrics()) keys.push_back(metric.key);
  return did_you_mean(key, keys);
}

json metric_json_value(const CostMetric& metric, double value) {
  const bool counts = metric.unit == "vectors/token" || metric.unit == "blocks" ||
                      metric.unit == "sublayers" || metric.unit == "bytes";
  if (!std::isfinite(value)) return nullptr;
  if (counts && value == std::floor(value) && std::abs(value) < 9e15)
    return static_cast<std::int64_t>(value);
  return value;
}

json evaluation_to_json(const Evaluation& evaluation) {
  json root = cost_report_to_json(*evaluation.cost);
  // Memory as memory_to_json writes it everywhere (the metrics are its per_rank numbers).
  if (evaluation.memory) root["memory"] = memory_to_json(*evaluation.memory);
  for (const auto& metric : cost_metrics()) {
    const bool available = metric.needs == CostMetric::Needs::cost ||
                           (metric.needs == CostMetric::Needs::time && evaluation.prefill) ||
                           (metric.needs == CostMetric::Needs::pipeline && evaluation.pipeline);
    if (!available || metric.needs == CostMetric::Needs::cost) continue;
    const auto dot = metric.key.find('.');
    root[metric.key.substr(0, dot)][metric.key.substr(dot + 1)] =
        metric_json_value(metric, metric.value(evaluation));
  }
  return root;
}

}  // namespace attnres
