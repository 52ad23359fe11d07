#include "attnres/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "attnres/error.hpp"

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
  if (hidden_size % num_attention_heads != 0) {
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
    throw Error(where + ": head_dim = " + name("hidden_size") + " / " +
                name("num_attention_heads") + " = " + std::to_string(head_dim()) +
                " must be even for RoPE");
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

namespace {

int read_int(const json& object, const char* key, const std::string& source,
             std::optional<int> fallback = std::nullopt) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (fallback) return *fallback;
    throw Error(source + ": missing key '" + key + "' (expected an integer)");
  }
  if (!it->is_number_integer()) {
    throw Error(source + ": key '" + key + "' must be an integer, got " + it->dump());
  }
  const auto value = it->get<long long>();
  if (value < -2147483647LL || value > 2147483647LL) {
    throw Error(source + ": key '" + key + "' is out of range: " + it->dump());
  }
  return static_cast<int>(value);
}

double read_double(const json& object, const char* key, const std::string& source,
                   double fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number()) {
    throw Error(source + ": key '" + key + "' must be a number, got " + it->dump());
  }
  return it->get<double>();
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& error) {  // parse_error, and out_of_range for numbers like 1e3060
    throw Error(source + ": not valid JSON (" + error.what() + ")");
  }
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
      throw Error(source + ": hidden_act must be \"silu\" (SwiGLU), got " + hidden_act->dump());
    }
  }
  if (auto tie = root.find("tie_word_embeddings"); tie != root.end()) {
    if (!tie->is_boolean() || tie->get<bool>()) {
      throw Error(source + ": tie_word_embeddings must be false (the LM head is untied)");
    }
  }

  if (auto attn = root.find("attn_res"); attn != root.end() && !attn->is_null()) {
    const std::string where = source + ": attn_res";
    if (!attn->is_object()) throw Error(where + " must be an object");
    static const char* const kKeys[] = {
        "mode",  "block_size",   "key_norm_eps", "gate",    "key_norm", "window",
        "heads", "query_source", "mixing",       "streams", "dynamic",  "sinkhorn_iterations"};
    for (const auto& [key, value] : attn->items()) {
      if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
        throw Error(where + ": unknown key '" + key +
                    "' (expected mode, block_size, key_norm_eps, gate, key_norm, window, heads, "
                    "query_source, "
                    "mixing, streams, dynamic, sinkhorn_iterations; docs/schemes.md)");
      }
    }
    auto text = [&](const char* key) -> std::optional<std::string> {
      auto it = attn->find(key);
      if (it == attn->end()) return std::nullopt;
      if (!it->is_string()) throw Error(where + "." + key + " must be a string, got " + it->dump());
      return it->get<std::string>();
    };
    auto flag = [&](const char* key, bool fallback) {
      auto it = attn->find(key);
      if (it == attn->end()) return fallback;
      if (!it->is_boolean())
        throw Error(where + "." + key + " must be true or false, got " + it->dump());
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
  config.validate(source);
  return config;
}

std::string model_config_to_json(const ModelConfig& config) {
  json root;
  root["architectures"] = json::array({"LlamaForCausalLM"});
  root["model_type"] = "llama";
  root["hidden_size"] = config.hidden_size;
  root["num_hidden_layers"] = config.num_hidden_layers;
  root["num_attention_heads"] = config.num_attention_heads;
  root["num_key_value_heads"] = config.num_key_value_heads;
  root["intermediate_size"] = config.intermediate_size;
  root["vocab_size"] = config.vocab_size;
  root["rms_norm_eps"] = config.rms_norm_eps;
  root["rope_theta"] = config.rope_theta;
  root["hidden_act"] = "silu";
  root["tie_word_embeddings"] = false;
  root["torch_dtype"] = "float32";
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

}  // namespace attnres
