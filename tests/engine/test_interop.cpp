// Hugging Face checkpoints in the Kimi K3 layout (docs/interop.md) against the independent NumPy
// reference (tests/interop/k3_reference.py, written from the layout's description, float64): the
// reference forward matches its logits and read weights within test::kReorderedBound<double>, the
// fast engine in f32 within kF32Network, both relative to the magnitude compared;
// sharded and single files load the same tensors; BF16/F16 convert exactly (export -> import
// gives the stored bytes back); deviations and broken indexes are refused with located errors.
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>
#include <random>

#include "attnres/atomic_file.hpp"
#include "attnres/backward.hpp"
#include "attnres/checkpoint_files.hpp"
#include "attnres/engine.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/routing_stats.hpp"
#include "attnres/safetensors.hpp"
#include "model_support.hpp"
#include "test_support.hpp"

namespace attnres {
namespace test_interop {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = ATTNRES_INTEROP_FIXTURES;

// Our f64 forward against NumPy's float64 on the same weights: the same arithmetic in another
// order and another library's exp, sqrt and sums.
constexpr double kF64 = test::kReorderedBound<double>;
// The fast engine's f32 pass against float64 (the weights are f32, f16 or bf16: exact in f32):
// f32 rounding through the network, 168 u of f32 (the old 1e-5, on logits of magnitude 2.5 to 10).
constexpr double kF32Network = test::roundoffs<float>(168);
const std::vector<std::string> kCases = {"k3_llama_f32", "k3_llama_b1_f16", "k3_qwen3_bf16",
                                         "k3_qwen3_bf16_sharded", "llama_standard_bf16"};

json read_json(const fs::path& path) {
  return json::parse(read_file(path));
}

std::vector<int> case_tokens(const std::string& name) {
  return read_json(kFixtures / name / "case.json")["tokens"].get<std::vector<int>>();
}

Eigen::MatrixXd expected(const std::string& name, const std::string& tensor) {
  const SafetensorsFile file = SafetensorsFile::read(kFixtures / name / "expected.safetensors");
  const TensorInfo* info = file.find(tensor);
  if (!info) throw std::runtime_error(name + ": no expected tensor " + tensor);
  const auto values = file.values(*info);
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), info->shape[0], info->shape.size() > 1 ? info->shape[1] : 1);
}

// Copies a fixture's folder (to edit it).
fs::path copy_case(const std::string& name, const fs::path& into) {
  const fs::path out = into / name;
  fs::create_directories(out);
  for (const auto& entry : fs::directory_iterator(kFixtures / name))
    fs::copy_file(entry.path(), out / entry.path().filename());
  return out;
}

// Rewrites a safetensors file without the tensors `drop` names (raw bytes kept).
void drop_tensors(const fs::path& path, const std::set<std::string>& drop) {
  const SafetensorsFile file = SafetensorsFile::read(path);
  std::vector<RawTensor> kept;
  for (const auto& tensor : file.tensors()) {
    if (drop.count(tensor.name)) continue;
    kept.push_back({tensor.name, tensor.dtype, tensor.shape, std::string(file.raw_bytes(tensor))});
  }
  write_file_atomically(path, serialize_safetensors(kept, {{"format", "pt"}}));
}

void edit_config(const fs::path& dir, const std::function<void(json&)>& edit) {
  json config = read_json(dir / "config.json");
  edit(config);
  write_file_atomically(dir / "config.json", config.dump(2));
}

class K3Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(K3Fixture, ReferenceForwardMatchesNumPy) {
  const std::string name = GetParam();
  CheckpointReport report;
  const auto model = load_model_as<double>(kFixtures / name, {}, &report);
  EXPECT_EQ(report.layout, CheckpointLayout::k3);
  EXPECT_EQ(report.sharded, name.ends_with("_sharded"));
  const auto tokens = case_tokens(name);
  const auto result = forward(model, tokens);
  test::expect_tensor_near(name + " logits", result.logits, expected(name, "logits"), kF64);
  test::expect_tensor_near(name + " hidden_final", result.hidden_final,
                           expected(name, "hidden_final"), kF64);
  if (model.config.attn_res.mode == ResidualMode::standard) {
    EXPECT_TRUE(result.trace.reads.empty());
    return;
  }
  ASSERT_EQ(result.trace.reads.size(), static_cast<std::size_t>(model.config.sublayers() + 1));
  for (int r = 0; r <= model.config.sublayers(); ++r) {
    test::expect_tensor_near(name + " alpha." + std::to_string(r),
                             result.trace.reads[static_cast<std::size_t>(r)].alpha,
                             expected(name, "alpha." + std::to_string(r)), kF64);
  }
}

