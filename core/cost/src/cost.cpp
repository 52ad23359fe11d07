#include "attnres/cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnres/block_layout.hpp"
#include "attnres/checked_math.hpp"
#include "attnres/format.hpp"

namespace attnres {

std::string to_string(DType dtype) {
  return enum_name(kDTypeNames, dtype);
}

DType parse_dtype(const std::string& text, const std::string& where) {
  return parse_enum(kDTypeNames, text, where, "unknown dtype");
}

int bytes_per_element(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::fp16:
      return 2;
    case DType::fp32:
      return 4;
    case DType::fp8:
      return 1;
  }
  return 0;
}

// ---------------------------------------------------------------- docs/math.md §3.1, paper Table 1

ResidualIo io_standard(std::int64_t d) {
  // Read h_l and f_l(h_l), write h_{l+1}.
  return {2.0 * static_cast<double>(d), static_cast<double>(d)};
}

ResidualIo io_block_two_phase(std::int64_t blocks, std::int64_t block_size, std::int64_t d) {
  // Phase 1 reads the N block summaries once per block (amortised over its S sublayers: N/S),
  // phase 2 reads 3d (statistics, partial sum, output); writes the partial sum and the output.
  const double D = static_cast<double>(d);
  return {(static_cast<double>(blocks) / static_cast<double>(block_size) + 3.0) * D, 2.0 * D};
}

ResidualIo io_full_two_phase(std::int64_t blocks, std::int64_t block_size, std::int64_t d) {
  // Appendix B: (S + N - 2)d reads, 2d writes per sublayer.
  const double D = static_cast<double>(d);
  return {static_cast<double>(block_size + blocks - 2) * D, 2.0 * D};
}

ResidualIo io_full_naive_at(std::int64_t sublayer, std::int64_t d) {
  // Keys and values of the l - 1 earlier outputs, then write the output.
  const double D = static_cast<double>(d);
  return {2.0 * static_cast<double>(sublayer - 1) * D, D};
}

ResidualIo io_full_naive_mean(std::int64_t sublayers, std::int64_t d) {
  // Mean over l = 1..L of 2(l-1)d reads = (L - 1)d; total L·d.
  const double D = static_cast<double>(d);
  return {static_cast<double>(sublayers - 1) * D, D};
}

ResidualIo io_mhc(std::int64_t streams, std::int64_t d) {
  // Table 1: (8m + 2)d + 2m^2 + 4m in all; the paper splits the vector terms (6m+2)d reads,
  // 2m·d writes. The scalar mixing terms (2m^2 + 4m) are split evenly (our choice, docs/math.md
  // §3.1).
  const double m = static_cast<double>(streams);
  const double D = static_cast<double>(d);
  const double scalars = m * m + 2.0 * m;
  return {(6.0 * m + 2.0) * D + scalars, 2.0 * m * D + scalars};
}

ResidualIo io_block_one_shot(std::int64_t sublayers, std::int64_t block_size, std::int64_t d) {
  // Every source of every read twice (keys, then values), mean over the L + 1 reads, plus the
  // output write: the time model's block_one_shot row (docs/math.md §3.4).
  const double mean_sources =
      static_cast<double>(depth_read_source_pairs(ResidualMode::block, sublayers, block_size)) /
      static_cast<double>(sublayers + 1);
  const double D = static_cast<double>(d);
  return {2.0 * mean_sources * D, D};
}

ResidualIo io_full_window_mean(std::int64_t sublayers, std::int64_t window, std::int64_t d) {
  // The naive row 2(l-1)d with l - 1 capped at W (docs/scheme-costs.md): sum over l = 1..L of
  // min(l-1, W) is L(L-1)/2 when W >= L - 1, else W(W+1)/2 + (L-1-W)W = W(2L - W - 1)/2.
  const double L = static_cast<double>(sublayers), W = static_cast<double>(window);
  const double D = static_cast<double>(d);
  if (window >= sublayers - 1) return io_full_naive_mean(sublayers, d);
  return {W * (2.0 * L - W - 1.0) / L * D, D};
}

std::int64_t block_count(std::int64_t sublayers, std::int64_t block_size) {
  return (sublayers + block_size - 1) / block_size;
}

ScheduleChoice best_full_schedule_block(std::int64_t sublayers, std::int64_t d) {
  ScheduleChoice best;
  std::int64_t best_sum = 0;
  for (std::int64_t s = 1; s <= sublayers; ++s) {
    const std::int64_t n = block_count(sublayers, s);
    if (best.block_size == 0 || s + n < best_sum) {
      best_sum = s + n;
      best.block_size = s;
      best.blocks = n;
    }
    if (s > n + 1) break;  // past sqrt(L), S + ceil(L/S) only grows
  }
  best.io_elements = io_full_two_phase(best.blocks, best.block_size, d).total();
  return best;
}

// ---------------------------------------------------------------- docs/math.md §3.2

std::int64_t history_vectors_full(std::int64_t sublayers) {
  return sublayers + 1;
}
std::int64_t history_vectors_block(std::int64_t blocks) {
  return blocks + 1;
}

PrefillMemory prefill_history_bytes(std::int64_t batch, std::int64_t tokens, std::int64_t blocks,
                                    std::int64_t d, int bytes_per_element, std::int64_t seq_shards,
                                    std::int64_t chunk_tokens) {
  const std::string what = "prefill history bytes (B·b·N·T·d)";
  const std::int64_t per_token = checked_multiply(
      checked_multiply(checked_multiply(batch, bytes_per_element, what), blocks, what), d, what);
  PrefillMemory memory;
  memory.total_bytes = checked_multiply(per_token, tokens, what);
  memory.per_device_bytes = memory.total_bytes / seq_shards;
  const std::int64_t chunk = chunk_tokens > 0 ? std::min(chunk_tokens, tokens) : tokens;
  memory.per_device_chunked_bytes = checked_multiply(per_token, chunk, what) / seq_shards;
  return memory;
}

// ---------------------------------------------------------------- docs/math.md §3.3

