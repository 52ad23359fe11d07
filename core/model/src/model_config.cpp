#include "attnres/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/json_reading.hpp"

namespace attnres {

using nlohmann::json;

void ModelConfig::validate(const std::string& where,
                           const std::function<std::string(const std::string&)>& key_name) const {
  auto name = [&](const std::string& key) { return key_name ? key_name(key) : key; };
  auto require_positive = [&](int value, const char* key) {
    if (value <= 0) {
      throw Error(where + ": " + name(key) + " must be a positive integer, got " +
                  std::to_string(value));
    }
  };
  require_positive(hidden_size, "hidden_size");
  require_positive(num_hidden_layers, "num_hidden_layers");
  require_positive(num_attention_heads, "num_attention_heads");
  require_positive(num_key_value_heads, "num_key_value_heads");
  require_positive(intermediate_size, "intermediate_size");
  require_positive(vocab_size, "vocab_size");
  if (explicit_head_dim < 0) {
    throw Error(where + ": " + name("head_dim") + " must be a positive integer, got " +
                std::to_string(explicit_head_dim));
  }
  if (explicit_head_dim == 0 && hidden_size % num_attention_heads != 0) {
    throw Error(where + ": " + name("num_attention_heads") + " (" +
                std::to_string(num_attention_heads) + ") must divide " + name("hidden_size") +
                " (" + std::to_string(hidden_size) + ")");
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    throw Error(where + ": " + name("num_key_value_heads") + " (" +
                std::to_string(num_key_value_heads) + ") must divide " +
                name("num_attention_heads") + " (" + std::to_string(num_attention_heads) + ")");
  }
  if (head_dim() % 2 != 0) {
    throw Error(where + ": " +
                (explicit_head_dim > 0
                     ? name("head_dim")
                     : "head_dim = " + name("hidden_size") + " / " + name("num_attention_heads")) +
                " = " + std::to_string(head_dim()) + " must be even for RoPE");
  }
  if (!(rms_norm_eps > 0.0) || !std::isfinite(rms_norm_eps)) {
    throw Error(where + ": " + name("rms_norm_eps") + " must be a positive finite number");
  }
  if (!(rope_theta > 0.0) || !std::isfinite(rope_theta)) {
    throw Error(where + ": " + name("rope_theta") + " must be a positive finite number");
  }
  if (!(attn_res.key_norm_eps > 0.0) || !std::isfinite(attn_res.key_norm_eps)) {
    throw Error(where + ": " + name("attn_res.key_norm_eps") + " must be a positive finite number");
  }
  if (attn_res.mode == ResidualMode::block &&
      (attn_res.block_size < 1 || attn_res.block_size > sublayers())) {
    throw Error(where + ": " + name("attn_res.block_size") +
                " must be between 1 and L = " + std::to_string(sublayers()) +
                " sublayers for block mode, got " + std::to_string(attn_res.block_size));
  }
  // Scheme keys (docs/schemes.md): each applies to some modes only.
  const AttnResConfig defaults;
  const std::string mode_text = "mode " + to_string(attn_res.mode);
  auto only_for = [&](bool applies, bool is_default, const char* key, const std::string& modes) {
    if (!applies && !is_default) {
      throw Error(where + ": " + name(key) + " applies to " + modes + " only, not to " + mode_text);
    }
  };
  const bool attention = attn_res.attention_mode();
  only_for(attention, attn_res.gate == defaults.gate, "attn_res.gate", "Full and Block AttnRes");
  only_for(attention, attn_res.mixing == defaults.mixing, "attn_res.mixing",
           "Full and Block AttnRes");
  only_for(attn_res.mode == ResidualMode::full, attn_res.window == defaults.window,
           "attn_res.window", "Full AttnRes (mode full)");
  const bool query = attn_res.uses_query();
  const std::string query_modes = "Full and Block AttnRes with mixing = attention";
  only_for(query, attn_res.key_norm == defaults.key_norm, "attn_res.key_norm", query_modes);
  only_for(query, attn_res.heads == defaults.heads, "attn_res.heads", query_modes);
  only_for(query, attn_res.query_source == defaults.query_source, "attn_res.query_source",
           query_modes);
  const bool mhc = attn_res.mode == ResidualMode::mhc;
  only_for(mhc, attn_res.streams == defaults.streams, "attn_res.streams", "mHC (mode mhc)");
  only_for(mhc, attn_res.dynamic == defaults.dynamic, "attn_res.dynamic", "mHC (mode mhc)");
  only_for(mhc, attn_res.sinkhorn_iterations == defaults.sinkhorn_iterations,
           "attn_res.sinkhorn_iterations", "mHC (mode mhc)");
  if (attn_res.window < 0) {
    throw Error(where + ": " + name("attn_res.window") + " must be >= 0 (0 = no window), got " +
                std::to_string(attn_res.window));
  }
  if (attn_res.heads < 1 || hidden_size % attn_res.heads != 0) {
    throw Error(where + ": " + name("attn_res.heads") + " (" + std::to_string(attn_res.heads) +
                ") must be a positive divisor of " + name("hidden_size") + " (" +
                std::to_string(hidden_size) + ")");
  }
  if (attn_res.streams < 1) {
    throw Error(where + ": " + name("attn_res.streams") +
                " must be at least 1 (mHC needs a stream), got " +
                std::to_string(attn_res.streams));
  }
  if (attn_res.sinkhorn_iterations < 1) {
    throw Error(where + ": " + name("attn_res.sinkhorn_iterations") + " must be at least 1, got " +
                std::to_string(attn_res.sinkhorn_iterations));
  }
}

void ModelConfig::require_gradients(const std::string& what) const {
  if (qk_norm) {
    throw Error(what +
                ": this model has Qwen3's q/k norms, which the lab runs forward only (no "
                "gradients or training; docs/interop.md)");
  }
  if (tie_word_embeddings) {
    throw Error(what +
                ": this model ties its LM head to the embedding (tie_word_embeddings), and "
                "the lab computes gradients of an untied head only; forward passes and inspect "
                "run it (docs/interop.md)");
  }
  if (detached_blocks) {
    throw Error(what +
                ": this model declares attn_res_detach_blocks = true (detached block "
                "summaries), whose gradients no scheme of the lab computes (docs/interop.md "
                "\"Deviations\")");
  }
}

namespace {

int read_int(const json& object, const char* key, const std::string& source,
             std::optional<int> fallback = std::nullopt) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (fallback) return *fallback;
    throw Error(source + ": missing key '" + key + "' (expected an integer)");
  }
  if (!it->is_number_integer()) {
    throw Error(source + ": key '" + key + "' must be an integer, got " + describe_json(*it));
  }
  const auto value = it->get<long long>();
  if (value < -2147483647LL || value > 2147483647LL) {
    throw Error(source + ": key '" + key + "' is out of range: " + describe_json(*it));
  }
  return static_cast<int>(value);
}

