#include "attnres/model_config.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "attnres/error.hpp"

namespace attnres {

using nlohmann::json;

std::string to_string(ResidualMode mode) {
  switch (mode) {
    case ResidualMode::standard: return "standard";
    case ResidualMode::full: return "full";
    case ResidualMode::block: return "block";
  }
  return "?";
}

ResidualMode parse_residual_mode(const std::string& text, const std::string& what) {
  if (text == "standard") return ResidualMode::standard;
  if (text == "full") return ResidualMode::full;
  if (text == "block") return ResidualMode::block;
  throw Error(what + ": unknown residual mode '" + text + "' (expected standard, full or block)");
}

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
                name("num_attention_heads") + " = " +
                std::to_string(head_dim()) + " must be even for RoPE");
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
    throw Error(where + ": " + name("attn_res.block_size") + " must be between 1 and L = " +
                std::to_string(sublayers()) + " sublayers for block mode, got " +
                std::to_string(attn_res.block_size));
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
    for (const auto& [key, value] : attn->items()) {
      if (key != "mode" && key != "block_size" && key != "key_norm_eps") {
        throw Error(where + ": unknown key '" + key +
                    "' (expected mode, block_size, key_norm_eps)");
      }
    }
    if (auto mode = attn->find("mode"); mode != attn->end()) {
      if (!mode->is_string()) throw Error(where + ".mode must be a string");
      config.attn_res.mode = parse_residual_mode(mode->get<std::string>(), where + ".mode");
    }
    config.attn_res.block_size = read_int(*attn, "block_size", where, 0);
    config.attn_res.key_norm_eps = read_double(*attn, "key_norm_eps", where, 1e-6);
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
  attn["mode"] = to_string(config.attn_res.mode);
  if (config.attn_res.block_size > 0) attn["block_size"] = config.attn_res.block_size;
  attn["key_norm_eps"] = config.attn_res.key_norm_eps;
  root["attn_res"] = attn;
  return root.dump(2) + "\n";
}

}  // namespace attnres