PipelineCommPaper pipeline_comm_paper(std::int64_t pp, std::int64_t vpp, std::int64_t blocks,
                                      std::int64_t d) {
  const double P = static_cast<double>(pp), V = static_cast<double>(vpp);
  const double C = P * V;
  PipelineCommPaper comm;
  comm.blocks_per_chunk = static_cast<double>(blocks) / C;
  const double unit = comm.blocks_per_chunk * static_cast<double>(d);  // N_p · d
  comm.naive_elements = C * (C - 1.0) / 2.0 * unit;
  comm.cached_elements = (P * (P - 1.0) / 2.0 + (V - 1.0) * P * P) * unit;
  comm.peak_naive_elements = (C - 1.0) * unit;
  comm.peak_cached_elements = (vpp > 1 ? P : P - 1.0) * unit;
  return comm;
}

std::vector<std::int64_t> chunk_last_sublayers(std::int64_t sublayers, std::int64_t chunks) {
  std::vector<std::int64_t> last(static_cast<std::size_t>(chunks));
  const std::int64_t base = sublayers / chunks, extra = sublayers % chunks;
  std::int64_t end = 0;
  for (std::int64_t c = 0; c < chunks; ++c) {
    end += base + (c < extra ? 1 : 0);
    last[static_cast<std::size_t>(c)] = end;
  }
  return last;
}

std::vector<BoundaryPayload> pipeline_boundaries(ResidualMode mode, std::int64_t sublayers,
                                                 std::int64_t block_size, std::int64_t pp,
                                                 std::int64_t vpp) {
  if (mode == ResidualMode::full) return uniform_pipeline_boundaries(sublayers, 1, pp, vpp);
  if (mode != ResidualMode::standard) {
    return uniform_pipeline_boundaries(sublayers, block_size, pp, vpp);
  }
  // The standard residual: the hidden state h is the whole payload of every boundary (the same
  // boundaries as one block spanning the model, with one vector each).
  auto out = uniform_pipeline_boundaries(sublayers, sublayers, pp, vpp);
  for (auto& b : out) {
    b.completed_blocks = 0;
    b.partial = false;
    b.naive_vectors = b.cached_vectors = b.cached_own_vectors = 1;
    b.naive_block_vectors = b.cached_block_vectors = 0;
  }
  return out;
}

// ---------------------------------------------------------------- arithmetic

std::int64_t depth_read_source_pairs(ResidualMode mode, std::int64_t sublayers,
                                     std::int64_t block_size) {
  const std::int64_t L = sublayers;
  const std::string what = "depth-attention source count";
  switch (mode) {
    case ResidualMode::standard:
    case ResidualMode::mhc:
      return 0;  // no reads over stored sources
    case ResidualMode::full:
    case ResidualMode::denseformer:
    case ResidualMode::rescaled:
      // Read r sees r + 1 sources, r = 0..L.
      return checked_multiply(L + 1, L + 2, what) / 2;
    case ResidualMode::block: {
      // The i-th sublayer of block n sees n sources, plus the partial sum when i >= 2; the final
      // read sees N + 1.
      const std::int64_t S = block_size, N = block_count(L, S), last_size = L - (N - 1) * S;
      const std::int64_t full_blocks =
          checked_multiply(S, checked_multiply(N - 1, N, what) / 2, what);
      return checked_add(checked_add(full_blocks, checked_multiply(N, last_size, what), what),
                         (L - N) + (N + 1), what);
    }
  }
  return 0;
}

std::int64_t depth_read_source_pairs_window(std::int64_t sublayers, std::int64_t window) {
  const std::int64_t L = sublayers, W = window;
  if (W <= 0 || W >= L) return depth_read_source_pairs(ResidualMode::full, L, 1);
  // Read r sees the embedding and min(r, W) outputs: sum over r = 0..L of (1 + min(r, W)).
  const std::string what = "windowed depth-attention source count";
  return checked_add(checked_add(L + 1, checked_multiply(W, W + 1, what) / 2, what),
                     checked_multiply(L - W, W, what), what);
}

double depth_attention_flops(ResidualMode mode, std::int64_t sublayers, std::int64_t block_size,
                             std::int64_t d) {
  if (mode == ResidualMode::standard) return 0.0;
  const double D = static_cast<double>(d);
  return static_cast<double>(depth_read_source_pairs(mode, sublayers, block_size)) * 6.0 * D +
         static_cast<double>(sublayers + 1) * 2.0 * D;
}

double model_flops_per_token(std::int64_t sublayers, std::int64_t d, std::int64_t ffn,
                             std::int64_t tokens) {
  const double D = static_cast<double>(d);
  const double attention = 8.0 * D * D + 2.0 * static_cast<double>(tokens) * D;
  const double mlp = 6.0 * D * static_cast<double>(ffn);
  const auto attention_count = static_cast<double>((sublayers + 1) / 2);
  const auto mlp_count = static_cast<double>(sublayers / 2);
  return attention_count * attention + mlp_count * mlp;
}

// ---------------------------------------------------------------- docs/math.md §3.5

double ScalingFit::loss_at(double compute) const {
  return A * std::pow(compute, -a);
}
double ScalingFit::compute_for(double loss) const {
  return std::pow(A / loss, 1.0 / a);
}

const std::array<ScalingFit, 3>& paper_scaling_fits() {
  static const std::array<ScalingFit, 3> fits = {ScalingFit{"baseline", 1.891, 0.057},
                                                 ScalingFit{"block", 1.870, 0.058},
                                                 ScalingFit{"full", 1.865, 0.057}};
  return fits;
}

ScalingAtLoss scaling_at_loss(double target_loss) {
  if (!(target_loss > 0.0) || !std::isfinite(target_loss)) {
    throw Error("target loss must be a positive number, got " + std::to_string(target_loss));
  }
  const auto& fits = paper_scaling_fits();
  ScalingAtLoss out;
  out.target_loss = target_loss;
  out.compute_baseline = fits[0].compute_for(target_loss);
  out.compute_block = fits[1].compute_for(target_loss);
  out.compute_full = fits[2].compute_for(target_loss);
  out.multiplier_block = out.compute_baseline / out.compute_block;
  out.multiplier_full = out.compute_baseline / out.compute_full;
  return out;
}

