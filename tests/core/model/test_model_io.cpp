// Model files (docs/math.md §2.6): config.json parsing, random models, save/load, and inconsistent
// files.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_model_io {

ModelConfig tiny_config() {
  ModelConfig config;
  config.hidden_size = 8;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.intermediate_size = 12;
  config.vocab_size = 10;
  return config;
}

void expect_error_containing(const std::function<void()>& action,
                             const std::vector<std::string>& needles) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one containing '" << needles.front() << "'";
  } catch (const Error& error) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  }
}

// Rewrites DIR/model.safetensors through `edit`, which may drop or change tensors.
void edit_weights(const std::filesystem::path& dir,
                  const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  const auto file = SafetensorsFile::read(dir / "model.safetensors");
  std::vector<TensorToWrite> tensors;
  for (const auto& info : file.tensors()) {
    TensorToWrite t{info.name, info.shape, {}, {}, false};
    for (double x : file.values(info)) t.data.push_back(static_cast<float>(x));
    tensors.push_back(std::move(t));
  }
  edit(tensors);
  write_safetensors(dir / "model.safetensors", tensors);
}

TEST(ModelConfig, ParsesHuggingFaceKeysWithDefaults) {
  const auto config = parse_model_config(
      R"({"hidden_size":8,"num_hidden_layers":2,"num_attention_heads":2,"intermediate_size":12,
          "vocab_size":10,"attn_res":{"mode":"block","block_size":3}})",
      "c.json");
  EXPECT_EQ(config.num_key_value_heads, 2);  // defaults to the head count
  EXPECT_EQ(config.rms_norm_eps, 1e-6);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_EQ(config.attn_res.mode, ResidualMode::block);
  EXPECT_EQ(config.attn_res.block_size, 3);
  EXPECT_EQ(config.attn_res.key_norm_eps, 1e-6);
  EXPECT_EQ(config.sublayers(), 4);
}

