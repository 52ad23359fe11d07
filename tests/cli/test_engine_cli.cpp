// attnres forward --engine/--threads/--device, F64 dumps, and attnres bench forward.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnres/engine.hpp"
#include "attnres/measure.hpp"
#include "attnres/safetensors.hpp"
#include "cli_support.hpp"
#include "model_support.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_engine_cli {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_cli;

std::string make_model(const test::TempDir& dir) {
  return test::make_block_test_model(dir.path(), 3);
}

TEST(EngineCli, F64DumpsOfBothEnginesAgreeTo1e12) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const std::vector<std::string> base = {"forward",         "--model",     model, "--tokens",
                                         "3 1 4 1 5 9 2 6", "--precision", "f64"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  };
  const CliRun fast =
      with({"--engine", "fast", "--threads", "2", "--dump", (dir / "fast.safetensors").string()});
  const CliRun reference =
      with({"--engine", "reference", "--dump", (dir / "ref.safetensors").string()});
  ASSERT_EQ(fast.status, 0) << fast.err;
  ASSERT_EQ(reference.status, 0) << reference.err;
  const auto a = SafetensorsFile::read(dir / "fast.safetensors");
  const auto b = SafetensorsFile::read(dir / "ref.safetensors");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& tensor : a.tensors()) {
    EXPECT_EQ(tensor.dtype, TensorDType::f64) << tensor.name << ": an f64 run dumps F64";
    const TensorInfo* other = b.find(tensor.name);
    ASSERT_NE(other, nullptr) << tensor.name;
    const auto x = a.values(tensor), y = b.values(*other);
    ASSERT_EQ(x.size(), y.size());
    // The same arithmetic in another order: the reordering bound, relative to the tensor's
    // largest |element| (docs/testing.md §2).
    double scale = 0.0, diff = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, std::abs(y[i]));
      diff = std::max(diff, std::abs(x[i] - y[i]));
    }
    const double relative = scale > 0 ? diff / scale : diff;  // an all-zero tensor: exactly
    test::log_bound(tensor.name, relative, test::kReorderedBound<double>);
    EXPECT_LE(relative, test::kReorderedBound<double>) << tensor.name;
  }
  // At f32 the dump stays F32.
  const CliRun f32 = run_cli({"forward", "--model", model, "--tokens", "1 2", "--dump",
                              (dir / "f32.safetensors").string()});
  ASSERT_EQ(f32.status, 0) << f32.err;
  EXPECT_EQ(SafetensorsFile::read(dir / "f32.safetensors").tensors().front().dtype,
            TensorDType::f32);
}

TEST(EngineCli, EngineFlagsAreChecked) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  struct Case {
    std::vector<std::string> extra;
    int status;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--engine", "quick"}, cli::kExitUsage, "unknown engine 'quick'"},
      {{"--device", "gpu"}, cli::kExitUsage, "unknown device 'gpu'"},
      {{"--threads", "-2"}, cli::kExitUsage, "--threads must be between 0 (every core) and"},
      // Refused before any work (no pool of 5000 threads that a memory limit could strand).
      {{"--threads", "5000"},
       cli::kExitUsage,
       "--threads must be between 0 (every core) and " + std::to_string(kMaxThreads) +
           ", got 5000"},
      {{"--device", "cuda", "--engine", "reference"},
       cli::kExitUsage,
       "--device cuda runs the fast engine"},
      {{"--device", "cuda", "--precision", "f64"},
       cli::kExitUsage,
       "--device cuda computes in f32"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"forward", "--model", model, "--tokens", "1"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const CliRun run = run_cli(args);
    EXPECT_EQ(run.status, c.status) << run.err;
    EXPECT_NE(run.err.find(c.needle), std::string::npos) << run.err;
  }
  std::string why;
  if (!cuda_engine_available(&why)) {
    // No GPU here: a clear message and exit 1, never a crash.
    const CliRun cuda = run_cli({"forward", "--model", model, "--tokens", "1", "--device", "cuda"});
    EXPECT_EQ(cuda.status, cli::kExitFailure) << cuda.err;
    EXPECT_NE(cuda.err.find("cuda"), std::string::npos) << cuda.err;
  }
}

TEST(EngineCli, EveryThreadsFlagHasTheBound) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const std::string needle =
      "--threads must be between 0 (every core) and " + std::to_string(kMaxThreads) + ", got 5000";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "forward", "--model", model, "--seq", "16", "--threads",
                                 "5000"},
        std::vector<std::string>{"bench", "train", "--model", model, "--seq", "16", "--batch", "1",
                                 "--threads", "5000"}}) {
    const CliRun run = run_cli(args);
    EXPECT_EQ(run.status, cli::kExitUsage) << args[1] << ": " << run.err;
    EXPECT_NE(run.err.find(needle), std::string::npos) << args[1] << ": " << run.err;
  }
}