TEST_P(K3Fixture, FastEngineInFloat32MatchesNumPy) {
  const std::string name = GetParam();
  const auto model = load_model_as<float>(kFixtures / name);
  const auto result = engine_forward(model, case_tokens(name), ForwardOptions{}, EngineOptions{});
  test::expect_tensor_near(name + " logits (fast, f32)", result.logits, expected(name, "logits"),
                           kF32Network);
}

// Export in the K3 layout at the stored dtype and load again: every tensor's bytes are the
// fixture's, the config says the same, and the loaded weights are identical.
TEST_P(K3Fixture, ExportThenImportIsExact) {
  const std::string name = GetParam();
  test::TempDir dir;
  CheckpointReport report;
  const auto model = load_model_as<float>(kFixtures / name, {}, &report);
  ASSERT_EQ(report.dtypes.size(), 1u);
  HfExportOptions options;
  options.dtype = parse_enum(kTensorDTypeNames, report.dtypes.begin()->first, "dtype", "dtype");
  if (name.ends_with("_sharded")) options.max_shard_bytes = 16000;
  const auto written = save_hf_model(model, dir.path(), options);
  EXPECT_EQ(std::count(written.begin(), written.end(), std::string(kCheckpointIndexFile)),
            name.ends_with("_sharded") ? 1 : 0);
  EXPECT_EQ(read_json(dir / "config.json"), read_json(kFixtures / name / "config.json"));
  test::expect_same_tensors(kFixtures / name, dir.path());
  const auto again = load_model_as<float>(dir.path());
  EXPECT_EQ(again.embed_tokens, model.embed_tokens);
  EXPECT_EQ(again.final_res.query, model.final_res.query);
  EXPECT_EQ(again.layers.back().mlp_res.key_norm_gain, model.layers.back().mlp_res.key_norm_gain);
}