// ---------------------------------------------------------------- every residual scheme
// docs/scheme-costs.md is the contract for every row and every choice below.

namespace {

using Problem = std::optional<CostInputProblem>;

// The depth-attention heads of the *_multihead ablations: 16 when 16 divides d, else the largest
// divisor of d below 16.
int multihead_heads(std::int64_t d) {
  for (int h = 16; h > 1; --h) {
    if (d % h == 0) return h;
  }
  return 1;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ", ";
    out += word;
  }
  return out;
}

std::string with_hint(std::string message, const std::string& word,
                      const std::vector<std::string>& candidates) {
  const std::string hint = did_you_mean(word, candidates);
  if (!hint.empty()) {
    message += " (did you mean '";
    message += hint;
    message += "'?)";
  }
  return message;
}

const std::vector<std::string>& spec_keys() {
  static const std::vector<std::string> keys = {
      "block_size",   "gate",   "key_norm", "window",  "heads",
      "query_source", "mixing", "streams",  "dynamic", "sinkhorn_iterations"};
  return keys;
}

// The sizes a scheme is costed at (docs/scheme-costs.md "Sizes").
struct SchemeSizes {
  std::int64_t L = 0, d = 0;
  std::int64_t N = 0, S = 0;  // Block: its own blocks; Full layout: the two-phase schedule block
  std::int64_t window = 0;    // the effective window: 0 when off or W >= L (Full AttnRes)
  std::int64_t m = 0;
  bool full_layout = false;  // Full, DenseFormer (and rescaled): every output is a source
  bool input_query = false;
  bool values_only = false;  // weights known ahead: DenseFormer, mixing = scalars
};

SchemeSizes sizes_of(const AttnResConfig& scheme, const CostInputs& in) {
  SchemeSizes z;
  z.L = in.sublayers;
  z.d = in.d_model;
  z.N = in.blocks;
  z.S = in.block_size;
  if (scheme.mode == ResidualMode::block && scheme.block_size > 0) {
    z.S = scheme.block_size;
    z.N = block_count(z.L, z.S);
  }
  z.full_layout = scheme.mode == ResidualMode::full || scheme.mode == ResidualMode::denseformer ||
                  scheme.mode == ResidualMode::rescaled;
  if (scheme.mode == ResidualMode::full && scheme.window > 0 && scheme.window < z.L)
    z.window = scheme.window;
  z.m = scheme.streams;
  z.input_query = scheme.uses_query() && scheme.query_source == QuerySource::input;
  z.values_only = scheme.mode == ResidualMode::denseformer ||
                  (scheme.attention_mode() && scheme.mixing == DepthMixing::scalars);
  return z;
}

// (read, source) pairs of the scheme's layout over the L + 1 reads.
std::int64_t pairs_of(const AttnResConfig& scheme, const SchemeSizes& z) {
  if (scheme.mode == ResidualMode::block)
    return depth_read_source_pairs(ResidualMode::block, z.L, z.S);
  return depth_read_source_pairs_window(z.L, z.window);
}

std::string pairs_formula(const AttnResConfig& scheme, const SchemeSizes& z) {
  if (scheme.mode == ResidualMode::block) return "P = SN(N - 1)/2 + N(L - (N - 1)S) + L + 1";
  if (z.window > 0) return "P = (L + 1) + W(W + 1)/2 + (L - W)W";
  return "P = (L + 1)(L + 2)/2";
}

// The I/O row; formula and schedule text only when asked for (sweeps evaluate millions of
// settings).
ResidualIo io_row(const AttnResConfig& scheme, const CostInputs& in, bool one_shot,
                  std::string* formula, std::string* schedule) {
  const SchemeSizes z = sizes_of(scheme, in);
  auto say = [&](const char* f, const char* s) {
    if (formula) *formula = f;
    if (schedule) *schedule = s;
  };
  switch (scheme.mode) {
    case ResidualMode::standard:
      say("3d", "running sum: read h and f(h), write h (paper Table 1)");
      return io_standard(z.d);
    case ResidualMode::rescaled:
      say("3d", "running mean h <- (r h + v)/(r + 1): read h and v, write h (the standard row)");
      return io_standard(z.d);
    case ResidualMode::mhc:
      say("(8m + 2)d + 2m^2 + 4m", scheme.dynamic
                                       ? "stream update (paper Table 1)"
                                       : "stream update (paper Table 1's row; static coefficients "
                                         "are not subtracted)");
      return io_mhc(z.m, z.d);
    case ResidualMode::full:
    case ResidualMode::block:
    case ResidualMode::denseformer:
      break;
  }
  if (!one_shot && !z.input_query && z.window == 0) {
    if (z.full_layout) {
      say("(S + N)d", "two-phase, schedule block S (Appendix B)");
      return io_full_two_phase(z.N, z.S, z.d);
    }
    say("(N/S + 5)d", "two-phase (paper Table 1)");
    return io_block_two_phase(z.N, z.S, z.d);
  }
  // One-shot: each read reads its sources, twice (keys, then values) when scores need them,
  // once when the weights are known ahead; an input-dependent query also reads u.
  ResidualIo io;
  std::string f;
  if (!z.full_layout) {
    io = io_block_one_shot(z.L, z.S, z.d);
    f = z.values_only ? "(n + 1)d" : "(2n + 1)d";
  } else if (z.window > 0) {
    io = io_full_window_mean(z.L, z.window, z.d);
    f = z.values_only ? "(W(2L - W - 1)/(2L) + 1)d" : "(W(2L - W - 1)/L + 1)d";
  } else {
    io = io_full_naive_mean(z.L, z.d);
    f = z.values_only ? "((L - 1)/2 + 1)d" : "Ld";
  }
  if (z.values_only) io.reads /= 2.0;
  if (z.input_query) {
    io.reads += static_cast<double>(z.d);
    f += " + d";
  }
  if (formula) *formula = f;
  if (schedule) {
    *schedule = z.values_only ? "one-shot, values only" : "one-shot, keys and values";
    if (!z.full_layout) *schedule += " of n = P/(L + 1) sources per read";
    if (z.input_query) *schedule += ", plus u for the input-dependent query";
  }
  return io;
}

}  // namespace

