// End-to-end tests of the attnres CLI: in-process through cli::run for most cases, and through
// the real binary for exit codes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "cli.hpp"
#include "cli_support.hpp"
#include "model_support.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_cli {

using test::CliRun;
using test::run_cli;

// init-model for a 2-layer (L = 4) model; returns the directory.
std::string make_model(const test::TempDir& dir, const std::vector<std::string>& extra = {}) {
  const std::string path = (dir / "model").string();
  std::vector<std::string> args = {"init-model",  "--layers", "2",          "--d-model", "16",
                                   "--heads",     "4",        "--kv-heads", "2",         "--ffn",
                                   "24",          "--vocab",  "20",         "--seed",    "3",
                                   "--query-std", "0.5",      "--out",      path};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliRun run = run_cli(args);
  EXPECT_EQ(run.status, 0) << run.err;
  return path;
}

TEST(Cli, HelpListsCommandsAndEachCommandHasHelp) {
  const CliRun help = run_cli({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("init-model"), std::string::npos);
  EXPECT_NE(help.out.find("forward"), std::string::npos);
  const CliRun forward_help = run_cli({"forward", "--help"});
  EXPECT_EQ(forward_help.status, 0);
  EXPECT_NE(forward_help.out.find("--two-phase"), std::string::npos);
  EXPECT_NE(run_cli({"init-model", "--help"}).out.find("--query-std"), std::string::npos);
}

TEST(Cli, UnknownCommandAndUnknownFlagAreUsageErrors) {
  const CliRun command = run_cli({"frobnicate"});
  EXPECT_EQ(command.status, cli::kExitUsage);
  EXPECT_NE(command.err.find("unknown command 'frobnicate'"), std::string::npos);
  const CliRun flag = run_cli({"forward", "--model", "x", "--tokens", "1", "--colour", "red"});
  EXPECT_EQ(flag.status, cli::kExitUsage);
  EXPECT_NE(flag.err.find("--colour"), std::string::npos) << flag.err;
  const CliRun missing = run_cli({"forward", "--tokens", "1"});
  EXPECT_EQ(missing.status, cli::kExitUsage);
  EXPECT_NE(missing.err.find("--model"), std::string::npos) << missing.err;
  const CliRun value = run_cli({"init-model", "--layers", "two"});
  EXPECT_EQ(value.status, cli::kExitUsage);
  EXPECT_NE(value.err.find("--layers"), std::string::npos) << value.err;
}

TEST(Cli, InitModelWritesALoadableModel) {
  test::TempDir dir;
  const std::string path = make_model(dir, {"--mode", "block", "--block-size", "3"});
  const auto model = load_model(path);
  EXPECT_EQ(model.config.sublayers(), 4);
  EXPECT_EQ(model.config.num_key_value_heads, 2);
  EXPECT_EQ(model.config.attn_res.mode, ResidualMode::block);
  EXPECT_EQ(model.config.attn_res.block_size, 3);
  EXPECT_GT(model.final_res.query.norm(), 0.0);
}

TEST(Cli, InitModelRejectsImpossibleShapesAndWritesNothing) {
  test::TempDir dir;
  const std::string out = (dir / "m").string();
  auto init = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"init-model", "--layers", "2",     "--d-model", "16",
                                     "--heads",    "4",        "--ffn", "24",        "--vocab",
                                     "20",         "--out",    out};
    for (std::size_t i = 0; i + 1 < extra.size(); i += 2) {
      auto it = std::find(args.begin(), args.end(), extra[i]);
      if (it != args.end()) {
        *(it + 1) = extra[i + 1];
      } else {
        args.push_back(extra[i]);
        args.push_back(extra[i + 1]);
      }
    }
    return run_cli(args);
  };
  const CliRun heads = init({"--heads", "3"});
  EXPECT_EQ(heads.status, cli::kExitUsage);
  EXPECT_NE(heads.err.find("--heads (3) must divide --d-model (16)"), std::string::npos)
      << heads.err;
  const CliRun zero = init({"--layers", "0"});
  EXPECT_NE(zero.err.find("--layers must be a positive integer"), std::string::npos) << zero.err;
  const CliRun block = init({"--mode", "block", "--block-size", "5"});
  EXPECT_NE(block.err.find("--block-size 5 is out of range"), std::string::npos) << block.err;
  const CliRun no_size = init({"--mode", "block"});
  EXPECT_NE(no_size.err.find("--block-size is required"), std::string::npos) << no_size.err;
  const CliRun kv = init({"--kv-heads", "3"});
  EXPECT_NE(kv.err.find("--kv-heads (3) must divide --heads (4)"), std::string::npos) << kv.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Cli, ForwardPrintsASummaryWithNormsAndWeights) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const CliRun run = run_cli({"forward", "--model", model, "--tokens", "1, 2 3,4", "--mode",
                              "block", "--block-size", "2"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("Block AttnRes, S = 2 sublayers per block, N = 2 blocks"),
            std::string::npos);
  EXPECT_NE(run.out.find("T = 4"), std::string::npos);
  EXPECT_NE(run.out.find("output RMS"), std::string::npos);
  EXPECT_NE(run.out.find("partial"), std::string::npos);
  EXPECT_NE(run.out.find("semiseparable rank"), std::string::npos);
}