TEST(ModelConfig, RoundTripsThroughJson) {
  auto config = tiny_config();
  config.attn_res = {ResidualMode::full, 0, 1e-5};
  config.rope_theta = 500000.0;
  const auto back = parse_model_config(model_config_to_json(config), "rt");
  EXPECT_EQ(back.hidden_size, config.hidden_size);
  EXPECT_EQ(back.num_key_value_heads, 1);
  EXPECT_EQ(back.attn_res.mode, ResidualMode::full);
  EXPECT_EQ(back.attn_res.key_norm_eps, 1e-5);
  EXPECT_EQ(back.rope_theta, 500000.0);
  const auto json = nlohmann::json::parse(model_config_to_json(config));
  EXPECT_EQ(json["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(json["model_type"], "llama");
}

TEST(ModelConfig, RejectsInconsistentShapesWithTheKeyName) {
  const std::string base = R"("num_hidden_layers":2,"intermediate_size":12,"vocab_size":10)";
  expect_error_containing(
      [&] {
        parse_model_config("{" + base + R"(,"hidden_size":10,"num_attention_heads":4})", "c.json");
      },
      {"c.json", "num_attention_heads (4) must divide hidden_size (10)"});
  expect_error_containing(
      [&] {
        parse_model_config(
            "{" + base + R"(,"hidden_size":8,"num_attention_heads":4,"num_key_value_heads":3})",
            "c.json");
      },
      {"num_key_value_heads (3) must divide"});
  expect_error_containing(
      [&] {
        parse_model_config("{" + base + R"(,"hidden_size":0,"num_attention_heads":4})", "c.json");
      },
      {"hidden_size must be a positive integer"});
  expect_error_containing(
      [&] {
        parse_model_config("{" + base + R"(,"hidden_size":"8","num_attention_heads":4})", "c.json");
      },
      {"'hidden_size' must be an integer"});
  expect_error_containing(
      [&] {
        parse_model_config(
            "{" + base +
                R"(,"hidden_size":8,"num_attention_heads":2,"attn_res":{"mode":"block","block_size":5}})",
            "c.json");
      },
      {"block_size must be between 1 and L = 4"});
  expect_error_containing(
      [&] {
        parse_model_config(
            "{" + base +
                R"(,"hidden_size":8,"num_attention_heads":2,"attn_res":{"mode":"sideways"}})",
            "c.json");
      },
      {"unknown residual mode 'sideways'"});
  expect_error_containing(
      [&] {
        parse_model_config(
            "{" + base + R"(,"hidden_size":8,"num_attention_heads":2,"attn_res":{"blocksize":2}})",
            "c.json");
      },
      {"unknown key 'blocksize'"});
  expect_error_containing([&] { parse_model_config("{" + base + "}", "c.json"); },
                          {"missing key 'hidden_size'"});
  expect_error_containing([&] { parse_model_config("{\"hidden_size\": 8,", "c.json"); },
                          {"c.json", "not valid JSON"});
  // Fuzzing found this: a number too large for a double is out_of_range in nlohmann/json.
  expect_error_containing(
      [&] { parse_model_config("{\"attn_res\": {\"key_norm_eps\": 1e3060}}", "c.json"); },
      {"c.json", "not valid JSON", "number overflow"});
}

TEST(RandomModel, SameSeedSameWeightsOtherSeedOtherWeights) {
  const auto a = random_model(tiny_config(), {.seed = 4, .query_std = 0.5});
  const auto b = random_model(tiny_config(), {.seed = 4, .query_std = 0.5});
  const auto c = random_model(tiny_config(), {.seed = 5, .query_std = 0.5});
  EXPECT_TRUE((a.layers[1].q_proj.array() == b.layers[1].q_proj.array()).all());
  EXPECT_FALSE((a.layers[1].q_proj.array() == c.layers[1].q_proj.array()).all());
  EXPECT_GT(a.final_res.query.norm(), 0.0);
  const auto zero = random_model(tiny_config(), {.seed = 4});
  EXPECT_EQ(zero.final_res.query.norm(), 0.0);  // queries zero by default
  EXPECT_EQ(zero.layers[0].input_layernorm, Vector<double>::Ones(8));
  // N(0, 0.02) weights: the sample std of the embedding is near 0.02. A statistical bound, not a
  // rounding one: over 80 draws the sample std's relative spread is 1 / sqrt(2 x 80) ~ 0.08, and
  // 0.3 of 0.02 is about four of those.
  const double std_dev = std::sqrt(a.embed_tokens.array().square().mean());
  EXPECT_TRUE(test::near_relative(std_dev, 0.02, 0.3, 0.0, "embedding std"));
}

TEST(ModelFiles, SaveThenLoadIsExact) {
  test::TempDir dir;
  const auto model = random_model(tiny_config(), {.seed = 9, .query_std = 0.3});
  save_model(model, dir.path());
  const auto loaded = load_model(dir.path());
  EXPECT_TRUE(loaded.has_attn_res_tensors);
  EXPECT_EQ(loaded.embed_tokens, model.embed_tokens);
  EXPECT_EQ(loaded.layers[1].down_proj, model.layers[1].down_proj);
  EXPECT_EQ(loaded.layers[0].mlp_res.query, model.layers[0].mlp_res.query);
  EXPECT_EQ(loaded.final_res.key_norm_gain, model.final_res.key_norm_gain);
  EXPECT_EQ(parameter_count(loaded), parameter_count(model));
}

TEST(ModelFiles, ModelWithoutAttnResTensorsIsStandardAndUsesZeroQueries) {
  test::TempDir dir;
  auto model = random_model(tiny_config(), {.seed = 9, .query_std = 0.3});
  model.has_attn_res_tensors = false;  // saved without them
  save_model(model, dir.path());
  const auto file = SafetensorsFile::read(dir / "model.safetensors");
  EXPECT_EQ(file.find("model.final_res.query"), nullptr);
  const auto loaded = load_model(dir.path());
  EXPECT_FALSE(loaded.has_attn_res_tensors);
  EXPECT_EQ(loaded.config.attn_res.mode, ResidualMode::standard);
  ForwardOptions options;
  options.mode = ResidualMode::full;
  const auto result = forward(loaded, {1, 2, 3}, options);
  // Zero queries: every weight is exp(0) / n, n <= 5 here: an exp (a few u), an n-term sum, a
  // division; 32 u of 1/n.
  for (const auto& read : result.trace.reads) {
    EXPECT_TRUE(test::near_relative(read.alpha.maxCoeff(),
                                    1.0 / static_cast<double>(read.sources.size()),
                                    test::roundoffs<double>(32), 0.0, read.target));
  }
}

TEST(ModelFiles, MissingTensorIsNamed) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    std::erase_if(tensors,
                  [](const auto& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  expect_error_containing(
      [&] { load_model(dir.path()); },
      {"model.safetensors", "missing tensor 'model.layers.1.mlp.up_proj.weight'", "[12, 8]"});
}

TEST(ModelFiles, WrongShapeIsNamed) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "lm_head.weight") t.shape = {8, 10};
    }
  });
  expect_error_containing([&] { load_model(dir.path()); },
                          {"tensor 'lm_head.weight' has shape [8, 10], expected [10, 8]"});
}