namespace {

// The named schemes (docs/scheme-costs.md "Named schemes"), in table order.
enum class Variant {
  none,
  static_mhc,
  sigmoid,
  sigmoid_normalized,
  no_key_norm,
  window,
  multihead,
  input_query,
  scalars
};
struct NamedScheme {
  const char* name;
  ResidualMode mode;
  Variant variant;
  const char* summary;
};
constexpr NamedScheme kNamedSchemes[] = {
    {"standard", ResidualMode::standard, Variant::none, "standard residual h <- h + f(h)"},
    {"full", ResidualMode::full, Variant::none,
     "Full AttnRes: every earlier output is a source (paper defaults)"},
    {"block", ResidualMode::block, Variant::none,
     "Block AttnRes: block summaries are the sources (paper defaults)"},
    {"denseformer", ResidualMode::denseformer, Variant::none,
     "DenseFormer: learned unnormalised weights over every earlier output"},
    {"rescaled", ResidualMode::rescaled, Variant::none,
     "rescaled residual: the running mean of the outputs"},
    {"mhc", ResidualMode::mhc, Variant::none,
     "mHC: m streams, dynamic coefficients, Sinkhorn-projected mixing"},
    {"mhc_static", ResidualMode::mhc, Variant::static_mhc,
     "mHC with static coefficients (biases only)"},
    {"full_sigmoid", ResidualMode::full, Variant::sigmoid,
     "Full AttnRes, sigmoid gate (unnormalised)"},
    {"full_sigmoid_normalized", ResidualMode::full, Variant::sigmoid_normalized,
     "Full AttnRes, sigmoid gate divided by its sum"},
    {"full_no_key_norm", ResidualMode::full, Variant::no_key_norm,
     "Full AttnRes scoring the raw sources (no key norm)"},
    {"full_window", ResidualMode::full, Variant::window,
     "Full AttnRes reading the embedding and the last 8 outputs"},
    {"full_multihead", ResidualMode::full, Variant::multihead,
     "Full AttnRes with 16 depth-attention heads (or the largest divisor of d below 16)"},
    {"full_input_query", ResidualMode::full, Variant::input_query,
     "Full AttnRes with a query computed from the latest source"},
    {"full_scalars", ResidualMode::full, Variant::scalars,
     "Full AttnRes with learned input-independent logits"},
    {"block_sigmoid", ResidualMode::block, Variant::sigmoid,
     "Block AttnRes, sigmoid gate (unnormalised)"},
    {"block_sigmoid_normalized", ResidualMode::block, Variant::sigmoid_normalized,
     "Block AttnRes, sigmoid gate divided by its sum"},
    {"block_no_key_norm", ResidualMode::block, Variant::no_key_norm,
     "Block AttnRes scoring the raw sources (no key norm)"},
    {"block_multihead", ResidualMode::block, Variant::multihead,
     "Block AttnRes with 16 depth-attention heads (or the largest divisor of d below 16)"},
    {"block_input_query", ResidualMode::block, Variant::input_query,
     "Block AttnRes with a query computed from the latest source"},
    {"block_scalars", ResidualMode::block, Variant::scalars,
     "Block AttnRes with learned input-independent logits"},
};

const NamedScheme* find_named(const std::string& name) {
  for (const auto& entry : kNamedSchemes) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

AttnResConfig make_named(const NamedScheme& entry, const CostInputs& in) {
  AttnResConfig c;
  c.mode = entry.mode;
  if (c.mode == ResidualMode::block) {
    c.block_size =
        in.block_size <= std::numeric_limits<int>::max() ? static_cast<int>(in.block_size) : 0;
  }
  if (c.mode == ResidualMode::mhc) {
    c.streams =
        static_cast<int>(std::min<std::int64_t>(in.streams, std::numeric_limits<int>::max()));
  }
  switch (entry.variant) {
    case Variant::none:
      break;
    case Variant::static_mhc:
      c.dynamic = false;
      break;
    case Variant::sigmoid:
      c.gate = DepthGate::sigmoid;
      break;
    case Variant::sigmoid_normalized:
      c.gate = DepthGate::sigmoid_normalized;
      break;
    case Variant::no_key_norm:
      c.key_norm = false;
      break;
    case Variant::window:
      c.window = 8;
      break;  // the paper's "W = 1 + 8"
    case Variant::multihead:
      c.heads = multihead_heads(in.d_model);
      break;
    case Variant::input_query:
      c.query_source = QuerySource::input;
      break;
    case Variant::scalars:
      c.mixing = DepthMixing::scalars;
      break;
  }
  return c;
}

// The named scheme of each kSchemeIoKeys row, looked up once.
const std::array<const NamedScheme*, kSchemeIoKeyCount>& scheme_io_entries() {
  static const std::array<const NamedScheme*, kSchemeIoKeyCount> entries = [] {
    std::array<const NamedScheme*, kSchemeIoKeyCount> out{};
    for (std::size_t i = 0; i < kSchemeIoKeyCount; ++i)
      out[i] = find_named(kSchemeIoKeys[i].scheme);
    return out;
  }();
  return entries;
}

}  // namespace

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : kNamedSchemes) out.emplace_back(entry.name);
    return out;
  }();
  return names;
}

std::string scheme_summary(const std::string& name) {
  const NamedScheme* entry = find_named(name);
  return entry ? entry->summary : "";
}

AttnResConfig named_scheme(const std::string& name, const CostInputs& in) {
  const NamedScheme* entry = find_named(name);
  if (!entry) {
    std::string message = with_hint("unknown scheme '" + name + "'", name, scheme_names());
    message += "; expected one of: ";
    message += join(scheme_names());
    throw CostInputError("scheme", message);
  }
  return make_named(*entry, in);
}