double read_double(const json& object, const char* key, const std::string& source,
                   double fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    throw Error(source + ": key '" + key + "' must be a number, got " + describe_json(*it));
  }
  return it->get<double>();
}

}  // namespace

std::string to_string(CheckpointLayout layout) {
  switch (layout) {
    case CheckpointLayout::lab:
      return "lab";
    case CheckpointLayout::k3:
      return "k3";
    case CheckpointLayout::plain:
      return "plain";
  }
  return "lab";
}

namespace {

// Top-level keys the lab reads; every other key is passed through (docs/interop.md).
const char* const kReadKeys[] = {"architectures",
                                 "model_type",
                                 "hidden_size",
                                 "num_hidden_layers",
                                 "num_attention_heads",
                                 "num_key_value_heads",
                                 "intermediate_size",
                                 "vocab_size",
                                 "rms_norm_eps",
                                 "rope_theta",
                                 "hidden_act",
                                 "tie_word_embeddings",
                                 "head_dim",
                                 "attn_res",
                                 "attn_res_block_size"};

bool is_read_key(const std::string& key) {
  return std::find(std::begin(kReadKeys), std::end(kReadKeys), key) != std::end(kReadKeys);
}

// Deviations from the paper that ports declare in config.json (docs/interop.md "Deviations"): the
// value each key has in the paper's scheme, and what the lab does otherwise.
struct DeviationKey {
  const char* key;
  json paper_value;
  bool forward_same;  // true: the forward pass is the paper's; training differs
  const char* meaning;
};

const std::vector<DeviationKey>& deviation_keys() {
  static const std::vector<DeviationKey> keys = {
      {"attn_res_block_reduce", "sum", false, "block summaries averaged instead of summed"},
      {"attn_res_embed_in_first_block", false, false,
       "the embedding folded into the first block instead of being its own source"},
      {"attn_res_final_read", true, false, "no final read (the last block sum goes to the head)"},
      {"attn_res_detach_blocks", false, true,
       "detached block summaries (no gradient through earlier blocks)"}};
  return keys;
}

// Keys of the Hugging Face config that change what the forward pass computes, with the value at
// which they change nothing.
void refuse_math_changing_keys(const json& root, const std::string& source) {
  auto refuse_unless = [&](const char* key, auto&& harmless, const char* what) {
    const auto it = root.find(key);
    if (it != root.end() && !harmless(*it)) {
      throw Error(source + ": " + key + " = " + describe_json(*it) + " (" + what +
                  ") is not supported: the lab computes Llama/Qwen3 blocks without it "
                  "(docs/interop.md)");
    }
  };
  auto is_false = [](const json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); };
  refuse_unless("attention_bias", is_false, "biases in the q/k/v/o projections");
  refuse_unless("mlp_bias", is_false, "biases in the MLP");
  refuse_unless("use_sliding_window", is_false, "sliding-window attention");
  refuse_unless(
      "rope_scaling", [](const json& v) { return v.is_null(); }, "RoPE scaling");
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  // Nesting capped, duplicate keys refused, errors located (json_reading.hpp).
  const json root = parse_json_document(json_text, source);
  if (!root.is_object()) throw Error(source + ": expected a JSON object at the top level");