// The routing statistics of attnres inspect against the reference's own (stats.json).
TEST_P(K3Fixture, RoutingStatisticsMatchNumPy) {
  const std::string name = GetParam();
  const auto model = load_model_as<double>(kFixtures / name);
  const auto stats = routing_statistics(forward(model, case_tokens(name)).trace);
  if (!fs::exists(kFixtures / name / "stats.json")) {
    EXPECT_TRUE(stats.empty());  // the standard residual has no reads
    return;
  }
  const json expected_stats = read_json(kFixtures / name / "stats.json")["reads"];
  ASSERT_EQ(stats.size(), expected_stats.size());
  // Means over the tokens of the weights (and of sum -alpha log alpha, a sum of non-negative
  // terms), computed in another order by NumPy from its own float64 weights: relative to each
  // statistic's value (all between 0.08 and 2.7; stats.json holds Python's exact repr).
  const auto near = [&](double actual, const json& value, const std::string& what) {
    return test::near_relative(actual, value.get<double>(), kF64, 0.0, what);
  };
  for (std::size_t r = 0; r < stats.size(); ++r) {
    const json& e = expected_stats[r];
    const std::string tag = name + " read " + std::to_string(r);
    EXPECT_EQ(static_cast<int>(stats[r].sources.size()), e["n_sources"].get<int>()) << tag;
    if (e["normalised_entropy"].is_null()) {
      EXPECT_TRUE(std::isnan(stats[r].normalised_entropy)) << tag;
    } else {
      EXPECT_TRUE(near(stats[r].normalised_entropy, e["normalised_entropy"], tag + " entropy"));
    }
    EXPECT_TRUE(near(stats[r].effective_sources, e["effective_sources"], tag + " effective"));
    EXPECT_TRUE(near(stats[r].top1_mass, e["top1_mass"], tag + " top-1 mass"));
    EXPECT_TRUE(near(stats[r].embedding_weight, e["embedding_weight"], tag + " embedding"));
    EXPECT_TRUE(near(stats[r].recent_weight, e["recent_weight"], tag + " recent"));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, K3Fixture, ::testing::ValuesIn(kCases));

TEST(K3Checkpoint, QueryCosinesAreCosines) {
  Eigen::MatrixXd q(3, 2);
  q << 1, 0, 1, 1, 0, 0;
  const Eigen::MatrixXd c = row_cosines(q);
  // A 2-term dot product over a product of two norms (2-term sums and square roots): about six
  // roundings, each 1 u of the cosine; 8 u.
  EXPECT_TRUE(test::near_relative(c(0, 0), 1.0, test::roundoffs<double>(8), 0.0, "cos(q0, q0)"));
  EXPECT_TRUE(test::near_relative(c(0, 1), 1.0 / std::sqrt(2.0), test::roundoffs<double>(8), 0.0,
                                  "cos(q0, q1)"));
  EXPECT_TRUE(std::isnan(c(0, 2)));
  const auto model = load_model_as<double>(kFixtures / "k3_llama_f32");
  const Eigen::MatrixXd queries = effective_queries(model);
  // K3's score vector is norm.weight ⊙ proj.weight (docs/interop.md): read 0's from the file.
  const SafetensorsFile file =
      SafetensorsFile::read(kFixtures / "k3_llama_f32" / "model.safetensors");
  const auto norm = file.values(*file.find("model.layers.0.self_attention_res_norm.weight"));
  const auto proj = file.values(*file.find("model.layers.0.self_attention_res_proj.weight"));
  // One product of the same two values, rounded once on each side: within 4 ulps (the same bits
  // in practice).
  for (std::size_t j = 0; j < norm.size(); ++j)
    EXPECT_DOUBLE_EQ(queries(0, static_cast<Eigen::Index>(j)), norm[j] * proj[j]);
}

TEST(K3Checkpoint, ShardedAndSingleFileLoadTheSameTensors) {
  const auto single = load_model_as<double>(kFixtures / "k3_qwen3_bf16");
  const auto sharded = load_model_as<double>(kFixtures / "k3_qwen3_bf16_sharded");
  std::map<std::string, std::vector<double>> values;
  for_each_tensor(single, [&](const TensorView& t) {
    values[t.name].assign(t.data, t.data + t.element_count());
  });
  std::size_t compared = 0;
  for_each_tensor(sharded, [&](const TensorView& t) {
    EXPECT_EQ(values.at(t.name), std::vector<double>(t.data, t.data + t.element_count())) << t.name;
    ++compared;
  });
  EXPECT_EQ(compared, values.size());
  EXPECT_GT(compared, 40u);  // q/k norms and every AttnRes tensor included
}

TEST(K3Checkpoint, Bfloat16AndHalfConvertExactlyBothWays) {
  // Every BF16 / F16 bit pattern that is finite converts to float and back to the same bits.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    if ((b & 0x7f80u) != 0x7f80u) ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(b)), b) << bits;
    if ((b & 0x7c00u) != 0x7c00u) ASSERT_EQ(float_to_half(half_to_float(b)), b) << bits;
  }
  // Rounding to nearest, ties to even.
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80u);             // tie, down to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82u);         // tie, up to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81u);  // above the tie
  EXPECT_EQ(float_to_half(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00u);  // rounds to infinity
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001u);  // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000u);  // tie to even (zero)
  // Against Eigen's own conversions (an independent implementation, round to nearest even) on
  // a million random finite floats of every magnitude.
  std::mt19937 bits(12345);
  for (int i = 0; i < 1000000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(bits()));
    if (!std::isfinite(x)) continue;
    ASSERT_EQ(float_to_bfloat16(x), Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(x)))
        << x;
    ASSERT_EQ(float_to_half(x), Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(x))) << x;
  }
  EXPECT_NE(test::error_message([] {
              const float big = 70000.0f;
              encode_floats(&big, 1, TensorDType::f16, "t");
            }).find("overflows F16"),
            std::string::npos);
}