TEST(Cli, DumpAndTraceHoldTheForwardPassOutputs) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const std::string dump = (dir / "out.safetensors").string();
  const std::string trace = (dir / "trace.json").string();
  const CliRun run = run_cli({"forward", "--model", model, "--tokens", "5 6 7", "--mode", "full",
                              "--precision", "f64", "--dump", dump, "--trace", trace});
  ASSERT_EQ(run.status, 0) << run.err;

  // The dump equals a direct library forward pass (F32 storage of f64 values).
  ForwardOptions options;
  options.mode = ResidualMode::full;
  const auto direct = forward(load_model(model), {5, 6, 7}, options);
  const auto file = SafetensorsFile::read(dump);
  const TensorInfo* logits = file.find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->shape, (std::vector<std::int64_t>{3, 20}));
  const auto values = file.values(*logits);
  // The same f64 forward (the library's), stored as F32: one rounding to f32, 1 u of f32 of each
  // value; 2 u.
  for (int t = 0; t < 3; ++t) {
    for (int v = 0; v < 20; ++v)
      EXPECT_TRUE(test::near_relative(values[t * 20 + v], direct.logits(t, v),
                                      test::roundoffs<float>(2), 0.0, "logit"));
  }
  EXPECT_EQ(file.find("hidden_final")->shape, (std::vector<std::int64_t>{3, 16}));
  EXPECT_EQ(file.find("sublayer_output_rms")->shape, (std::vector<std::int64_t>{4}));
  for (int r = 0; r <= 4; ++r) {
    const TensorInfo* alpha = file.find("alpha." + std::to_string(r));
    ASSERT_NE(alpha, nullptr) << r;
    EXPECT_EQ(alpha->shape, (std::vector<std::int64_t>{3, r + 1}));
  }
  const auto json = nlohmann::json::parse(read_file(trace));
  EXPECT_EQ(json["mode"], "full");
  EXPECT_EQ(json["reads"].size(), 5u);
  EXPECT_EQ(json["reads"][4]["target"], "final");
  EXPECT_EQ(json["reads"][2]["sources"][1]["label"], "v1");
  // The same arithmetic in another process, carried exactly by JSON: the reordering bound,
  // relative to 1, the scale of depth weights (docs/testing.md §2).
  EXPECT_TRUE(test::near_relative(json["reads"][3]["alpha_mean"][0].get<double>(),
                                  direct.trace.reads[3].alpha_mean(0),
                                  test::kReorderedBound<double>, 1.0, "alpha mean"));
}

TEST(Cli, StandardModelDumpHasNoAlpha) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const std::string dump = (dir / "s.safetensors").string();
  ASSERT_EQ(run_cli({"forward", "--model", model, "--tokens", "1", "--dump", dump}).status, 0);
  const auto file = SafetensorsFile::read(dump);
  EXPECT_EQ(file.find("alpha.0"), nullptr);
  EXPECT_NE(file.find("logits"), nullptr);
}