  ModelConfig config;
  config.hidden_size = read_int(root, "hidden_size", source);
  config.num_hidden_layers = read_int(root, "num_hidden_layers", source);
  config.num_attention_heads = read_int(root, "num_attention_heads", source);
  config.num_key_value_heads =
      read_int(root, "num_key_value_heads", source, config.num_attention_heads);
  config.intermediate_size = read_int(root, "intermediate_size", source);
  config.vocab_size = read_int(root, "vocab_size", source);
  config.rms_norm_eps = read_double(root, "rms_norm_eps", source, 1e-6);
  config.rope_theta = read_double(root, "rope_theta", source, 10000.0);
  if (auto hidden_act = root.find("hidden_act"); hidden_act != root.end()) {
    if (!hidden_act->is_string() || hidden_act->get<std::string>() != "silu") {
      throw Error(source + ": hidden_act must be \"silu\" (SwiGLU), got " +
                  describe_json(*hidden_act));
    }
  }
  if (auto tie = root.find("tie_word_embeddings"); tie != root.end() && !tie->is_null()) {
    if (!tie->is_boolean())
      throw Error(source + ": tie_word_embeddings must be true or false, got " +
                  describe_json(*tie));
    config.tie_word_embeddings = tie->get<bool>();
  }
  if (auto head_dim = root.find("head_dim"); head_dim != root.end() && !head_dim->is_null()) {
    const int value = read_int(root, "head_dim", source);
    if (value <= 0)
      throw Error(source + ": head_dim must be a positive integer, got " +
                  describe_json(*head_dim));
    // Written by Hugging Face for every Llama too: explicit only where it is not d / H.
    if (config.num_attention_heads <= 0 || value * config.num_attention_heads != config.hidden_size)
      config.explicit_head_dim = value;
  }
  if (auto type = root.find("model_type"); type != root.end()) {
    const std::string name = type->is_string() ? type->get<std::string>() : describe_json(*type);
    if (name == "qwen3") {
      config.qk_norm = true;
    } else if (name != "llama") {
      throw Error(source + ": model_type \"" + quote_untrusted(name) +
                  "\" is not supported (expected \"llama\" or \"qwen3\"; docs/interop.md)");
    }
  }
  refuse_math_changing_keys(root, source);