// A lab model exported to K3 and loaded back: the same forward at bf16-rounded weights, and a
// second export is byte-identical.
TEST(K3Checkpoint, LabModelRoundTripsThroughTheK3Layout) {
  ModelConfig config = test::model_config(3, 16, 4, 2, 24, 40);
  config.attn_res.mode = ResidualMode::block;
  config.attn_res.block_size = 4;
  const auto model = random_model(config, {7, 0.2, 0.5});
  test::TempDir dir;
  save_hf_model(model, dir / "a", {TensorDType::f32, 0});
  CheckpointReport report;
  const auto loaded = load_model_as<double>(dir / "a", {}, &report);
  EXPECT_EQ(report.layout, CheckpointLayout::k3);
  EXPECT_EQ(read_json(dir / "a" / "config.json")["attn_res_block_size"], 2);
  const std::vector<int> tokens = {1, 5, 9, 3, 2};
  // 0: the same bits (the same weights, the same arithmetic).
  test::expect_tensor_near("logits", forward(loaded, tokens).logits, forward(model, tokens).logits,
                           0.0);
  save_hf_model(loaded, dir / "b", {TensorDType::f32, 0});
  EXPECT_EQ(read_file(dir / "a" / "model.safetensors"), read_file(dir / "b" / "model.safetensors"));
  // What the K3 layout cannot hold is refused before anything is written.
  ModelConfig full = config;
  full.attn_res.block_size = 0;
  full.attn_res.mode = ResidualMode::full;
  EXPECT_NE(test::error_message([&] {
              save_hf_model(random_model(full, {}), dir / "c", {});
            }).find("Full"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "c"));
  ModelConfig odd = config;
  odd.attn_res.block_size = 3;
  EXPECT_NE(test::error_message([&] {
              save_hf_model(random_model(odd, {}), dir / "d", {});
            }).find("S = 3"),
            std::string::npos);
}

