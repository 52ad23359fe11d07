// Commands that fail before they work (issue 25): unwritable outputs refused before any
// computation, flags a command does not use refused by name, paths named for what they are,
// --format json that stays JSON on errors and interruptions, sweep entries checked, scenario
// errors at the key, one prefix per message, limits hit by a flag named.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "cli_support.hpp"
#include "test_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_fail_fast {

namespace fs = std::filesystem;
using test::run_cli;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> train_args(const fs::path& data, const std::string& out,
                                    const std::string& steps = "600") {
  return {"train",        "--layers", "1",         "--d-model", "16",           "--heads", "2",
          "--ffn",        "24",       "--mode",    "block",     "--block-size", "1",       "--data",
          data.string(),  "--steps",  steps,       "--seq",     "16",           "--batch", "2",
          "--eval-every", "3",        "--threads", "1",         "--out",        out};
}

TEST(FailFast, UnwritableOutputDirectoriesAreRefusedBeforeTheWork) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  write_file_atomically(dir / "file", "a regular file\n");
  for (const std::string out : {std::string("/proc/x/y"), (dir / "file" / "sub").string()}) {
    const auto start = std::chrono::steady_clock::now();
    const auto run = run_cli(train_args(dir / "data.txt", out));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(run.status, 1) << run.err;
    EXPECT_LT(seconds, 0.5) << "a 600-step run must be refused before step 1";
    EXPECT_TRUE(has(run.err, "cannot create --out directory")) << run.err;
    EXPECT_FALSE(has(run.out, "step 1")) << run.out;
    EXPECT_FALSE(fs::exists(out));
  }
  EXPECT_TRUE(has(run_cli(train_args(dir / "data.txt", (dir / "file" / "sub").string())).err,
                  "is a file, not a directory"));
  // The other --out commands refuse the same way, before their work.
  const auto sweep = run_cli(test::sweep_args("s", "/proc/x/y"));
  EXPECT_EQ(sweep.status, 1);
  EXPECT_TRUE(has(sweep.err, "cannot create --out directory '/proc/x/y'")) << sweep.err;
  const auto model =
      run_cli({"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--ffn", "24",
               "--vocab", "20", "--out", (dir / "file" / "m").string()});
  EXPECT_EQ(model.status, 1);
  EXPECT_TRUE(has(model.err, "is a file, not a directory")) << model.err;
}

TEST(FailFast, UnwritableForwardOutputsAreRefusedBeforeThePass) {
  test::TempDir dir;
  const std::string model = test::make_block_test_model(dir.path(), 2);
  fs::create_directory(dir / "folder");
  const std::vector<std::string> forward = {"forward", "--model", model, "--tokens", "1 2 3"};
  for (const auto& [flag, path, expected] :
       {std::tuple<std::string, std::string, std::string>{"--dump", "/proc/x", "cannot write in"},
        {"--trace", (dir / "folder").string(), "is a directory, expected a file"},
        {"--trace", "/dev/null", "is a device, expected a file"},
        {"--chart", "/proc/x/c", "cannot create --chart directory"}}) {
    auto args = forward;
    args.insert(args.end(), {flag, path});
    const auto run = run_cli(args);
    EXPECT_EQ(run.status, 1) << flag << " " << path << ": " << run.err;
    EXPECT_EQ(run.out, "") << flag << " " << path << ": the table came before the refusal";
    EXPECT_TRUE(has(run.err, expected)) << run.err;
  }
}