  const auto attn = root.find("attn_res");
  const auto k3 = root.find("attn_res_block_size");
  const bool has_lab = attn != root.end() && !attn->is_null();
  if (has_lab && k3 != root.end()) {
    throw Error(source +
                ": has both attn_res (the lab's layout) and attn_res_block_size (Kimi "
                "K3's); a config.json is in one layout (docs/interop.md)");
  }
  for (const auto& [key, value] : root.items()) {
    if (key.rfind("attn_res", 0) != 0 || key == "attn_res" || key == "attn_res_block_size")
      continue;
    const auto& known = deviation_keys();
    const std::string& name = key;  // clang 14 cannot capture a structured binding
    const auto it = std::find_if(known.begin(), known.end(),
                                 [&name](const DeviationKey& d) { return name == d.key; });
    if (it == known.end()) {
      throw Error(source + ": unknown AttnRes key '" + quote_untrusted(key) +
                  "': the port that wrote it may deviate from the paper, and the lab does not "
                  "read it as the paper's scheme (docs/interop.md \"Deviations\")");
    }
    if (value == it->paper_value) continue;
    if (!it->forward_same) {
      throw Error(source + ": " + key + " = " + describe_json(value) + ": " + it->meaning +
                  ", which no scheme of the lab computes; refusing rather than reading it as "
                  "the paper's scheme (docs/interop.md \"Deviations\")");
    }
    config.notes.push_back(std::string(key) + " = " + describe_json(value) + ": " + it->meaning +
                           "; the forward pass is the paper's, training would differ");
    config.detached_blocks = true;
  }
  if (k3 != root.end()) {
    config.layout = CheckpointLayout::k3;
    if (k3->is_null()) {
      config.attn_res.mode = ResidualMode::standard;
    } else {
      if (!k3->is_number_integer() || k3->get<long long>() < 1 || k3->get<long long>() > 1000000) {
        throw Error(source +
                    ": attn_res_block_size must be a positive integer (decoder layers "
                    "per block) or null (the standard residual), got " +
                    describe_json(*k3));
      }
      config.k3_block_layers = static_cast<int>(k3->get<long long>());
      config.attn_res.mode = ResidualMode::block;
      config.attn_res.block_size = std::min(2 * config.k3_block_layers, config.sublayers());
      config.attn_res.key_norm_eps = config.rms_norm_eps;  // K3's reads use rms_norm_eps
    }
  } else if (!has_lab) {
    config.layout = CheckpointLayout::plain;
  }

  if (has_lab) {
    const std::string where = source + ": attn_res";
    if (!attn->is_object()) throw Error(where + " must be an object");
    static const char* const kKeys[] = {
        "mode",  "block_size",   "key_norm_eps", "gate",    "key_norm", "window",
        "heads", "query_source", "mixing",       "streams", "dynamic",  "sinkhorn_iterations"};
    for (const auto& [key, value] : attn->items()) {
      if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
        throw Error(where + ": unknown key '" + quote_untrusted(key) +
                    "' (expected mode, block_size, key_norm_eps, gate, key_norm, window, heads, "
                    "query_source, "
                    "mixing, streams, dynamic, sinkhorn_iterations; docs/schemes.md)");
      }
    }
    auto text = [&](const char* key) -> std::optional<std::string> {
      auto it = attn->find(key);
      if (it == attn->end()) return std::nullopt;
      if (!it->is_string())
        throw Error(where + "." + key + " must be a string, got " + describe_json(*it));
      return it->get<std::string>();
    };
    auto flag = [&](const char* key, bool fallback) {
      auto it = attn->find(key);
      if (it == attn->end()) return fallback;
      if (!it->is_boolean())
        throw Error(where + "." + key + " must be true or false, got " + describe_json(*it));
      return it->get<bool>();
    };
    AttnResConfig& a = config.attn_res;
    if (auto mode = text("mode")) a.mode = parse_residual_mode(*mode, where + ".mode");
    a.block_size = read_int(*attn, "block_size", where, 0);
    a.key_norm_eps = read_double(*attn, "key_norm_eps", where, 1e-6);
    if (auto gate = text("gate")) a.gate = parse_depth_gate(*gate, where + ".gate");
    a.key_norm = flag("key_norm", a.key_norm);
    a.window = read_int(*attn, "window", where, a.window);
    a.heads = read_int(*attn, "heads", where, a.heads);
    if (auto query = text("query_source"))
      a.query_source = parse_query_source(*query, where + ".query_source");
    if (auto mixing = text("mixing")) a.mixing = parse_depth_mixing(*mixing, where + ".mixing");
    a.streams = read_int(*attn, "streams", where, a.streams);
    a.dynamic = flag("dynamic", a.dynamic);
    a.sinkhorn_iterations = read_int(*attn, "sinkhorn_iterations", where, a.sinkhorn_iterations);
  }
  json passthrough = json::object();
  for (const auto& [key, value] : root.items()) {
    // head_dim = d / H (Hugging Face writes it for every Llama) is kept as written.
    if (!is_read_key(key) || (key == "head_dim" && config.explicit_head_dim == 0))
      passthrough[key] = value;
  }
  if (!passthrough.empty()) config.passthrough_json = passthrough.dump();
  config.validate(source);
  return config;
}