AttnResConfig parse_scheme_spec(const std::string& spec, const CostInputs& in) {
  const auto colon = spec.find(':');
  AttnResConfig c = named_scheme(spec.substr(0, colon), in);
  if (colon == std::string::npos) return c;
  const std::string items = spec.substr(colon + 1);
  if (items.empty()) {
    throw CostInputError(
        "scheme", "'" + spec + "' has nothing after ':' (expected NAME:key=value[,key=value...])");
  }
  std::vector<std::string> seen;
  std::size_t start = 0;
  while (start <= items.size()) {
    const std::size_t comma = std::min(items.find(',', start), items.size());
    const std::string item = items.substr(start, comma - start);
    start = comma + 1;
    const auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw CostInputError(
          "scheme", "'" + item + "' in '" + spec +
                        "' is not key=value (expected e.g. block:gate=sigmoid,block_size=4)");
    }
    const std::string key = item.substr(0, equals), value = item.substr(equals + 1);
    if (std::find(spec_keys().begin(), spec_keys().end(), key) == spec_keys().end()) {
      std::string message =
          with_hint("unknown key '" + key + "' in '" + spec + "'", key, spec_keys());
      message += "; expected one of: ";
      message += join(spec_keys());
      throw CostInputError("scheme", message);
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw CostInputError(key, key + " is given twice in '" + spec + "'");
    }
    seen.push_back(key);
    auto integer = [&]() {
      std::size_t used = 0;
      long long number = 0;
      try {
        number = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || number < std::numeric_limits<int>::min() ||
          number > std::numeric_limits<int>::max()) {
        throw CostInputError(key, key + " must be an integer, got '" + value + "'");
      }
      return static_cast<int>(number);
    };
    auto boolean = [&]() {
      if (value == "true" || value == "on") return true;
      if (value == "false" || value == "off") return false;
      throw CostInputError(key, key + " must be true or false (or on / off), got '" + value + "'");
    };
    try {
      if (key == "block_size") c.block_size = integer();
      if (key == "gate") c.gate = parse_depth_gate(value, key);
      if (key == "key_norm") c.key_norm = boolean();
      if (key == "window") c.window = integer();
      if (key == "heads") c.heads = integer();
      if (key == "query_source") c.query_source = parse_query_source(value, key);
      if (key == "mixing") c.mixing = parse_depth_mixing(value, key);
      if (key == "streams") c.streams = integer();
      if (key == "dynamic") c.dynamic = boolean();
      if (key == "sinkhorn_iterations") c.sinkhorn_iterations = integer();
    } catch (const CostInputError&) {
      throw;
    } catch (const Error& error) {
      throw CostInputError(key, error.what());
    }
  }
  return c;
}

std::string scheme_spec(const AttnResConfig& c) {
  const AttnResConfig defaults;
  std::vector<std::string> items;
  auto add = [&items](const std::string& key, const std::string& value) {
    std::string item = key;
    item += '=';
    item += value;
    items.push_back(std::move(item));
  };
  if (c.mode == ResidualMode::block && c.block_size > 0)
    add("block_size", std::to_string(c.block_size));
  if (c.gate != defaults.gate) add("gate", to_string(c.gate));
  if (c.key_norm != defaults.key_norm) add("key_norm", c.key_norm ? "true" : "false");
  if (c.window != defaults.window) add("window", std::to_string(c.window));
  if (c.heads != defaults.heads) add("heads", std::to_string(c.heads));
  if (c.query_source != defaults.query_source) add("query_source", to_string(c.query_source));
  if (c.mixing != defaults.mixing) add("mixing", to_string(c.mixing));
  if (c.mode == ResidualMode::mhc || c.streams != defaults.streams)
    add("streams", std::to_string(c.streams));
  if (c.dynamic != defaults.dynamic) add("dynamic", c.dynamic ? "true" : "false");
  if (c.sinkhorn_iterations != defaults.sinkhorn_iterations) {
    add("sinkhorn_iterations", std::to_string(c.sinkhorn_iterations));
  }
  std::string out = to_string(c.mode);
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += i == 0 ? ':' : ',';
    out += items[i];
  }
  return out;
}

std::optional<CostInputProblem> scheme_problem(const AttnResConfig& c, const CostInputs& in) {
  const AttnResConfig defaults;
  const std::string mode = to_string(c.mode);
  auto only_for = [&](bool applies, bool is_default, const char* key,
                      const char* modes) -> Problem {
    if (applies || is_default) return std::nullopt;
    std::string message = key;
    message += " applies to ";
    message += modes;
    message += " only, not to mode ";
    message += mode;
    return CostInputProblem{key, message};
  };
  const std::int64_t L = in.sublayers;
  if (c.mode == ResidualMode::block) {
    const std::int64_t S = c.block_size > 0 ? c.block_size : in.block_size;
    if (c.block_size < 0 || S > L) {
      return CostInputProblem{
          "block_size", "block_size must be between 1 and L = " + std::to_string(L) +
                            " sublayers for Block AttnRes, got " + std::to_string(c.block_size)};
    }
  } else if (auto p =
                 only_for(false, c.block_size == 0, "block_size", "Block AttnRes (mode block)")) {
    return p;
  }
  const bool attention = c.attention_mode(), query = c.uses_query(),
             mhc = c.mode == ResidualMode::mhc;
  const char* query_modes = "Full and Block AttnRes with mixing = attention";
  if (auto p = only_for(attention, c.gate == defaults.gate, "gate", "Full and Block AttnRes"))
    return p;
  if (auto p = only_for(attention, c.mixing == defaults.mixing, "mixing", "Full and Block AttnRes"))
    return p;
  if (auto p = only_for(c.mode == ResidualMode::full, c.window == defaults.window, "window",
                        "Full AttnRes (mode full)")) {
    return p;
  }
  if (auto p = only_for(query, c.key_norm == defaults.key_norm, "key_norm", query_modes)) return p;
  if (auto p = only_for(query, c.heads == defaults.heads, "heads", query_modes)) return p;
  if (auto p =
          only_for(query, c.query_source == defaults.query_source, "query_source", query_modes))
    return p;
  if (auto p = only_for(mhc, c.streams == defaults.streams, "streams", "mHC (mode mhc)")) return p;
  if (auto p = only_for(mhc, c.dynamic == defaults.dynamic, "dynamic", "mHC (mode mhc)")) return p;
  if (auto p = only_for(mhc, c.sinkhorn_iterations == defaults.sinkhorn_iterations,
                        "sinkhorn_iterations", "mHC (mode mhc)")) {
    return p;
  }
  if (c.window < 0) {
    return CostInputProblem{"window",
                            "window must be >= 0 (0 = no window), got " + std::to_string(c.window)};
  }
  if (c.heads < 1 || in.d_model % c.heads != 0) {
    return CostInputProblem{
        "heads", "heads (" + std::to_string(c.heads) +
                     ") must be a positive divisor of d = " + std::to_string(in.d_model)};
  }
  if (c.streams < 1) {
    return CostInputProblem{"streams", "streams must be at least 1 (mHC needs a stream), got " +
                                           std::to_string(c.streams)};
  }
  if (c.sinkhorn_iterations < 1) {
    return CostInputProblem{"sinkhorn_iterations", "sinkhorn_iterations must be at least 1, got " +
                                                       std::to_string(c.sinkhorn_iterations)};
  }
  return std::nullopt;
}