// --precision bf16 with --versus: both timed on the same work, the speed-up is their ratio; the
// precision each used is in the JSON. Bad values are refused before any timing.
TEST(EngineCli, BenchVersusTimesBothPrecisions) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "train", "--model", model, "--seq", "16", "--batch", "1",
                                 "--steps", "1", "--warmup", "0"},
        std::vector<std::string>{"bench", "forward", "--model", model, "--seq", "16", "--repeat",
                                 "1", "--bandwidth", "off"}}) {
    std::vector<std::string> versus = args;
    for (const char* extra : {"--precision", "bf16", "--versus", "f32", "--format", "json"})
      versus.push_back(extra);
    const CliRun run = run_cli(versus);
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["precision"], "bf16");
    EXPECT_EQ(json["versus"]["precision"], "f32");
    // The CLI's own quotient of the same two numbers: the same bits.
    EXPECT_DOUBLE_EQ(json["versus"]["speedup"].get<double>(),
                     json["tokens_per_second"].get<double>() /
                         json["versus"]["tokens_per_second"].get<double>());
    std::vector<std::string> same = args;
    for (const char* extra : {"--precision", "f32", "--versus", "f32"}) same.push_back(extra);
    const CliRun again = run_cli(same);
    EXPECT_EQ(again.status, cli::kExitUsage);
    EXPECT_NE(again.err.find("--versus f32 is the --precision already timed"), std::string::npos)
        << again.err;
    std::vector<std::string> bad = args;
    for (const char* extra : {"--versus", "f16"}) bad.push_back(extra);
    const CliRun unknown = run_cli(bad);
    EXPECT_EQ(unknown.status, cli::kExitUsage);
    EXPECT_NE(unknown.err.find("--versus: unknown precision 'f16'"), std::string::npos)
        << unknown.err;
  }
}

TEST(EngineCli, BenchForwardPrintsTheAgreedKeys) {
  test::TempDir dir;
  const std::string model = make_model(dir);
  const CliRun run =
      run_cli({"bench", "forward", "--model", model, "--seq", "16", "--repeat", "3", "--threads",
               "2", "--mode", "full", "--bandwidth", "off", "--format", "json"});
  ASSERT_EQ(run.status, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  for (const char* key :
       {"tokens_per_second", "seconds_per_forward", "threads", "engine", "device"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["threads"], 2);
  EXPECT_EQ(json["engine"], "fast");
  EXPECT_EQ(json["device"], "cpu");
  EXPECT_EQ(json["seconds"].size(), 3u);
  // tokens / s, then x s: 2 roundings; 4 u.
  EXPECT_TRUE(test::near_relative(
      json["tokens_per_second"].get<double>() * json["seconds_per_forward"].get<double>(), 16.0,
      test::roundoffs<double>(4), 0.0, "tokens per second x seconds"));
  const CliRun reference =
      run_cli({"bench", "forward", "--model", model, "--seq", "4", "--repeat", "1", "--engine",
               "reference", "--bandwidth", "off", "--format", "json"});
  ASSERT_EQ(reference.status, 0) << reference.err;
  EXPECT_EQ(nlohmann::json::parse(reference.out)["threads"], 1);
  const CliRun table = run_cli(
      {"bench", "forward", "--model", model, "--seq", "8", "--repeat", "1", "--bandwidth", "off"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("tokens_per_second"), std::string::npos);
  EXPECT_EQ(run_cli({"bench", "backward"}).status, cli::kExitUsage);
  EXPECT_EQ(run_cli({"bench", "forward", "--model", model, "--seq", "0"}).status, cli::kExitUsage);
  EXPECT_EQ(run_cli({"bench", "forward", "--model", model, "--seq", "4", "--mode", "standard",
                     "--block-size", "2"})
                .status,
            cli::kExitUsage);
}

// The number at the end of the table row that starts with `label`.
double table_value(const std::string& table, const std::string& label) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(label, 0) != 0) continue;
    return std::stod(line.substr(line.find_last_of(' ') + 1));
  }
  ADD_FAILURE() << "no row '" << label << "' in\n" << table;
  return std::nan("");
}

