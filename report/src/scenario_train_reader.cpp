// The [train] table of a scenario file (docs/training.md, docs/scenarios.md): the data file, the
// tiny model's sizes and the optimiser settings within their ranges, the schemes (each checked
// by building its model config) and Block AttnRes block counts, history masks, seeds, and the
// head split the model needs (RoPE wants an even head size).
#include "attnres/error.hpp"
#include "attnres/history_mask.hpp"
#include "scenario_reader.hpp"

namespace attnres::detail {

void ScenarioReader::read_training(const toml::table& root, Scenario& s) const {
  const toml::table* train = table(root, "train");
  if (!train) return;
  check_keys(
      *train, "train.",
      {"data", "layers", "d_model", "heads", "kv_heads", "ffn", "schemes", "blocks", "steps", "seq",
       "batch", "lr", "seeds", "eval_every", "threads", "precision", "save_models", "masks"});
  ScenarioTraining t;
  const toml::node* data = train->get("data");
  if (!data)
    fail(train->source(),
         "[train] needs 'data': a text file to train on (relative to this scenario file)");
  t.data = string(*data, "train.data");
  t.data_path = std::filesystem::path(source()).parent_path() / t.data;
  read_training_settings(*train, t);
  const toml::node* schemes_node = read_training_schemes(*train, t);
  if (t.schemes.empty() && t.blocks.empty())
    fail(train->source(), "[train] has no schemes and no blocks to train");
  check_training_schemes(schemes_node, t);
  read_training_masks(*train, t);
  read_training_seeds(*train, t);
  check_training_heads(*train, t);
  s.training = t;
}

void ScenarioReader::read_training_settings(const toml::table& train, ScenarioTraining& t) const {
  auto bounded = [&](const char* key, int& out, std::int64_t lowest, std::int64_t highest) {
    if (const toml::node* n = train.get(key)) {
      const std::int64_t value = integer(*n, std::string("train.") + key);
      if (value < lowest || value > highest) {
        fail(n->source(), std::string("train.") + key + " must be between " +
                              std::to_string(lowest) + " and " + std::to_string(highest) +
                              ", got " + std::to_string(value));
      }
      out = static_cast<int>(value);
    }
  };
  bounded("layers", t.layers, 1, 64);
  bounded("d_model", t.d_model, 2, 4096);
  bounded("heads", t.heads, 1, 256);
  bounded("kv_heads", t.kv_heads, 0, 256);
  bounded("ffn", t.ffn, 0, 65536);
  bounded("steps", t.steps, 1, 10'000'000);
  bounded("seq", t.seq, 2, 65536);
  bounded("batch", t.batch, 1, 4096);
  bounded("eval_every", t.eval_every, 0, 10'000'000);
  bounded("threads", t.threads, 0, 1024);
  if (const toml::node* n = train.get("lr")) {
    t.lr = number(*n, "train.lr");
    if (!(t.lr > 0.0 && t.lr < 10.0))
      fail(n->source(), "train.lr must be a positive number below 10");
  }
  if (const toml::node* n = train.get("precision")) {
    t.precision = string(*n, "train.precision");
    if (t.precision != "bf16" && t.precision != "f32") {
      fail(n->source(),
           "train.precision must be \"bf16\" or \"f32\" (training keeps f32 "
           "weights), got \"" +
               t.precision + "\"");
    }
  }
  if (const toml::node* n = train.get("save_models"))
    t.save_models = boolean(*n, "train.save_models");
}

const toml::node* ScenarioReader::read_training_schemes(const toml::table& train,
                                                        ScenarioTraining& t) const {
  const toml::node* schemes_node = train.get("schemes");
  if (schemes_node) {
    if (!schemes_node->is_array())
      fail(schemes_node->source(),
           "train.schemes must be an array of scheme names such as \"standard\", \"full\", "
           "\"block:block_size=4\"");
    t.schemes.clear();
    for (const auto& item : *schemes_node->as_array())
      t.schemes.push_back(string(item, "train.schemes entry"));
  }
  const int L = t.sublayers();
  if (const toml::node* n = train.get("blocks")) {
    if (!n->is_array()) fail(n->source(), "train.blocks must be an array of block counts N");
    for (const auto& item : *n->as_array()) {
      const std::int64_t blocks = integer(item, "train.blocks entry");
      if (blocks < 1 || blocks > L || L % blocks != 0) {
        fail(item.source(), "train.blocks entry " + std::to_string(blocks) + " must divide L = " +
                                std::to_string(L) + " sublayers (2 x train.layers)");
      }
      t.blocks.push_back(static_cast<int>(blocks));
    }
  }
  return schemes_node;
}

void ScenarioReader::check_training_schemes(const toml::node* schemes_node,
                                            const ScenarioTraining& t) const {
  if (schemes_node) {
    std::size_t index = 0;
    for (const auto& item : *schemes_node->as_array()) {
      try {
        t.scheme_of(t.schemes[index++]);
      } catch (const Error& error) {
        fail(item.source(), error.what());
      }
    }
  }
}

void ScenarioReader::read_training_masks(const toml::table& train, ScenarioTraining& t) const {
  if (const toml::node* n = train.get("masks")) {
    if (!n->is_array())
      fail(n->source(),
           "train.masks must be an array of masks such as \"embedding\", \"distant:2\"");
    for (const auto& item : *n->as_array()) {
      const std::string mask = string(item, "train.masks entry");
      try {
        parse_mask_selection(mask, "train.masks");
      } catch (const Error& error) {
        fail(item.source(), error.what());
      }
      t.masks.push_back(mask);
    }
  }
}

void ScenarioReader::read_training_seeds(const toml::table& train, ScenarioTraining& t) const {
  if (const toml::node* n = train.get("seeds")) {
    if (!n->is_array() || n->as_array()->empty())
      fail(n->source(), "train.seeds must be a non-empty array of integers");
    t.seeds.clear();
    for (const auto& item : *n->as_array()) {
      const std::int64_t seed = integer(item, "train.seeds entry");
      if (seed < 0) fail(item.source(), "train.seeds entries must be >= 0");
      t.seeds.push_back(static_cast<std::uint64_t>(seed));
    }
  }
}

void ScenarioReader::check_training_heads(const toml::table& train,
                                          const ScenarioTraining& t) const {
  // At the key, not the [train] header (the defaults have no key: then the table).
  auto at = [&](const char* key) {
    return train.get(key) ? train.get(key)->source() : train.source();
  };
  if (t.d_model % t.heads != 0 || (t.d_model / t.heads) % 2 != 0) {
    fail(at(train.get("heads") ? "heads" : "d_model"),
         "[train]: heads (" + std::to_string(t.heads) + ") must divide d_model (" +
             std::to_string(t.d_model) + ") into an even head size (RoPE)");
  }
  if (t.kv_heads > 0 && t.heads % t.kv_heads != 0)
    fail(at("kv_heads"), "[train]: kv_heads must divide heads");
}

}  // namespace attnres::detail