ResidualIo scheme_io(const AttnResConfig& scheme, const CostInputs& in, bool one_shot) {
  return io_row(scheme, in, one_shot, nullptr, nullptr);
}

SchemeCost scheme_cost(const AttnResConfig& scheme, const CostInputs& in) {
  if (auto problem = scheme_problem(scheme, in))
    throw CostInputError(problem->field, problem->message);
  SchemeCost out;
  out.scheme = scheme;
  const SchemeSizes z = sizes_of(scheme, in);
  if (scheme.mode == ResidualMode::block && scheme.block_size == 0 &&
      z.S <= std::numeric_limits<int>::max()) {
    out.scheme.block_size = static_cast<int>(z.S);
  }
  out.spec = scheme_spec(out.scheme);
  out.description = out.scheme.describe();
  out.io = io_row(scheme, in, false, &out.io_formula, &out.io_schedule);
  out.io_one_shot = io_row(scheme, in, true, &out.io_one_shot_formula, nullptr);

  const double L = static_cast<double>(z.L), D = static_cast<double>(z.d), R = L + 1.0;
  const double m = static_cast<double>(z.m);
  const int b = bytes_per_element(in.dtype);
  const bool read_based = scheme.mode == ResidualMode::full || scheme.mode == ResidualMode::block ||
                          scheme.mode == ResidualMode::denseformer;
  // Stored history.
  switch (scheme.mode) {
    case ResidualMode::standard:
      out.history_vectors = 1;
      out.history_formula = "1 (the running sum h)";
      break;
    case ResidualMode::rescaled:
      out.history_vectors = 1;
      out.history_formula = "1 (the running mean h)";
      break;
    case ResidualMode::mhc:
      out.history_vectors = z.m;
      out.history_formula = "m (the streams)";
      break;
    case ResidualMode::block:
      out.history_vectors = history_vectors_block(z.N);
      out.history_formula = "N + 1 (+ the running partial)";
      break;
    case ResidualMode::full:
    case ResidualMode::denseformer:
      out.history_vectors = z.window > 0 ? z.window + 1 : history_vectors_full(z.L);
      out.history_formula = z.window > 0 ? "W + 1 (the embedding and the last W outputs)" : "L + 1";
      break;
  }
  out.history_bytes = static_cast<double>(out.history_vectors) * D * b;

  // Parameters and mixing FLOPs.
  const bool normalised = scheme.gate != DepthGate::sigmoid;
  if (scheme.mode == ResidualMode::standard) {
    out.params_formula = "0";
    out.mixing_flops = L * D;
    out.flops_formula = "Ld (one add per sublayer)";
  } else if (scheme.mode == ResidualMode::rescaled) {
    out.params_formula = "0";
    out.mixing_flops = 3.0 * L * D;
    out.flops_formula = "3Ld (two scalings and an add per sublayer)";
  } else if (scheme.mode == ResidualMode::mhc) {
    const double I = static_cast<double>(scheme.sinkhorn_iterations);
    const double coefficients = L * (2.0 * m + m * m);
    if (scheme.dynamic) {
      out.params = coefficients * (1.0 + m * D);
      out.params_formula = "L(2m + m^2)(1 + md)";
      out.mixing_flops =
          L * ((2.0 * m * m * m + 6.0 * m * m + 6.0 * m) * D + 4.0 * I * m * m) + m * D;
      out.flops_formula = "L[(2m^3 + 6m^2 + 6m)d + 4Im^2] + md";
    } else {
      out.params = coefficients;
      out.params_formula = "L(2m + m^2)";
      out.mixing_flops = L * (2.0 * m * m + 4.0 * m) * D + m * D;
      out.flops_formula = "L(2m^2 + 4m)d + md";
    }
  } else if (read_based) {
    const double P = static_cast<double>(pairs_of(scheme, z));
    const std::string P_text = pairs_formula(scheme, z);
    int per_pair = 2, per_read = 0;  // in units of d
    if (scheme.mode == ResidualMode::denseformer) {
      out.params = P;
      out.params_formula = "P (one weight per (read, source)); " + P_text;
    } else if (scheme.mixing == DepthMixing::scalars) {
      per_read = normalised ? 1 : 0;
      out.params = P;
      out.params_formula = "P (one logit per (read, source)); " + P_text;
    } else {
      per_pair = scheme.key_norm ? 6 : 4;
      per_read = (scheme.key_norm ? 1 : 0) + (normalised ? 1 : 0);
      const double per_read_params =
          (scheme.key_norm ? 2.0 : 1.0) * D + (z.input_query ? D * D : 0.0);
      out.params = R * per_read_params;
      out.params_formula = z.input_query
                               ? (scheme.key_norm ? "(L + 1)(2d + d^2)" : "(L + 1)(d + d^2)")
                               : (scheme.key_norm ? "2(L + 1)d" : "(L + 1)d");
    }
    out.mixing_flops = P * per_pair * D + R * per_read * D;
    std::string f = std::to_string(per_pair) + "dP";
    if (per_read > 0) {
      f += " + ";
      if (per_read > 1) f += std::to_string(per_read);
      f += "d(L + 1)";
    }
    if (z.input_query) {
      out.mixing_flops += R * (2.0 * D * D + 4.0 * D);
      f += " + (2d^2 + 4d)(L + 1)";
    }
    out.flops_formula = f + "; " + P_text;
  }
  out.mixing_flops_per_sublayer = out.mixing_flops / L;

  // The two-phase schedule.
  const std::string limit = scheme.two_phase_limit();
  out.two_phase = limit.empty();
  if (!out.two_phase) {
    out.two_phase_reason = limit;
  } else if (scheme.mode == ResidualMode::rescaled) {
    out.two_phase_reason =
        "applies (fixed weights), but the running mean reads no history: the row counts the "
        "running update";
  } else if (scheme.mode == ResidualMode::denseformer) {
    out.two_phase_reason = "applies: the weights are parameters, known before phase 1";
  } else if (scheme.mixing == DepthMixing::scalars) {
    out.two_phase_reason = "applies: the mixing logits are parameters, known before phase 1";
  } else {
    out.two_phase_reason = "applies: the static queries of a group are known before phase 1";
    if (scheme.gate == DepthGate::sigmoid)
      out.two_phase_reason += "; unnormalised sums merge without a max";
  }
  if (out.two_phase && z.window > 0) {
    out.two_phase_reason +=
        "; the I/O row counts one-shot reads (no closed form for a windowed two-phase schedule)";
  }
  return out;
}