TEST(FailFast, FlagsACommandDoesNotUseAreRefusedByName) {
  const std::vector<std::string> shape = {"--layers", "4", "--blocks", "2", "--d-model", "16"};
  auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.begin() + 1, shape.begin(), shape.end());
    args.insert(args.end(), more.begin(), more.end());
    return run_cli(args);
  };
  const struct {
    std::vector<std::string> command, flags;
    std::string flag;
  } refused[] = {
      {{"strategies"}, {"--pp", "8", "--vpp", "2"}, "--pp"},
      {{"strategies"}, {"--seq-shards", "2"}, "--seq-shards"},
      {{"recompute"}, {"--seq-shards", "8"}, "--seq-shards"},
      {{"recompute"}, {"--chunk", "64"}, "--chunk"},
      {{"layout"}, {"--dtype", "fp32"}, "--dtype"},
      {{"layout"}, {"--seq", "64"}, "--seq"},
      {{"cost", "--scheme", "block"}, {"--seq-shards", "8"}, "--seq-shards"},
      {{"cost", "--scheme", "block"}, {"--pp", "2"}, "--pp"},
  };
  for (const auto& c : refused) {
    const auto run = with(c.command, c.flags);
    EXPECT_EQ(run.status, 2) << c.command[0] << " " << c.flag << ": " << run.err;
    EXPECT_TRUE(has(run.err, c.flag + " does not change")) << run.err;
    EXPECT_TRUE(has(run.err, "leave it out")) << run.err;
  }
  // The flags they do use are accepted.
  EXPECT_EQ(with({"layout"}, {"--pp", "2"}).status, 0);
  EXPECT_EQ(with({"recompute"}, {"--pp", "2", "--dtype", "fp32"}).status, 0);
  EXPECT_EQ(with({"strategies"}, {"--seq", "64", "--dtype", "fp32"}).status, 0);
  EXPECT_EQ(with({"cost", "--scheme", "mhc"}, {"--streams", "2"}).status, 0);
  EXPECT_EQ(with({"cost"}, {"--seq-shards", "8", "--pp", "2"}).status, 0);
}