TEST(Cli, ForwardBadInputGivesClearErrorsAndWritesNothing) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const std::string dump = (dir / "never.safetensors").string();
  auto forward_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"forward", "--model", model, "--dump", dump};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const CliRun vocab = forward_with({"--tokens", "1 25"});
  EXPECT_EQ(vocab.status, cli::kExitFailure);
  EXPECT_NE(vocab.err.find("token id 25 at position 1 is out of range"), std::string::npos)
      << vocab.err;
  const CliRun text = forward_with({"--tokens", "1 x"});
  EXPECT_EQ(text.status, cli::kExitUsage);
  EXPECT_NE(text.err.find("'x' (token 1) is not a token id"), std::string::npos) << text.err;
  const CliRun zero = forward_with({"--tokens", "1", "--mode", "block", "--block-size", "0"});
  EXPECT_EQ(zero.status, cli::kExitUsage);
  EXPECT_NE(zero.err.find("--block-size 0 is out of range: expected 1 <= S <= L = 4"),
            std::string::npos);
  const CliRun big = forward_with({"--tokens", "1", "--mode", "block", "--block-size", "5"});
  EXPECT_EQ(big.status, cli::kExitUsage);
  const CliRun no_size = forward_with({"--tokens", "1", "--mode", "block"});
  EXPECT_NE(no_size.err.find("--mode block needs --block-size"), std::string::npos);
  const CliRun two_phase = forward_with({"--tokens", "1", "--two-phase", "maybe"});
  EXPECT_NE(two_phase.err.find("--two-phase must be on or off"), std::string::npos);
  const CliRun precision = forward_with({"--tokens", "1", "--precision", "f16"});
  EXPECT_NE(precision.err.find("--precision: unknown precision 'f16'"), std::string::npos);
  EXPECT_NE(precision.err.find("expected f64, f32 or bf16"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dump));

  const CliRun missing =
      run_cli({"forward", "--model", (dir / "absent").string(), "--tokens", "1"});
  EXPECT_EQ(missing.status, cli::kExitFailure);
  EXPECT_NE(missing.err.find("absent"), std::string::npos);
  const CliRun bad_dir =
      forward_with({"--tokens", "1", "--trace", (dir / "no/dir/t.json").string()});
  EXPECT_EQ(bad_dir.status, cli::kExitUsage);
  EXPECT_NE(bad_dir.err.find("does not exist"), std::string::npos);
}

TEST(Cli, CorruptOrNonFiniteModelFilesAreReportedWithTheTensor) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const auto weights = model + "/model.safetensors";
  std::string bytes = read_file(weights);
  // Put a NaN (F32 0x7fc00000) into the first element of the first tensor in the data section.
  const auto file = SafetensorsFile::read(weights);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const TensorInfo& first = file.tensors().front();
  const std::uint32_t nan_bits = 0x7fc00000u;
  std::memcpy(bytes.data() + 8 + header + first.begin, &nan_bits, 4);
  write_file_atomically(weights, bytes);
  const CliRun nan = run_cli({"forward", "--model", model, "--tokens", "1"});
  EXPECT_EQ(nan.status, cli::kExitFailure);
  EXPECT_NE(nan.err.find("'" + first.name + "' holds a non-finite value"), std::string::npos)
      << nan.err;
  write_file_atomically(weights, bytes.substr(0, 5));
  const CliRun truncated = run_cli({"forward", "--model", model, "--tokens", "1"});
  EXPECT_EQ(truncated.status, cli::kExitFailure);
  EXPECT_NE(truncated.err.find("truncated"), std::string::npos) << truncated.err;
}

TEST(Cli, RealBinaryExitCodes) {
  test::TempDir dir;
  const std::string binary = ATTNRES_CLI_BINARY;
  const std::string quiet = " >" + (dir / "o.txt").string() + " 2>&1";
  auto status = [&](const std::string& args) {
    const int raw = std::system((binary + " " + args + quiet).c_str());
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  };
  EXPECT_EQ(status("--help"), 0);
  EXPECT_EQ(status("--no-such-flag"), 2);
  EXPECT_EQ(status("forward --bogus 1"), 2);
  const std::string model = (dir / "m").string();
  EXPECT_EQ(status("init-model --layers 1 --d-model 8 --heads 2 --ffn 8 --vocab 9 --out " + model),
            0);
  EXPECT_EQ(status("forward --model " + model + " --tokens '1,2'"), 0);
  EXPECT_EQ(status("forward --model " + model + " --tokens 9"), 1);
}

}  // namespace test_cli
}  // namespace attnres