namespace {

// The Hugging Face keys every layout shares, over the passthrough keys.
json architecture_json(const ModelConfig& config) {
  json root =
      config.passthrough_json.empty() ? json::object() : json::parse(config.passthrough_json);
  root["architectures"] = json::array({config.qk_norm ? "Qwen3ForCausalLM" : "LlamaForCausalLM"});
  root["model_type"] = config.qk_norm ? "qwen3" : "llama";
  root["hidden_size"] = config.hidden_size;
  root["num_hidden_layers"] = config.num_hidden_layers;
  root["num_attention_heads"] = config.num_attention_heads;
  root["num_key_value_heads"] = config.num_key_value_heads;
  if (config.explicit_head_dim > 0) root["head_dim"] = config.explicit_head_dim;
  root["intermediate_size"] = config.intermediate_size;
  root["vocab_size"] = config.vocab_size;
  root["rms_norm_eps"] = config.rms_norm_eps;
  root["rope_theta"] = config.rope_theta;
  root["hidden_act"] = "silu";
  root["tie_word_embeddings"] = config.tie_word_embeddings;
  return root;  // torch_dtype: the caller's, as it writes the tensors
}

}  // namespace

std::string model_config_to_json(const ModelConfig& config) {
  json root = architecture_json(config);
  root["torch_dtype"] = "float32";  // save_model writes F32
  json attn;
  const AttnResConfig& a = config.attn_res;
  const AttnResConfig defaults;
  attn["mode"] = to_string(a.mode);
  if (a.block_size > 0) attn["block_size"] = a.block_size;
  attn["key_norm_eps"] = a.key_norm_eps;
  // Scheme keys only where they differ from the default, so plain models keep their old files.
  if (a.gate != defaults.gate) attn["gate"] = to_string(a.gate);
  if (a.key_norm != defaults.key_norm) attn["key_norm"] = a.key_norm;
  if (a.window != defaults.window) attn["window"] = a.window;
  if (a.heads != defaults.heads) attn["heads"] = a.heads;
  if (a.query_source != defaults.query_source) attn["query_source"] = to_string(a.query_source);
  if (a.mixing != defaults.mixing) attn["mixing"] = to_string(a.mixing);
  if (a.mode == ResidualMode::mhc) {
    attn["streams"] = a.streams;
    attn["dynamic"] = a.dynamic;
    attn["sinkhorn_iterations"] = a.sinkhorn_iterations;
  }
  root["attn_res"] = attn;
  return root.dump(2) + "\n";
}

int k3_block_layers(const ModelConfig& config) {
  const AttnResConfig& a = config.attn_res;
  if (a.mode == ResidualMode::standard) return 0;
  const std::string why =
      "the Kimi K3 layout holds the standard residual and Block AttnRes "
      "with S = 2 x attn_res_block_size (docs/interop.md); ";
  if (a.mode != ResidualMode::block) {
    throw Error(why + "this model is " + a.describe() +
                (a.mode == ResidualMode::full
                     ? " (every sublayer its own source, S = 1); export it in the lab's layout"
                     : "; export it in the lab's layout"));
  }
  AttnResConfig paper;
  paper.mode = ResidualMode::block;
  paper.block_size = a.block_size;
  paper.key_norm_eps = a.key_norm_eps;
  if (!(a == paper)) {
    throw Error(why + "this model's Block AttnRes sets scheme keys beyond the paper's (" +
                a.describe() + "); export it in the lab's layout");
  }
  if (a.key_norm_eps != config.rms_norm_eps) {
    throw Error(why + "its reads use rms_norm_eps (" + format_number(config.rms_norm_eps) +
                ") but this model's attn_res.key_norm_eps is " + format_number(a.key_norm_eps));
  }
  // One block: the size as it was read, when it was larger than the model.
  if (a.block_size == config.sublayers() && config.k3_block_layers * 2 >= config.sublayers())
    return config.k3_block_layers;
  if (a.block_size % 2 != 0) {
    throw Error(why + "this model has S = " + std::to_string(a.block_size) +
                " sublayers, which is not a whole number of decoder layers");
  }
  return a.block_size / 2;
}

std::string model_config_to_k3_json(const ModelConfig& config, const std::string& dtype_name) {
  const int block_layers = k3_block_layers(config);
  json root = architecture_json(config);
  root["torch_dtype"] = dtype_name;
  root["attn_res_block_size"] = block_layers > 0 ? json(block_layers) : json(nullptr);
  return root.dump(2) + "\n";
}

}  // namespace attnres