// Flags outside the model flags that a combination would leave without effect (issue 25): each
// is refused by name, saying why, before any work and before a device is touched (the CUDA cases
// run on machines without a GPU); the combinations where the flag does something still run.
TEST(FailFast, FlagsThatWouldDoNothingAreRefused) {
  test::TempDir dir;
  const std::string block = test::make_block_test_model(dir.path(), 2);
  const std::string mhc = (dir / "mhc").string();
  ASSERT_EQ(run_cli({"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--ffn",
                     "24", "--vocab", "20", "--mode", "mhc", "--out", mhc})
                .status,
            0);
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  write_file_atomically(dir / "costs.toml",
                        "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = "
                        "2\n[train]\ndata = \"data.txt\"\nlayers = 2\nd_model = 16\nheads = "
                        "2\nblocks = [2]\n");
  const std::vector<std::string> forward = {"forward", "--model", block, "--tokens", "1 2 3"};
  const std::vector<std::string> bench = {"bench", "forward", "--model",  block,
                                          "--seq", "4",       "--repeat", "1"};
  const std::vector<std::string> pipeline = {"pipeline", "--layers",  "4", "--block-size",
                                             "2",        "--d-model", "64"};
  const std::vector<std::string> sweep = {"sweep",
                                          "--sublayers",
                                          "8",
                                          "--blocks",
                                          "2",
                                          "--d-model",
                                          "16",
                                          "--x",
                                          "blocks",
                                          "--values",
                                          "1,2",
                                          "--metric",
                                          "io_multiples_of_d.mhc"};
  // A tiny run (cli_support.hpp): its --threads 1 is what --engine reference refuses.
  const std::vector<std::string> train = test::tiny_train_args(dir / "data.txt", dir / "t", 2, 1);
  auto with = [](std::vector<std::string> args, const std::vector<std::string>& more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const struct {
    std::vector<std::string> args;
    std::string flag, why;
  } refused[] = {
      {with(bench, {"--device", "cuda", "--bandwidth", "on"}), "--bandwidth on",
       "with --device cuda it would be skipped"},
      {with(bench, {"--device", "cuda", "--threads", "2"}), "--threads", "with --device cuda"},
      {with(bench, {"--engine", "reference", "--threads", "2"}), "--threads",
       "--engine reference runs on one thread"},
      {with(bench, {"--mode", "standard", "--two-phase", "off"}), "--two-phase",
       "has no depth reads"},
      {{"bench", "train", "--model", block, "--seq", "4", "--engine", "reference", "--threads",
        "1"},
       "--threads",
       "--engine reference runs on one thread"},
      {with(forward, {"--device", "cuda", "--threads", "2"}), "--threads", "with --device cuda"},
      {with(forward, {"--engine", "reference", "--threads", "1"}), "--threads",
       "--engine reference runs on one thread"},
      {{"forward", "--model", mhc, "--tokens", "1 2", "--two-phase", "off"},
       "--two-phase",
       "mHC updates its stream state in place"},
      {with(forward, {"--mode", "full", "--query-source", "input", "--two-phase", "on"}),
       "--two-phase", "an input-dependent query"},
      {with(forward, {"--mode", "full", "--query-source", "input", "--schedule-block", "2"}),
       "--schedule-block", "an input-dependent query"},
      {with(train, {"--engine", "reference"}), "--threads",
       "--engine reference runs on one thread"},
      {{"train", "--data", (dir / "data.txt").string(), "--resume", (dir / "t").string(), "--out",
        (dir / "t").string(), "--gate", "sigmoid"},
       "scheme flags",
       "cannot be given with --resume"},
      {{"mask", "--model", block, "--data", (dir / "data.txt").string(), "--drop", "embedding",
        "--random", "0", "--seed", "3"},
       "--seed",
       "with --random 0 there are none"},
      {with(sweep, {"--log-y"}), "--log-y", "only --out DIR draws"},
      {with(sweep, {"--log-x", "--format", "json"}), "--log-x", "only --out DIR draws"},
      {with(sweep, {"--name", "io"}), "--name", "the printed CSV has no name"},
      {with(sweep, {"--y", "tokens", "--y-values", "64,128", "--seq", "256"}), "--seq",
       "which --y sweeps"},
      {with(pipeline, {"--overlap", "off"}), "--overlap", "with --pp 1 no transfer crosses one"},
      {with(pipeline, {"--ideal-links"}), "--ideal-links", "with --pp 1"},
      {with(pipeline, {"--link", "intra-node"}), "--link", "with --pp 1"},
      {with(pipeline, {"--link-bandwidth", "10"}), "--link-bandwidth", "with --pp 1"},
      {{"report", (dir / "costs.toml").string(), "--out", (dir / "r").string(), "--train-steps",
        "2"},
       "--train-steps",
       "leave \"training\" out"},
  };
  for (const auto& c : refused) {
    const auto run = run_cli(c.args);
    EXPECT_EQ(run.status, 2) << c.args[0] << " " << c.flag << ": " << run.err;
    EXPECT_TRUE(has(run.err, c.flag)) << run.err;
    EXPECT_TRUE(has(run.err, c.why)) << run.err;
    EXPECT_TRUE(run.out.empty() || has(run.out, "attnres.error")) << run.out;
  }
  EXPECT_FALSE(fs::exists(dir / "t"));
  EXPECT_FALSE(fs::exists(dir / "r"));
  // Where the flag does something, it is accepted.
  EXPECT_EQ(run_cli(with(forward, {"--threads", "2"})).status, 0);
  EXPECT_EQ(run_cli(with(forward, {"--mode", "full", "--schedule-block", "2"})).status, 0);
  EXPECT_EQ(run_cli(with(forward, {"--mode", "full", "--two-phase", "off"})).status, 0);
  EXPECT_EQ(run_cli(with(bench, {"--two-phase", "off", "--bandwidth", "off"})).status, 0);
  EXPECT_EQ(run_cli(with(sweep, {"--name", "io", "--format", "json"})).status, 0);
  EXPECT_EQ(run_cli(with(sweep, {"--y", "tokens", "--y-values", "64,128"})).status, 0);
  EXPECT_EQ(
      run_cli(with(pipeline, {"--pp", "2", "--overlap", "off", "--link", "intra-node"})).status, 0);
}

TEST(FailFast, PathsAreNamedForWhatTheyAre) {
  test::TempDir dir;
  fs::create_directory(dir / "folder");
  write_file_atomically(dir / "file", "a regular file\n");
  const auto folder = run_cli({"report", (dir / "folder").string(), "--out", (dir / "r").string()});
  EXPECT_EQ(folder.status, 1);
  EXPECT_TRUE(has(folder.err, "is a directory, expected a scenario .toml file")) << folder.err;
  const auto device = run_cli({"report", "/dev/null", "--out", (dir / "r").string()});
  EXPECT_TRUE(has(device.err, "is a device, expected a scenario .toml file")) << device.err;
  const auto model = run_cli({"forward", "--model", (dir / "file").string(), "--tokens", "1"});
  EXPECT_EQ(model.status, 1);
  EXPECT_TRUE(has(model.err, "is a file, not a model directory")) << model.err;
  EXPECT_FALSE(has(model.err, "does not exist")) << model.err;
  const auto data = run_cli(train_args(dir / "folder", (dir / "t").string(), "2"));
  EXPECT_EQ(data.status, 1);
  EXPECT_TRUE(has(data.err, "is a directory")) << data.err;
  EXPECT_FALSE(has(data.err, "is empty")) << data.err;
}

void expect_json_error(const std::string& out, int status, const std::string& kind) {
  nlohmann::json json;
  ASSERT_NO_THROW(json = nlohmann::json::parse(out)) << out;
  EXPECT_EQ(json["schema"]["name"], "attnres.error");
  EXPECT_EQ(json["schema"]["version"], 1);
  EXPECT_EQ(json["error"]["exit_status"], status);
  EXPECT_EQ(json["error"]["kind"], kind);
  EXPECT_TRUE(json["error"]["message"].get<std::string>().rfind("attnres ", 0) == 0) << out;
}

TEST(FailFast, FormatJsonStaysJsonOnErrors) {
  const auto usage =
      run_cli({"cost", "--layers", "4", "--blocks", "9", "--d-model", "16", "--format", "json"});
  EXPECT_EQ(usage.status, 2);
  expect_json_error(usage.out, 2, "usage");
  EXPECT_TRUE(has(usage.err, "attnres cost: --blocks")) << usage.err;  // words on stderr
  const auto equals = run_cli({"layout", "--layers", "4", "--blocks", "2", "--d-model", "16",
                               "--dtype", "fp8", "--format=json"});
  expect_json_error(equals.out, 2, "usage");
  const auto error = run_cli({"pipeline", "--layers", "4", "--blocks", "2", "--d-model", "16",
                              "--hardware", "missing.toml", "--format", "json"});
  EXPECT_EQ(error.status, 1);
  expect_json_error(error.out, 1, "error");
  // Without --format json, stdout stays empty on an error.
  EXPECT_EQ(run_cli({"cost", "--layers", "4", "--blocks", "9", "--d-model", "16"}).out, "");
}

#ifdef ATTNRES_CLI_BINARY
TEST(FailFast, InterruptedTrainingWithFormatJsonPrintsJson) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  auto args = train_args(dir / "data.txt", (dir / "run").string(), "9");
  args.insert(args.end(), {"--format", "json"});
  const fs::path hold = dir / "hold", stdout_file = dir / "stdout.txt";
  const pid_t child = fork();
  if (child == 0) {
    setenv("ATTNRES_TEST_HOLD_TRAIN", hold.c_str(), 1);
    const int out = ::open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(out, 1);
    dup2(null, 2);
    std::string binary = ATTNRES_CLI_BINARY;
    std::vector<char*> argv{binary.data()};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(hold) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(hold));
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  std::ifstream in(stdout_file);
  std::stringstream text;
  text << in.rdbuf();
  expect_json_error(text.str(), 130, "cancelled");
  EXPECT_TRUE(has(text.str(), "continue with --resume")) << text.str();
}
#endif

