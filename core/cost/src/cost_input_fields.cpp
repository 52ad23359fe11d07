#include "attnres/cost_input_fields.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <iterator>
#include <sstream>

#include "attnres/block_layout.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"

namespace attnres {

namespace {

CostInputField make(std::string_view key, std::int64_t CostInputs::*member,
                    std::string_view section, std::string_view flag, std::string_view symbol,
                    std::string_view label, std::string_view unit, std::string_view help) {
  CostInputField field;
  field.key = key;
  field.member = member;
  field.section = section;
  field.flag = flag;
  field.symbol = symbol;
  field.label = label;
  field.unit = unit;
  field.help = help;
  return field;
}

std::array<CostInputField, kCostInputFieldCount> build_fields() {
  std::array<CostInputField, kCostInputFieldCount> f = {
      make("sublayers", &CostInputs::sublayers, "model", "sublayers", "L", "sublayers L",
           "sublayers", "sublayers L (attention and MLP each count; 2 x transformer layers)"),
      make("layers", &CostInputs::layers, "model", "layers", "", "transformer layers", "layers",
           "transformer layers (L = 2 x layers), instead of sublayers"),
      make("d_model", &CostInputs::d_model, "model", "d-model", "d", "width d", "elements",
           "hidden width d"),
      make("blocks", &CostInputs::blocks, "model", "blocks", "N", "blocks N", "blocks",
           "AttnRes blocks N (1 .. L; N = L is Full AttnRes)"),
      make("block_size", &CostInputs::block_size, "model", "block-size", "S", "block size S",
           "sublayers", "sublayers per block S (N = ceil(L/S)), instead of blocks"),
      make("block_layers", &CostInputs::block_layers, "model", "block-layers", "K",
           "layers per block K", "layers",
           "transformer layers per block K (S = 2K sublayers, as Megatron-LM counts), instead of "
           "blocks or block size"),
      make("streams", &CostInputs::streams, "model", "streams", "m", "mHC streams m", "streams",
           "residual streams m of mHC"),
      make("ffn", &CostInputs::ffn, "model", "ffn", "F", "SwiGLU width F", "elements",
           "SwiGLU width F (0: round(8d/3))"),
      make("tokens", &CostInputs::tokens, "sequence", "seq", "T", "tokens T", "tokens",
           "sequence length T in tokens"),
      make("batch", &CostInputs::batch, "sequence", "batch", "B", "batch B", "sequences",
           "sequences B processed together"),
      make("seq_shards", &CostInputs::seq_shards, "sequence", "seq-shards", "", "sequence shards",
           "shards", "sequence-parallel shards the prefill history is split over"),
      make("chunk", &CostInputs::chunk, "sequence", "chunk", "", "prefill chunk", "tokens",
           "chunked-prefill length in tokens (0: the whole sequence at once)"),
      make("pp", &CostInputs::pp, "parallel", "pp", "P", "pipeline ranks P", "ranks",
           "pipeline ranks P"),
      make("vpp", &CostInputs::vpp, "parallel", "vpp", "V", "virtual stages V", "stages per rank",
           "virtual stages V per rank (V > 1: interleaved)"),
      make("heads", &CostInputs::heads, "model", "heads", "H", "attention heads H", "heads",
           "attention heads H (0: d / 128, or the largest divisor of d below it)"),
      make("kv_heads", &CostInputs::kv_heads, "model", "kv-heads", "H_kv", "KV heads H_kv", "heads",
           "key/value heads H_kv of GQA (0: H for mha, 1 for mqa)"),
      make("head_dim", &CostInputs::head_dim, "model", "head-dim", "d_h", "head width d_h",
           "elements", "width of one head d_h (0: d / H)"),
      make("vocab", &CostInputs::vocab, "model", "vocab", "", "vocabulary", "tokens",
           "vocabulary size: embedding and LM head rows (0: not counted)"),
      make("kv_latent", &CostInputs::kv_latent, "attention", "kv-latent", "d_c", "MLA latent d_c",
           "elements", "MLA: cached key/value latent width d_c (0: 512)"),
      make("rope_dim", &CostInputs::rope_dim, "attention", "rope-dim", "d_r", "MLA RoPE width d_r",
           "elements", "MLA: decoupled RoPE key width d_r, cached beside the latent (0: 64)"),
      make("q_latent", &CostInputs::q_latent, "attention", "q-latent", "", "MLA query latent",
           "elements", "MLA: query compression rank (0: no query compression)"),
      make("hybrid_period", &CostInputs::hybrid_period, "attention", "hybrid-period", "",
           "hybrid period", "layers",
           "hybrid: linear attention except every k-th layer and the last, which keep the "
           "attention kind (0: every layer keeps it)"),
      make("experts", &CostInputs::experts, "moe", "experts", "E", "routed experts E", "experts",
           "MoE routed experts E (0: dense MLP)"),
      make("active", &CostInputs::active, "moe", "active-experts", "k", "experts per token k",
           "experts", "routed experts per token k (top-k)"),
      make("shared", &CostInputs::shared, "moe", "shared-experts", "", "shared experts", "experts",
           "always-on shared experts"),
      make("expert_ffn", &CostInputs::expert_ffn, "moe", "expert-ffn", "F_e", "expert width F_e",
           "elements", "MLP width of one expert F_e"),
      make("dense_layers", &CostInputs::dense_layers, "moe", "dense-layers", "", "dense layers",
           "layers", "first layers with a dense MLP of width F before the MoE layers"),
      make("tp", &CostInputs::tp, "parallel", "tp", "t", "tensor parallel t", "ranks",
           "tensor-parallel ranks t (Megatron-LM: heads and MLP width split t ways)"),
      make("cp", &CostInputs::cp, "parallel", "cp", "c", "context parallel c", "ranks",
           "context-parallel ranks c (the sequence split c ways, ring attention)"),
      make("ep", &CostInputs::ep, "parallel", "ep", "e", "expert parallel e", "ranks",
           "expert-parallel ranks e (experts split e ways; e divides t·c·DP)"),
      make("dp", &CostInputs::dp, "parallel", "dp", "D", "data parallel D", "ranks",
           "data-parallel replicas D"),
      make("zero", &CostInputs::zero, "parallel", "zero", "", "ZeRO stage", "stage",
           "ZeRO stage over the data-parallel ranks: 0 none, 1 optimizer, 2 + gradients, 3 + "
           "weights (FSDP)"),
      make("optimizer_bytes", &CostInputs::optimizer_bytes, "parallel", "optimizer-bytes", "K",
           "optimizer bytes K", "bytes per parameter",
           "optimizer state bytes per parameter K (Adam in mixed precision: 12)"),
  };
  auto at = [&f](std::string_view key) -> CostInputField& {
    return *std::find_if(f.begin(), f.end(), [&](const CostInputField& x) { return x.key == key; });
  };
  at("sublayers").alternative = "layers";
  at("layers").alternative = "sublayers";
  at("layers").derived = true;
  at("blocks").alternative = "block_size";
  at("blocks").derived = true;
  at("block_size").alternative = "blocks";
  at("block_layers").alternative = "blocks";
  at("block_layers").derived = true;
  at("block_layers").input_min = 0;
  at("block_layers").input_max = 50'000;
  for (const char* key : {"streams", "seq_shards", "chunk"}) at(key).pipeline_flag = false;
  at("ffn").input_min = 0;
  at("chunk").input_min = 0;
  at("sublayers").input_max = 100'000;
  at("layers").input_max = 50'000;
  at("blocks").input_max = 100'000;
  at("block_size").input_max = 100'000;
  at("d_model").input_max = 1'000'000;
  at("ffn").input_max = 10'000'000;
  at("batch").input_max = 1'000'000;
  at("seq_shards").input_max = 1'000'000;
  at("streams").input_max = 64;
  at("pp").input_max = 4096;
  at("vpp").input_max = 64;
  for (const char* key :
       {"heads", "kv_heads", "head_dim", "vocab", "kv_latent", "rope_dim", "q_latent",
        "hybrid_period", "experts", "active", "shared", "expert_ffn", "dense_layers", "zero"})
    at(key).input_min = 0;
  for (const char* key : {"kv_latent", "rope_dim", "q_latent"}) at(key).input_max = 1'000'000;
  at("zero").input_max = 3;
  at("optimizer_bytes").input_min = 0;
  at("optimizer_bytes").input_max = 64;
  for (const char* key : {"tp", "cp", "ep", "dp"}) at(key).input_max = 1'000'000;
  return f;
}

}  // namespace

std::span<const CostInputField> cost_input_fields() {
  static const std::array<CostInputField, kCostInputFieldCount> fields = build_fields();
  return fields;
}

std::span<const CostInputChoice> cost_input_choices() {
  static const std::vector<CostInputChoice> choices = {
      {"dtype", "sequence", "dtype", "element type",
       "element type of activations, history and traffic", enum_names(kDTypeNames),
       [](const CostInputs& in) { return to_string(in.dtype); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.dtype = parse_dtype(name, where);
       }},
      {"attention", "attention", "attention", "attention kind",
       "attention of the layers: mha, gqa (give kv-heads), mqa, mla (latent KV) or linear "
       "(fixed-size state, KDA)",
       enum_names(kAttentionKindNames),
       [](const CostInputs& in) { return enum_name(kAttentionKindNames, in.attention); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.attention = parse_enum(kAttentionKindNames, name, where, "unknown attention kind");
       }},
      {"mlp", "model", "mlp", "MLP kind",
       "MLP: swiglu (3 matrices, F = 8d/3) or gelu (GPT: 2 matrices, F = 4d, with dropout)",
       enum_names(kMlpKindNames),
       [](const CostInputs& in) { return enum_name(kMlpKindNames, in.mlp); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.mlp = parse_enum(kMlpKindNames, name, where, "unknown MLP kind");
       }},
      {"recompute", "parallel", "recompute", "activation recompute",
       "activation recomputation: none, selective (attention scores, Korthikanti et al.) or full "
       "(layer inputs only)",
       enum_names(kRecomputePolicyNames),
       [](const CostInputs& in) { return enum_name(kRecomputePolicyNames, in.recompute); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.recompute = parse_enum(kRecomputePolicyNames, name, where, "unknown recompute policy");
       }},
      {"cross_entropy", "parallel", "cross-entropy", "cross-entropy buffers",
       "what the last stage holds of the logits for the loss: fused (Megatron-LM: one fp32 copy, "
       "4 + b bytes per logit), unfused (PyTorch on an fp32 copy: 12 bytes) or chunked (none)",
       enum_names(kCrossEntropyNames),
       [](const CostInputs& in) { return enum_name(kCrossEntropyNames, in.cross_entropy); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.cross_entropy = parse_enum(kCrossEntropyNames, name, where, "unknown cross entropy");
       }},
      {"sequence_parallel", "parallel", "sequence-parallel", "sequence parallelism",
       "sequence parallelism with tensor parallelism: on (norms, dropout and the residual stream "
       "split by sequence) or off (replicated)",
       enum_names(kSwitchNames),
       [](const CostInputs& in) { return enum_name(kSwitchNames, in.sequence_parallel); },
       [](CostInputs& in, const std::string& name, const std::string& where) {
         in.sequence_parallel = parse_enum(kSwitchNames, name, where, "expected on or off");
       }},
  };
  return choices;
}

const CostInputChoice* find_cost_input_choice(std::string_view key) {
  for (const auto& choice : cost_input_choices()) {
    if (choice.key == key) return &choice;
  }
  return nullptr;
}

std::span<const CostInputList> cost_input_lists() {
  static const std::vector<CostInputList> lists = {
      {"block_sizes", "model", "block-sizes", "block sizes",
       "uneven blocks: sublayers per block in model order (sum = L), instead of N, S or K",
       "8,8,8,8", &CostInputs::block_sizes},
      {"full_attention_layers", "attention", "full-attention-layers", "full-attention layers",
       "hybrid by list: the 1-based layers that keep the attention kind (the others linear), "
       "instead of a hybrid period",
       "4,8,12", &CostInputs::full_attention_layers},
      {"stage_layers", "parallel", "stage-layers", "stage layers",
       "uneven pipeline stages: transformer layers per chunk in chunk order (P·V entries, sum = "
       "the layers); default whole layers split evenly",
       "7,8,8,6", &CostInputs::stage_layers},
  };
  return lists;
}

const CostInputList* find_cost_input_list(std::string_view key) {
  for (const auto& list : cost_input_lists()) {
    if (list.key == key) return &list;
  }
  return nullptr;
}

std::string_view cost_input_section(std::string_view key) {
  if (const CostInputField* f = find_cost_input_field(key)) return f->section;
  if (const CostInputChoice* c = find_cost_input_choice(key)) return c->section;
  if (const CostInputList* l = find_cost_input_list(key)) return l->section;
  return "";
}

std::vector<std::string> cost_input_section_keys(std::string_view section) {
  std::vector<std::string> keys = cost_input_keys(section);
  for (const auto& choice : cost_input_choices()) {
    if (choice.section == section) keys.emplace_back(choice.key);
  }
  for (const auto& list : cost_input_lists()) {
    if (list.section == section) keys.emplace_back(list.key);
  }
  return keys;
}

const CostInputField* find_cost_input_field(std::string_view key) {
  for (const auto& field : cost_input_fields()) {
    if (field.key == key) return &field;
  }
  return nullptr;
}

std::vector<std::string> cost_input_keys(std::string_view section) {
  std::vector<std::string> keys;
  for (const auto& field : cost_input_fields()) {
    if (field.section == section) keys.emplace_back(field.key);
  }
  return keys;
}

std::int64_t cost_input_value(const CostInputs& resolved, const CostInputField& field) {
  if (field.key == "layers") return resolved.sublayers / 2;
  if (field.key == "block_layers") return layers_per_block(resolved.block_size).value_or(0);
  return resolved.*field.member;
}

const std::vector<std::string>& sweep_parameters() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& field : cost_input_fields()) out.emplace_back(field.key);
    for (std::string_view name : kPipelineSweepParameters) out.emplace_back(name);
    for (std::string_view name : kNamedSweepParameters) out.emplace_back(name);
    return out;
  }();
  return names;
}