TEST(ModelFiles, NonFiniteWeightIsNamed) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.data[5] = NAN;
    }
  });
  expect_error_containing(
      [&] { load_model(dir.path()); },
      {"'model.layers.0.self_attn.k_proj.weight' holds a non-finite value", "flat index 5"});
}

TEST(ModelFiles, SomeButNotAllAttnResTensorsIsAnError) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    std::erase_if(tensors, [](const auto& t) { return t.name == "model.final_res.query"; });
  });
  expect_error_containing([&] { load_model(dir.path()); },
                          {"'model.final_res.query'", "all of them or none"});
}

TEST(ModelFiles, AttnResModeWithoutAttnResTensorsIsAnError) {
  test::TempDir dir;
  auto model = random_model(tiny_config(), {});
  model.has_attn_res_tensors = false;
  model.config.attn_res.mode = ResidualMode::full;
  save_model(model, dir.path());
  expect_error_containing([&] { load_model(dir.path()); },
                          {"asks for Full AttnRes", "no AttnRes tensors"});
}

TEST(ModelFiles, UnexpectedTensorIsNamed) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    tensors.push_back({"model.layers.7.extra", {1}, {0.f}});
  });
  expect_error_containing([&] { load_model(dir.path()); },
                          {"unexpected tensor 'model.layers.7.extra'"});
}

// The names and shapes are checked from the header before any tensor data is read: a stray tensor
// is refused even when the data holds a value the data check would refuse.
TEST(ModelFiles, AStrayTensorIsRefusedBeforeTheDataIsRead) {
  test::TempDir dir;
  save_model(random_model(tiny_config(), {}), dir.path());
  edit_weights(dir.path(), [](auto& tensors) {
    tensors.front().data.front() = std::numeric_limits<float>::quiet_NaN();
    tensors.push_back({"zz.stray", {1}, {0.f}});
  });
  const std::string message = test::error_message([&] { load_model(dir.path()); });
  EXPECT_NE(message.find("unexpected tensor 'zz.stray'"), std::string::npos) << message;
  EXPECT_EQ(message.find("non-finite"), std::string::npos) << message;
}

TEST(ModelFiles, MissingOrCorruptFilesAreNamed) {
  test::TempDir dir;
  expect_error_containing([&] { load_model(dir / "nope"); }, {"nope", "does not exist"});
  save_model(random_model(tiny_config(), {}), dir.path());
  const std::string bytes = read_file(dir / "model.safetensors");
  write_file_atomically(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_error_containing([&] { load_model(dir.path()); },
                          {"model.safetensors", "runs past the end"});
  std::filesystem::remove(dir / "config.json");
  expect_error_containing([&] { load_model(dir.path()); }, {"config.json", "no such file"});
}

}  // namespace test_model_io
}  // namespace attnres
