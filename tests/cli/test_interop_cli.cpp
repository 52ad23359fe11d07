// attnres inspect and export on Hugging Face checkpoints in the Kimi K3 layout made outside the lab
// (tests/interop/fixtures, by the NumPy reference of docs/interop.md): the routing statistics the
// CLI prints are the reference's, export -> inspect round-trips, init-model writes the K3 layout,
// and bad flags are refused by name before any work.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/checkpoint_files.hpp"
#include "cli/cli_support.hpp"
#include "model_support.hpp"
#include "test_support.hpp"

namespace attnres {
namespace test_interop_cli {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

const fs::path kFixtures = ATTNRES_INTEROP_FIXTURES;

std::string tokens_of(const std::string& name) {
  const json c = json::parse(read_file(kFixtures / name / "case.json"));
  std::string text;
  for (const auto& t : c["tokens"]) {
    if (!text.empty()) text.append(" ");
    text.append(std::to_string(t.get<int>()));
  }
  return text;
}

TEST(InteropCli, InspectPrintsTheReferencesRoutingStatistics) {
  const std::string name = "k3_qwen3_bf16_sharded";
  const auto run = run_cli({"inspect", (kFixtures / name).string(), "--tokens", tokens_of(name),
                            "--precision", "f64", "--format", "json"});
  ASSERT_EQ(run.status, 0) << run.err;
  const json doc = json::parse(run.out);
  EXPECT_EQ(doc["checkpoint"]["layout"], "k3");
  EXPECT_EQ(doc["checkpoint"]["sharded"], true);
  EXPECT_EQ(doc["checkpoint"]["files"].size(), 3u);
  EXPECT_EQ(doc["architecture"]["qk_norm"], true);
  EXPECT_EQ(doc["attn_res"]["block_size_layers"], 2);
  EXPECT_EQ(doc["attn_res"]["blocks"], 2);
  const json expected = json::parse(read_file(kFixtures / name / "stats.json"))["reads"];
  const json& reads = doc["routing"]["reads"];
  ASSERT_EQ(reads.size(), expected.size());
  // Our f64 against NumPy's float64 on the same bf16 weights: the same arithmetic in another
  // order, the reordering bound relative to 1, the scale of depth weights (effective_sources >= 1
  // is held to its own magnitude).
  for (std::size_t r = 0; r < reads.size(); ++r) {
    for (const char* key : {"effective_sources", "top1_mass", "embedding_weight", "recent_weight"})
      EXPECT_TRUE(test::near_relative(reads[r][key].get<double>(), expected[r][key].get<double>(),
                                      test::kReorderedBound<double>, 1.0, key))
          << r << key;
    EXPECT_EQ(reads[r]["normalised_entropy"].is_null(),
              expected[r]["normalised_entropy"].is_null());
    EXPECT_EQ(doc["attn_res"]["sources_per_read"][r], expected[r]["n_sources"]);
  }
  // The table names the layout and has a row per read; without a text it says how to get one.
  const auto table = run_cli({"inspect", (kFixtures / name).string()});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("Kimi K3 Hugging Face layout"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("sublayer 8 (mlp, layer 3)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("--text FILE"), std::string::npos) << table.out;
}

TEST(InteropCli, InspectWritesHeatmapsAndCharts) {
  test::TempDir dir;
  const fs::path text = dir / "text.txt";
  write_file_atomically(text, "Attention residuals read the depth.");
  const auto run = run_cli({"inspect", (kFixtures / "k3_llama_f32").string(), "--text",
                            text.string(), "--out", (dir / "out").string()});
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* stem :
       {"query_cosines", "depth_attention", "duality_mixing", "routing_by_read"}) {
    for (const char* ext : {".png", ".svg", ".csv"}) {
      EXPECT_TRUE(fs::exists(dir / "out" / (std::string(stem) + ext))) << stem << ext;
    }
  }
  test::expect_non_blank_png(dir / "out" / "query_cosines.png");
  EXPECT_TRUE(fs::exists(dir / "out" / "inspect.json"));
}

TEST(InteropCli, ExportRoundTripsAndShards) {
  test::TempDir dir;
  const std::string source = (kFixtures / "k3_qwen3_bf16").string();
  auto run = run_cli(
      {"export", "--model", source, "--out", (dir / "a").string(), "--max-shard-size", "0.015"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("as BF16, attn_res_block_size 2"), std::string::npos) << run.out;
  EXPECT_TRUE(fs::exists(dir / "a" / kCheckpointIndexFile));
  // Back to one file: every tensor's bytes are the original's.
  run = run_cli({"export", "--model", (dir / "a").string(), "--out", (dir / "b").string()});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_FALSE(fs::exists(dir / "b" / kCheckpointIndexFile));
  test::expect_same_tensors(dir / "b", kFixtures / "k3_qwen3_bf16");
  // To the lab's layout (F32) and back to K3 BF16: still the same bytes.
  run = run_cli({"export", "--model", source, "--out", (dir / "lab").string(), "--format", "lab"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(json::parse(read_file(dir / "lab" / "config.json")).contains("attn_res"));
  run = run_cli({"export", "--model", (dir / "lab").string(), "--out", (dir / "c").string(),
                 "--dtype", "bf16"});
  ASSERT_EQ(run.status, 0) << run.err;
  test::expect_same_tensors(dir / "c", kFixtures / "k3_qwen3_bf16");
  EXPECT_EQ(json::parse(read_file(dir / "c" / "config.json")),
            json::parse(read_file(kFixtures / "k3_qwen3_bf16" / "config.json")));
}

TEST(InteropCli, InitModelWritesTheK3Layout) {
  test::TempDir dir;
  const auto made = run_cli({"init-model",
                             "--layers",
                             "2",
                             "--d-model",
                             "16",
                             "--heads",
                             "4",
                             "--kv-heads",
                             "2",
                             "--head-dim",
                             "8",
                             "--qk-norm",
                             "--tie-embeddings",
                             "--ffn",
                             "24",
                             "--vocab",
                             "64",
                             "--mode",
                             "block",
                             "--block-size",
                             "2",
                             "--query-std",
                             "0.5",
                             "--format",
                             "hf",
                             "--out",
                             (dir / "m").string()});
  ASSERT_EQ(made.status, 0) << made.err;
  const json config = json::parse(read_file(dir / "m" / "config.json"));
  EXPECT_EQ(config["model_type"], "qwen3");
  EXPECT_EQ(config["head_dim"], 8);
  EXPECT_EQ(config["attn_res_block_size"], 1);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  const auto run =
      run_cli({"inspect", (dir / "m").string(), "--tokens", "1 2 3", "--format", "json"});
  ASSERT_EQ(run.status, 0) << run.err;
  const json dtypes = json::parse(run.out)["checkpoint"]["dtypes"];
  ASSERT_EQ(dtypes.size(), 1u);
  EXPECT_EQ(dtypes[0]["dtype"], "BF16");
  EXPECT_GT(dtypes[0]["tensors"].get<int>(), 20);
}

TEST(InteropCli, BadFlagsAreRefusedByName) {
  test::TempDir dir;
  const std::string model = (kFixtures / "k3_llama_f32").string();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"export", "--model", model, "--out", (dir / "x").string(), "--format", "lab", "--dtype",
        "bf16"},
       "--dtype applies to --format hf"},
      {{"export", "--model", model, "--out", (dir / "x").string(), "--dtype", "fp8"},
       "--dtype must be bf16, f16 or f32"},
      {{"export", "--model", model, "--out", (dir / "x").string(), "--max-shard-size", "0"},
       "--max-shard-size must be a positive"},
      {{"inspect", model, "--max-tokens", "5"}, "--max-tokens applies to --text"},
      {{"inspect", model, "--tokens", "1", "--text", "README.md"}, "not both"},
      {{"inspect", model, "--precision", "f64"}, "--precision sets the forward pass"},
      {{"inspect", model, "--tokens", "1 999"}, "999"},
      {{"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--ffn", "24", "--vocab",
        "20", "--mode", "full", "--format", "hf", "--out", (dir / "x").string()},
       "Full AttnRes"},
  };
  for (const auto& c : cases) {
    const auto run = run_cli(c.args);
    EXPECT_EQ(run.status, 2) << c.args[0] << " " << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir / "x"));
  }
}

}  // namespace test_interop_cli
}  // namespace attnres