bool is_named_sweep_parameter(std::string_view parameter) {
  return std::find(std::begin(kNamedSweepParameters), std::end(kNamedSweepParameters), parameter) !=
         std::end(kNamedSweepParameters);
}

bool is_pipeline_sweep_parameter(std::string_view parameter) {
  return std::find(std::begin(kPipelineSweepParameters), std::end(kPipelineSweepParameters),
                   parameter) != std::end(kPipelineSweepParameters);
}

void set_cost_input(CostInputs& in, const std::string& parameter, std::int64_t value) {
  if (const CostInputField* field = find_cost_input_field(parameter)) {
    in.*field->member = value;
    if (!field->alternative.empty()) in.*find_cost_input_field(field->alternative)->member = 0;
    if (field->key == "blocks" || field->key == "block_size" || field->key == "block_layers") {
      // N, S, K and a block list are one choice: the value set replaces the others.
      for (const char* key : {"blocks", "block_size", "block_layers"})
        if (field->key != key) in.*find_cost_input_field(key)->member = 0;
      in.block_sizes.clear();
    }
    return;
  }
  if (is_pipeline_sweep_parameter(parameter)) {
    throw Error(
        "sweep parameter '" + parameter +
        "' belongs to the pipeline simulation: sweep it with a "
        "scenario that has a [pipeline] table (attnres sweep --scenario FILE, or attnres report)");
  }
  const std::string hint = did_you_mean(parameter, sweep_parameters());
  throw Error("unknown sweep parameter '" + parameter + "'" +
              (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
}

std::vector<std::int64_t> expand_sweep_range(const SweepRange& range, const std::string& where) {
  if ((range.step > 0) == (range.factor > 0))
    throw Error(where + ": give exactly one of a step or a factor");
  if (range.to < range.from) {
    throw Error(where + ": TO (" + std::to_string(range.to) + ") is below FROM (" +
                std::to_string(range.from) + ")");
  }
  // Distances in unsigned arithmetic: no intermediate overflows, even next to the int64 limits.
  const auto distance = [](std::int64_t from, std::int64_t to) {
    return static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
  };
  std::vector<std::int64_t> values;
  if (range.step > 0) {
    const auto step = static_cast<std::uint64_t>(range.step);
    if (distance(range.from, range.to) / step + 1 >
        static_cast<std::uint64_t>(kMaxSweepAxisValues)) {
      throw Error(where + ": too many values (more than " + std::to_string(kMaxSweepAxisValues) +
                  ")");
    }
    for (std::int64_t v = range.from;; v += range.step) {
      values.push_back(v);
      if (distance(v, range.to) < step) break;  // the next value would pass TO
    }
    return values;
  }
  if (range.factor < 2 || range.from < 1)
    throw Error(where + ": a factor needs FROM >= 1 and FACTOR >= 2");
  for (std::int64_t v = range.from;; v *= range.factor) {
    values.push_back(v);
    if (v > range.to / range.factor) break;  // v * factor would pass TO (or overflow)
  }
  return values;
}

std::vector<std::int64_t> parse_sweep_values(const std::string& text, const std::string& where,
                                             std::int64_t sublayers) {
  if (text == "divisors") return divisors(sublayers);
  const std::string forms = "expected 1,2,4 or divisors or FROM:TO[:STEP] or FROM:TO:xFACTOR";
  auto to_int = [&](std::string word) {
    const auto first = word.find_first_not_of(" \t");
    word = first == std::string::npos
               ? std::string()
               : word.substr(first, word.find_last_not_of(" \t") - first + 1);
    std::int64_t value = 0;
    const char* end = word.data() + word.size();
    const auto [ptr, ec] = std::from_chars(word.data(), end, value);
    if (word.empty() || ec != std::errc() || ptr != end) {
      throw Error(where + ": '" + word + "' is not an integer (" + forms + ")");
    }
    return value;
  };
  if (text.find(':') != std::string::npos) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, ':');) parts.push_back(part);
    if (parts.size() < 2 || parts.size() > 3)
      throw Error(where + ": expected FROM:TO[:STEP|:xFACTOR]");
    SweepRange range;
    range.from = to_int(parts[0]);
    range.to = to_int(parts[1]);
    if (parts.size() == 3 && !parts[2].empty() && parts[2][0] == 'x') {
      range.factor = to_int(parts[2].substr(1));
      if (range.factor < 2) throw Error(where + ": a factor needs FROM >= 1 and FACTOR >= 2");
    } else {
      range.step = parts.size() == 3 ? to_int(parts[2]) : 1;
      if (range.step < 1) throw Error(where + ": STEP must be >= 1");
    }
    return expand_sweep_range(range, where);
  }
  if (text.find_first_not_of(" \t") == std::string::npos)
    throw Error(where + ": no values given (" + forms + ")");
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  for (std::size_t entry = 1;; ++entry) {
    const std::size_t comma = text.find(',', start);
    const std::string word =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (word.find_first_not_of(" \t") == std::string::npos) {
      throw Error(where + ": entry " + std::to_string(entry) + " of '" + text +
                  "' is empty (a stray comma?); expected a list such as 1,2,4");
    }
    values.push_back(to_int(word));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t k = 1; k * k <= n; ++k) {
    if (n % k == 0) {
      small.push_back(k);
      if (k != n / k) large.push_back(n / k);
    }
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

}  // namespace attnres