// The sweep of cli_support.hpp without --out: the points are printed.
std::vector<std::string> printed_sweep(const std::string& values) {
  auto args = test::sweep_args("s", "unused", values);
  args.erase(args.end() - 4, args.end());  // --name s --out unused: printed, not written
  return args;
}

TEST(FailFast, EmptyAndOutOfRangeSweepEntriesAreRefused) {
  for (const std::string values : {"1,,2", ",1,2,", "1,2,", ",", "1, ,2"}) {
    const auto run = run_cli(printed_sweep(values));
    EXPECT_EQ(run.status, 2) << values;
    EXPECT_TRUE(has(run.err, "--values: entry ")) << values << ": " << run.err;
    EXPECT_TRUE(has(run.err, "is empty")) << run.err;
    EXPECT_EQ(run.out, "");
  }
  for (const std::string values : {"0,2", "-3,2", "0:4"}) {
    const auto run = run_cli(printed_sweep(values));
    EXPECT_EQ(run.status, 2) << values;
    EXPECT_TRUE(has(run.err, "--values: ")) << values << ": " << run.err;
    EXPECT_TRUE(has(run.err, " is out of range for blocks")) << values << ": " << run.err;
  }
  EXPECT_EQ(run_cli(printed_sweep("1:4")).status, 0);
  auto y = printed_sweep("1,2");
  y.insert(y.end(), {"--y", "tokens", "--y-values", "64,0"});
  const auto grid = run_cli(y);
  EXPECT_EQ(grid.status, 2);
  EXPECT_TRUE(has(grid.err, "--y-values: 0 is out of range for tokens")) << grid.err;
}