// ---------------------------------------------------------------- all together

std::optional<CostInputProblem> try_resolve_cost_inputs(CostInputs& in) {
  auto problem = [](const char* field, std::string message) -> Problem {
    return CostInputProblem{field, std::move(message)};
  };
  auto below = [](std::int64_t value, std::int64_t minimum, const char* field,
                  const char* meaning) -> Problem {
    if (value >= minimum) return std::nullopt;
    return CostInputProblem{field, std::string(meaning) + " must be >= " + std::to_string(minimum) +
                                       ", got " + std::to_string(value)};
  };
  if (in.sublayers == 0 && in.layers == 0) {
    return problem("sublayers", "give the number of sublayers L (or of transformer layers)");
  }
  if (in.layers != 0) {
    if (auto p = below(in.layers, 1, "layers", "transformer layers")) return p;
    if (in.layers > (std::int64_t{1} << 61))
      return problem("layers", "transformer layers is too large");
    const std::int64_t from_layers = 2 * in.layers;
    if (in.sublayers != 0 && in.sublayers != from_layers) {
      return problem("sublayers", "sublayers L = " + std::to_string(in.sublayers) +
                                      " disagrees with " + std::to_string(in.layers) +
                                      " transformer layers (L = " + std::to_string(from_layers) +
                                      ")");
    }
    in.sublayers = from_layers;
  }
  if (auto p = below(in.sublayers, 1, "sublayers", "sublayers L")) return p;
  if (auto p = below(in.d_model, 1, "d_model", "width d")) return p;
  const std::int64_t L = in.sublayers;
  if (in.block_layers != 0) {
    // K transformer layers per block are S = 2K sublayers (docs/math.md §3.6).
    if (auto p = below(in.block_layers, 1, "block_layers", "layers per block K")) return p;
    if (in.block_layers > L / 2) {
      return problem("block_layers", "layers per block K = " + std::to_string(in.block_layers) +
                                         " exceeds the model's " + std::to_string(L / 2) +
                                         " transformer layers (L = " + std::to_string(L) +
                                         " sublayers)");
    }
    const std::int64_t S = block_size_from_layers(in.block_layers);
    if (in.block_size != 0 && in.block_size != S) {
      return problem("block_layers", "layers per block K = " + std::to_string(in.block_layers) +
                                         " (S = 2K = " + std::to_string(S) +
                                         " sublayers) disagrees with block size S = " +
                                         std::to_string(in.block_size));
    }
    in.block_size = S;
    in.block_layers = 0;
  }
  if (!in.block_sizes.empty()) {
    if (auto p = block_list_problem(in.block_sizes, L)) return p;
    const auto n = static_cast<std::int64_t>(in.block_sizes.size());
    const std::int64_t s = (L + n - 1) / n;
    if ((in.blocks != 0 && in.blocks != n) || (in.block_size != 0 && in.block_size != s)) {
      return problem("block_sizes", "the block_sizes list (" + std::to_string(n) +
                                        " blocks) fixes N and S; give either the list or "
                                        "blocks / block_size / block_layers, not both");
    }
    in.blocks = n;
    in.block_size = s;
  }
  if (in.blocks == 0 && in.block_size == 0) {
    return problem("blocks", "give the number of blocks N (or the block size S)");
  }
  if (!in.block_sizes.empty()) {
    // N and S come from the list (above).
  } else if (in.block_size != 0) {
    if (auto p = below(in.block_size, 1, "block_size", "block size S")) return p;
    if (in.block_size > L) {
      return problem("block_size", "block size S = " + std::to_string(in.block_size) +
                                       " exceeds L = " + std::to_string(L) + " sublayers");
    }
    const std::int64_t n = block_count(L, in.block_size);
    if (in.blocks != 0 && in.blocks != n) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) +
                                   " disagrees with block size S = " +
                                   std::to_string(in.block_size) + " (L = " + std::to_string(L) +
                                   " gives N = ceil(L/S) = " + std::to_string(n) + ")");
    }
    in.blocks = n;
  } else {
    if (auto p = below(in.blocks, 1, "blocks", "blocks N")) return p;
    if (in.blocks > L) {
      return problem("blocks", "blocks N = " + std::to_string(in.blocks) +
                                   " exceeds L = " + std::to_string(L) + " sublayers");
    }
    in.block_size = (L + in.blocks - 1) / in.blocks;
    const std::int64_t n = block_count(L, in.block_size);
    if (n != in.blocks) {
      return problem(
          "blocks",
          "N = " + std::to_string(in.blocks) + " blocks cannot cover L = " + std::to_string(L) +
              " sublayers with equal blocks (S = ceil(L/N) = " + std::to_string(in.block_size) +
              " gives " + std::to_string(n) + " blocks); give block_size instead");
    }
  }
  if (auto p = below(in.streams, 1, "streams", "residual streams m")) return p;
  if (auto p = below(in.ffn, 0, "ffn", "FFN width")) return p;
  if (in.ffn == 0) {
    if (in.d_model > std::numeric_limits<std::int64_t>::max() / 8) {
      return problem("d_model", "width d is too large");
    }
    in.ffn = in.d_model * 8 / 3;
  }
  if (auto p = below(in.tokens, 1, "tokens", "sequence length T")) return p;
  if (auto p = below(in.batch, 1, "batch", "batch B")) return p;
  if (auto p = below(in.seq_shards, 1, "seq_shards", "sequence shards")) return p;
  if (in.seq_shards > in.tokens) {
    return problem("seq_shards",
                   "sequence shards (" + std::to_string(in.seq_shards) +
                       ") exceed the sequence length T = " + std::to_string(in.tokens));
  }
  if (auto p = below(in.chunk, 0, "chunk", "chunk length")) return p;
  if (in.chunk > in.tokens) {
    return problem("chunk", "chunk length " + std::to_string(in.chunk) +
                                " exceeds T = " + std::to_string(in.tokens));
  }
  if (auto p = below(in.pp, 1, "pp", "pipeline ranks P")) return p;
  if (auto p = below(in.vpp, 1, "vpp", "virtual stages V")) return p;
  std::int64_t chunks = 0;
  if (__builtin_mul_overflow(in.pp, in.vpp, &chunks) || chunks > L) {
    return problem("pp", "P·V = " + std::to_string(in.pp) + " x " + std::to_string(in.vpp) +
                             " chunks exceed L = " + std::to_string(L) +
                             " sublayers (every chunk needs at least one sublayer)");
  }
  // Products the engine forms later must fit 64 bits: B·b·N·T·d, (L+1)(L+2)/2 and (L+1)·d.
  std::int64_t product = 0;
  if (__builtin_mul_overflow(in.batch, std::int64_t{bytes_per_element(in.dtype)}, &product) ||
      __builtin_mul_overflow(product, in.blocks, &product) ||
      __builtin_mul_overflow(product, in.d_model, &product) ||
      __builtin_mul_overflow(product, in.tokens, &product)) {
    return problem("tokens", "prefill history bytes B·b·N·T·d = " + std::to_string(in.batch) +
                                 " x " + std::to_string(bytes_per_element(in.dtype)) + " x " +
                                 std::to_string(in.blocks) + " x " + std::to_string(in.tokens) +
                                 " x " + std::to_string(in.d_model) + " overflows 64-bit integers");
  }
  if (__builtin_mul_overflow(L + 1, L + 2, &product) ||
      __builtin_mul_overflow(L + 1, in.d_model, &product)) {
    return problem("sublayers", "L = " + std::to_string(L) + " with d = " +
                                    std::to_string(in.d_model) + " overflows 64-bit integers");
  }
  return std::nullopt;
}