// bench forward and train put the pass's FLOP rate beside the machine's matrix rate: the achieved
// rate is FLOPs per token x tokens/s, the share their ratio to the matrix rate, in the JSON and in
// the printed table alike. The FLOPs are counted here by hand for the tiny model (2 layers, d =
// 16, H = 2 of d_h = 8, one KV head, SwiGLU F = 24, V = 256, T = 16: causal context T/2 = 8):
//   attention 2 (2 d H d_h + 2 d H_kv d_h) + 4 (T/2) H d_h = 1536 + 512 = 2048
//   MLP       2 x 3 d F = 2304;   LM head 2 V d = 8192
//   forward   2 x (2048 + 2304) + 8192 = 16896;   training step 3 x 16896 (backward = 2 x).
// No timing is asserted: only how the printed figures relate.
TEST(EngineCli, BenchPutsThePassBesideTheMachinesMatrixRate) {
  test::TempDir dir;
  const std::string model = (dir / "m").string();
  ASSERT_EQ(run_cli({"init-model", "--layers", "2", "--d-model", "16", "--heads", "2", "--kv-heads",
                     "1", "--ffn", "24", "--vocab", "256", "--out", model})
                .status,
            0);
  const double forward_flops = 2 * (2048 + 2304) + 8192;
  struct Case {
    std::vector<std::string> args;
    double flops;
    const char* flops_row;
  };
  const std::vector<Case> cases = {{{"bench", "forward", "--model", model, "--seq", "16",
                                     "--repeat", "2", "--threads", "1", "--bandwidth", "off"},
                                    forward_flops,
                                    "model FLOPs per token"},
                                   {{"bench", "train", "--model", model, "--seq", "16", "--batch",
                                     "2", "--steps", "2", "--warmup", "0", "--threads", "1"},
                                    3 * forward_flops,
                                    "model FLOPs per token (fwd + bwd)"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args[1]);
    auto json_args = c.args;
    json_args.insert(json_args.end(), {"--format", "json"});
    const CliRun run = run_cli(json_args);
    ASSERT_EQ(run.status, 0) << run.err;
    const auto json = nlohmann::json::parse(run.out);
    EXPECT_EQ(json["model_flop_per_token"].get<double>(), c.flops);
    const double tokens_per_second = json["tokens_per_second"].get<double>();
    const double achieved = json["achieved_flop_per_second"].get<double>();
    const double matrix = json["matrix_rate"]["flop_per_second"].get<double>();
    EXPECT_GT(matrix, 0.0);
    // A product and a quotient of the printed numbers (JSON keeps every bit), the program's in
    // another order (tokens over seconds, times FLOPs): a few roundings, 8 u of f64 relative.
    EXPECT_TRUE(test::near_relative(achieved, c.flops * tokens_per_second,
                                    test::roundoffs<double>(8), 0.0, "achieved FLOP/s"));
    EXPECT_TRUE(test::near_relative(json["fraction_of_matrix_rate"].get<double>(),
                                    achieved / matrix, test::roundoffs<double>(8), 0.0,
                                    "fraction of the matrix rate"));
    // Timed at the model's largest weight product, the LM head (256 x 16), with T = 16 rows.
    EXPECT_EQ(json["matrix_rate"]["product"], "LM head");
    EXPECT_EQ(json["matrix_rate"]["m"], 16);
    EXPECT_EQ(json["matrix_rate"]["n"], 256);
    EXPECT_EQ(json["matrix_rate"]["k"], 16);
    // The table: the same relations between the printed (6-digit) figures.
    const CliRun table = run_cli(c.args);
    ASSERT_EQ(table.status, 0) << table.err;
    const double printed_flops = table_value(table.out, c.flops_row);
    const double printed_tokens = table_value(table.out, "tokens_per_second");
    const double printed_achieved = table_value(table.out, "achieved GFLOP/s");
    const double printed_matrix = table_value(table.out, "matrix rate GFLOP/s (f32, 1 thread)");
    const double printed_share = table_value(table.out, "share of the matrix rate");
    EXPECT_EQ(printed_flops, c.flops);
    EXPECT_NEAR(printed_achieved, printed_flops * printed_tokens / 1e9, 2e-5 * printed_achieved);
    EXPECT_NEAR(printed_share, printed_achieved / printed_matrix, 2e-5 * printed_share);
    EXPECT_NE(table.out.find("16 x 256 x 16, the LM head"), std::string::npos) << table.out;
  }
}

TEST(EngineCli, BenchmarkTokensAreThePeersFormula) {
  // t -> (1103515245 (seed + t) + 12345) mod 2^31 mod vocab, as bench/peers/attnres_peer.py.
  const auto tokens = benchmark_tokens(3, 1024, 0);
  EXPECT_EQ(tokens, (std::vector<int>{
                        static_cast<int>(12345 % 1024),
                        static_cast<int>((1103515245ull + 12345) % 2147483648ull % 1024),
                        static_cast<int>((2 * 1103515245ull + 12345) % 2147483648ull % 1024)}));
}

}  // namespace test_engine_cli
}  // namespace attnres