TEST(FailFast, ScenarioErrorsPointAtTheKey) {
  test::TempDir dir;
  write_file_atomically(dir / "k.toml",
                        "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\n"
                        "block_layers = 5\n");
  const auto layers = run_cli({"report", (dir / "k.toml").string(), "--out", (dir / "r").string()});
  EXPECT_EQ(layers.status, 1);
  EXPECT_TRUE(has(layers.err, "k.toml:5:")) << "at block_layers, not [model]: " << layers.err;
  write_file_atomically(dir / "s.toml",
                        "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n"
                        "[[sweep]]\nname = \"s\"\nx = \"blocks\"\nvalues = [1, 2, 4]\n"
                        "metrics = [\"io_multiples_of_d.block_two_phase\"]\nmax_points = 2\n");
  const auto sweep = run_cli({"report", (dir / "s.toml").string(), "--out", (dir / "r").string()});
  EXPECT_EQ(sweep.status, 1);
  EXPECT_TRUE(has(sweep.err, "s.toml:11:")) << "at max_points, not [[sweep]]: " << sweep.err;
}

TEST(FailFast, OnePrefixPerMessage) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  ASSERT_EQ(run_cli({"init-model", "--layers", "2", "--d-model", "16", "--heads", "4", "--ffn",
                     "24", "--vocab", "20", "--out", (dir / "m").string()})
                .status,
            0);
  const auto train =
      run_cli({"train", "--model", (dir / "m").string(), "--data", (dir / "data.txt").string(),
               "--steps", "2", "--seq", "8", "--batch", "1", "--out", (dir / "t").string()});
  EXPECT_EQ(train.status, 1);
  EXPECT_TRUE(has(train.err, "attnres train: error: the model's vocabulary")) << train.err;
  const auto pipeline = run_cli({"pipeline", "--layers", "4", "--blocks", "2", "--d-model", "16",
                                 "--pp", "2", "--vpp", "2", "--microbatches", "3"});
  EXPECT_EQ(pipeline.status, 2);
  EXPECT_TRUE(has(pipeline.err, "attnres pipeline: the interleaved")) << pipeline.err;
  for (const auto& run : {train, pipeline}) {
    EXPECT_FALSE(has(run.err, "train: train:")) << run.err;
    EXPECT_FALSE(has(run.err, "pipeline: pipeline:")) << run.err;
  }
}

TEST(FailFast, ALimitHitByAFlagNamesTheFlag) {
  const auto run =
      run_cli({"strategies", "--layers", "500000", "--d-model", "1024", "--blocks", "8"});
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_TRUE(has(run.err, "attnres strategies: --layers: ")) << run.err;
  const auto blocks =
      run_cli({"strategies", "--layers", "24", "--d-model", "1024", "--blocks", "1000000"});
  EXPECT_EQ(blocks.status, 2);
  EXPECT_TRUE(has(blocks.err, "--blocks")) << blocks.err;
}

}  // namespace test_fail_fast
}  // namespace attnres