CostInputs resolve_cost_inputs(CostInputs in) {
  if (auto problem = try_resolve_cost_inputs(in)) {
    throw CostInputError(problem->field, problem->message);
  }
  return in;
}

CostReport evaluate_costs(const CostInputs& in) {
  CostReport r;
  r.inputs = in;
  const std::int64_t L = in.sublayers, d = in.d_model, N = in.blocks, S = in.block_size;
  r.io.standard = io_standard(d);
  r.io.block_two_phase = io_block_two_phase(N, S, d);
  r.io.full_two_phase = io_full_two_phase(N, S, d);
  r.io.full_naive = io_full_naive_mean(L, d);
  r.io.mhc = io_mhc(in.streams, d);
  for (std::size_t i = 0; i < kSchemeIoKeyCount; ++i) {
    r.scheme_io[i] =
        scheme_io(make_named(*scheme_io_entries()[i], in), in, kSchemeIoKeys[i].one_shot);
  }
  r.full_best_schedule = best_full_schedule_block(L, d);
  r.history_full_vectors = history_vectors_full(L);
  r.history_block_vectors = history_vectors_block(N);
  r.prefill = prefill_history_bytes(in.batch, in.tokens, N, d, bytes_per_element(in.dtype),
                                    in.seq_shards, in.chunk);
  r.pipeline_paper = pipeline_comm_paper(in.pp, in.vpp, N, d);
  r.boundaries = in.block_sizes.empty() ? uniform_pipeline_boundaries(L, S, in.pp, in.vpp)
                                        : pipeline_boundaries(block_layout_of(in), in.pp, in.vpp);
  std::int64_t naive = 0, cached = 0, own = 0, peak_naive = 0, peak_cached = 0;
  for (const auto& b : r.boundaries) {
    naive += b.naive_vectors;
    cached += b.cached_vectors;
    own += b.cached_own_vectors;
    peak_naive = std::max(peak_naive, b.naive_vectors);
    peak_cached = std::max(peak_cached, b.cached_vectors);
  }
  const std::string what = "pipeline elements";
  r.boundary_naive_elements = checked_multiply(naive, d, what);
  r.boundary_cached_elements = checked_multiply(cached, d, what);
  r.boundary_cached_own_elements = checked_multiply(own, d, what);
  r.boundary_peak_naive_elements = checked_multiply(peak_naive, d, what);
  r.boundary_peak_cached_elements = checked_multiply(peak_cached, d, what);
  r.depth_flops_full = depth_attention_flops(ResidualMode::full, L, 1, d);
  r.depth_flops_block = depth_attention_flops(ResidualMode::block, L, S, d);
  r.model_flops = model_flops_per_token(L, d, in.ffn, in.tokens);
  return r;
}

}  // namespace attnres
