// The scheme flags of init-model, forward and train (docs/schemes.md): models with any scheme
// are written, read, converted and trained from the command line; bad settings name the flag.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "cli/cli_support.hpp"
#include "model_support.hpp"
#include "test_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_schemes_cli {

namespace fs = std::filesystem;
using test::run_cli;

std::vector<std::string> init_args(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> args = {"init-model", "--layers",  "2",     "--d-model",    "16",
                                   "--heads",    "4",         "--ffn", "24",           "--vocab",
                                   "20",         "--seed",    "3",     "--weight-std", "0.3",
                                   "--out",      out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

Eigen::MatrixXd dumped(const fs::path& file, const std::string& name) {
  const auto st = SafetensorsFile::read(file);
  const TensorInfo* info = st.find(name);
  if (!info) throw std::runtime_error("no " + name);
  const auto values = st.values(*info);
  return Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), info->shape[0], static_cast<Eigen::Index>(values.size()) / info->shape[0]);
}

TEST(SchemesCli, InitModelWritesTheSchemeAndForwardReadsIt) {
  test::TempDir dir;
  const auto made =
      run_cli(init_args(dir / "mhc", {"--mode", "mhc", "--streams", "2", "--static-mhc"}));
  ASSERT_EQ(made.status, 0) << made.err;
  EXPECT_NE(made.out.find("static mHC (m = 2)"), std::string::npos) << made.out;
  const auto config = nlohmann::json::parse(read_file(dir / "mhc/config.json"));
  EXPECT_EQ(config["attn_res"]["mode"], "mhc");
  EXPECT_EQ(config["attn_res"]["streams"], 2);
  EXPECT_EQ(config["attn_res"]["dynamic"], false);
  const auto run = run_cli({"forward", "--model", (dir / "mhc").string(), "--tokens", "1 2 3"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("static mHC, m = 2 streams"), std::string::npos) << run.out;
}

TEST(SchemesCli, ForwardConvertsTheSameWeightsToAnotherScheme) {
  test::TempDir dir;
  ASSERT_EQ(run_cli(init_args(dir / "full", {"--mode", "full"})).status, 0);
  auto forward = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "forward",  "--model",   (dir / "full").string(),
        "--tokens", "4 8 15 16", "--precision",
        "f64",      "--dump",    (dir / (name + ".safetensors")).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  // DenseFormer starts with unit weights: the standard residual's logits, from the same weights.
  ASSERT_EQ(forward("standard", {"--mode", "standard"}).status, 0);
  const auto dense = forward("dense", {"--mode", "denseformer"});
  ASSERT_EQ(dense.status, 0) << dense.err;
  EXPECT_NE(dense.out.find("DenseFormer"), std::string::npos);
  // The same sums in another order: the reordering bound, relative to the logits' magnitude.
  const Eigen::MatrixXd standard_logits = dumped(dir / "standard.safetensors", "logits");
  EXPECT_LE((dumped(dir / "dense.safetensors", "logits") - standard_logits).cwiseAbs().maxCoeff(),
            test::kReorderedBound<double> * standard_logits.cwiseAbs().maxCoeff());
  // A sigmoid gate with zero queries gives every source the weight 1/2; its reads merge two-phase
  // statistics (sums without a max).
  const auto sigmoid = forward("sigmoid", {"--gate", "sigmoid"});
  ASSERT_EQ(sigmoid.status, 0) << sigmoid.err;
  EXPECT_NE(sigmoid.out.find("two-phase reads"), std::string::npos) << sigmoid.out;
  // sigmoid(0) = 1 / (1 + exp(0)) = 0.5 to a rounding or two (isApprox is relative); 2 u.
  EXPECT_TRUE(dumped(dir / "sigmoid.safetensors", "alpha.3")
                  .isApproxToConstant(0.5, test::roundoffs<double>(2)));
  // Multi-head reads dump every head: alpha.<r> is (T, H, sources).
  ASSERT_EQ(forward("heads", {"--depth-heads", "4"}).status, 0);
  const auto heads = SafetensorsFile::read(dir / "heads.safetensors");
  EXPECT_EQ(heads.find("alpha.2")->shape, (std::vector<std::int64_t>{4, 4, 3}));
  // An input-dependent query says why it cannot use the two-phase schedule.
  const auto input = forward("input", {"--query-source", "input"});
  ASSERT_EQ(input.status, 0) << input.err;
  EXPECT_NE(
      input.out.find(
          "one-shot reads (an input-dependent query needs each read's latest source, which phase 1 "
          "does not have)"),
      std::string::npos)
      << input.out;
}

TEST(SchemesCli, BadSettingsNameTheFlagAndWriteNothing) {
  test::TempDir dir;
  auto refused = [&](std::vector<std::string> extra, const std::string& expected) {
    const auto run = run_cli(init_args(dir / "bad", extra));
    EXPECT_EQ(run.status, 2) << run.out;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir / "bad"));
  };
  refused({"--mode", "block", "--block-size", "2", "--window", "4"},
          "--window applies to Full AttnRes (mode full) only, not to mode block");
  refused({"--mode", "full", "--depth-heads", "3"},
          "--depth-heads (3) must be a positive divisor of --d-model (16)");
  refused({"--mode", "mhc", "--streams", "0"}, "--streams must be at least 1");
  refused({"--mode", "full", "--gate", "relu"}, "--gate: unknown gate 'relu'");
  refused({"--mode", "denseformer", "--gate", "sigmoid"},
          "--gate applies to Full and Block AttnRes only");
}

TEST(SchemesCli, TrainBuildsAModelWithTheSchemeAndLearns) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  const auto run = run_cli(test::tiny_train_args(dir / "data.txt", dir / "run", 6, 2,
                                                 {"--mode", "full", "--gate", "sigmoid_normalized",
                                                  "--depth-heads", "2", "--eval-every", "3"}));
  ASSERT_EQ(run.status, 0) << run.err;
  const auto config = nlohmann::json::parse(read_file(dir / "run/config.json"));
  EXPECT_EQ(config["attn_res"]["gate"], "sigmoid_normalized");
  EXPECT_EQ(config["attn_res"]["heads"], 2);
  const auto json = nlohmann::json::parse(run.out.substr(run.out.rfind("\n{")));
  EXPECT_LT(json["final_val_loss"].get<double>(), json["initial_val_loss"].get<double>());
  // A model made by init-model with a scheme trains with its own scheme.
  ASSERT_EQ(run_cli({"init-model", "--layers", "1", "--d-model", "16", "--heads", "2", "--ffn",
                     "24", "--vocab", "256", "--mode", "mhc", "--streams", "2", "--out",
                     (dir / "mhc").string()})
                .status,
            0);
  const auto own = run_cli({"train", "--model", (dir / "mhc").string(), "--data",
                            (dir / "data.txt").string(), "--steps", "2", "--seq", "16", "--batch",
                            "2", "--threads", "1", "--out", (dir / "mhc_run").string()});
  ASSERT_EQ(own.status, 0) << own.err;
  EXPECT_EQ(nlohmann::json::parse(read_file(dir / "mhc_run/config.json"))["attn_res"]["mode"],
            "mhc");
  // A loaded model cannot change its scheme in train (it would silently drop or add tensors).
  const auto refused = run_cli({"train", "--model", (dir / "run").string(), "--mode", "mhc",
                                "--data", (dir / "data.txt").string(), "--steps", "2", "--seq",
                                "16", "--batch", "2", "--out", (dir / "again").string()});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("build a new model"), std::string::npos) << refused.err;
}

}  // namespace test_schemes_cli
}  // namespace attnres