TEST(K3Checkpoint, DeviationsAreRefusedOrNoted) {
  test::TempDir dir;
  {  // no final read: every layer's AttnRes tensors but not the output read's
    const fs::path d = copy_case("k3_llama_f32", dir / "no_final");
    drop_tensors(d / "model.safetensors",
                 {"model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight"});
    EXPECT_NE(test::error_message([&] { load_model(d); }).find("no final read"), std::string::npos);
  }
  const std::vector<std::pair<std::pair<std::string, json>, std::string>> refused = {
      {{"attn_res_block_reduce", "mean"}, "averaged"},
      {{"attn_res_embed_in_first_block", true}, "embedding folded"},
      {{"attn_res_final_read", false}, "no final read"},
      {{"attn_res_gate", "sigmoid"}, "unknown AttnRes key 'attn_res_gate'"},
      {{"attention_bias", true}, "attention_bias"},
      {{"rope_scaling", {{"type", "yarn"}}}, "RoPE scaling"},
      {{"model_type", "qwen2"}, "model_type \"qwen2\""},
      {{"attn_res", {{"mode", "block"}}}, "one layout"}};
  int k = 0;
  for (const auto& [edit, message] : refused) {
    const fs::path d = copy_case("k3_llama_f32", dir / ("case" + std::to_string(k++)));
    edit_config(d, [&, &e = edit](json& c) { c[e.first] = e.second; });
    const std::string error = test::error_message([&] { load_model(d); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_NE(error.find("config.json"), std::string::npos) << error;
  }
  {  // detached block summaries: the forward is the paper's; loaded with a note, no gradients
    const fs::path d = copy_case("k3_llama_f32", dir / "detached");
    edit_config(d, [](json& c) { c["attn_res_detach_blocks"] = true; });
    CheckpointReport report;
    const auto model = load_model_as<double>(d, {}, &report);
    ASSERT_EQ(report.notes.size(), 1u);
    EXPECT_NE(report.notes[0].find("detached"), std::string::npos);
    test::expect_tensor_near("logits", forward(model, case_tokens("k3_llama_f32")).logits,
                             expected("k3_llama_f32", "logits"), kF64);
    EXPECT_NE(test::error_message([&] {
                loss_and_gradients(model, {{1, 2, 3}});
              }).find("attn_res_detach_blocks"),
              std::string::npos);
  }
  {  // the standard residual declared, AttnRes tensors present
    const fs::path d = copy_case("k3_llama_f32", dir / "null");
    edit_config(d, [](json& c) { c["attn_res_block_size"] = nullptr; });
    EXPECT_NE(test::error_message([&] { load_model(d); }).find("null"), std::string::npos);
  }
  {  // Megatron-LM names are recognised and pointed to docs/interop.md
    const fs::path d = copy_case("llama_standard_bf16", dir / "megatron");
    const SafetensorsFile file = SafetensorsFile::read(d / "model.safetensors");
    std::vector<RawTensor> tensors;
    for (const auto& t : file.tensors())
      tensors.push_back({t.name, t.dtype, t.shape, std::string(file.raw_bytes(t))});
    tensors.push_back(
        {"decoder.layers.0.pseudo_query", TensorDType::f32, {16}, std::string(64, 0)});
    write_file_atomically(d / "model.safetensors", serialize_safetensors(tensors, {}));
    const std::string error = test::error_message([&] { load_model(d); });
    EXPECT_NE(error.find("Megatron-LM"), std::string::npos) << error;
  }
}

TEST(K3Checkpoint, QwenQkNormsRunForwardOnly) {
  const auto model = load_model_as<double>(kFixtures / "k3_qwen3_bf16");
  EXPECT_TRUE(model.config.qk_norm);
  EXPECT_EQ(model.config.head_dim(), 8);
  EXPECT_TRUE(model.config.tie_word_embeddings);
  EXPECT_EQ(model.lm_head, model.embed_tokens);
  EXPECT_NE(test::error_message([&] {
              loss_and_gradients(model, {{1, 2, 3}});
            }).find("q/k norms"),
            std::string::npos);
}

TEST(K3Checkpoint, BrokenIndexFilesGiveLocatedErrors) {
  test::TempDir dir;
  const std::string index = kCheckpointIndexFile;
  auto sharded = [&](const std::string& tag, const std::function<void(const fs::path&)>& edit) {
    const fs::path d = copy_case("k3_qwen3_bf16_sharded", dir / tag);
    edit(d);
    return test::error_message([&] { load_model(d); });
  };
  std::string error = sharded("truncated", [&](const fs::path& d) {
    const std::string text = read_file(d / index);
    write_file_atomically(d / index, text.substr(0, text.size() / 2));
  });
  EXPECT_NE(error.find(index + ":"), std::string::npos) << error;
  EXPECT_NE(error.find("not valid JSON"), std::string::npos) << error;
  // line:column of the cut (the file's last line)
  const std::string text = read_file(kFixtures / "k3_qwen3_bf16_sharded" / index);
  const auto lines = std::count(text.begin(), text.begin() + text.size() / 2, '\n') + 1;
  EXPECT_NE(error.find(index + ":" + std::to_string(lines) + ":"), std::string::npos) << error;

  error = sharded("missing_shard",
                  [&](const fs::path& d) { fs::remove(d / "model-00002-of-00003.safetensors"); });
  EXPECT_NE(error.find("model-00002-of-00003.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("does not exist"), std::string::npos) << error;

  error = sharded("moved", [&](const fs::path& d) {
    json j = read_json(d / index);
    j["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
    if (j["weight_map"]["model.norm.weight"] ==
        read_json(kFixtures / "k3_qwen3_bf16_sharded" / index)["weight_map"]["model.norm.weight"])
      j["weight_map"]["model.norm.weight"] = "model-00002-of-00003.safetensors";
    write_file_atomically(d / index, j.dump(2));
  });
  EXPECT_NE(error.find("model.norm.weight"), std::string::npos) << error;
  EXPECT_NE(error.find(index + ":"), std::string::npos) << error;

  error = sharded("unlisted", [&](const fs::path& d) {
    json j = read_json(d / index);
    j["weight_map"].erase("model.norm.weight");
    j["metadata"].erase("total_size");
    write_file_atomically(d / index, j.dump(2));
  });
  EXPECT_NE(error.find("does not list"), std::string::npos) << error;

  error = sharded("total", [&](const fs::path& d) {
    json j = read_json(d / index);
    j["metadata"]["total_size"] = 12;
    write_file_atomically(d / index, j.dump(2));
  });
  EXPECT_NE(error.find("total_size"), std::string::npos) << error;

  error = sharded("outside", [&](const fs::path& d) {
    json j = read_json(d / index);
    j["weight_map"]["model.norm.weight"] = "../model-00001-of-00003.safetensors";
    write_file_atomically(d / index, j.dump(2));
  });
  EXPECT_NE(error.find("expected a file name inside"), std::string::npos) << error;

  error = sharded("both", [&](const fs::path& d) {
    fs::copy_file(kFixtures / "k3_qwen3_bf16" / "model.safetensors", d / "model.safetensors");
  });
  EXPECT_NE(error.find("both"), std::string::npos) << error;
}

}  // namespace test_interop
}  // namespace attnres
