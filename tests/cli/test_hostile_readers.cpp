// Hostile input files through the command line (issue 42): deep JSON, duplicate keys, sparse
// files of gigabytes and a training state without checksums are refused by name with exit status
// 1, never a crash and never gigabytes of memory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "attnres/atomic_file.hpp"
#include "cli_support.hpp"
#include "test_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_hostile_readers {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_cli;

// A 1-layer model in DIR/name.
fs::path make_model(const test::TempDir& dir, const std::string& name = "m") {
  const fs::path path = dir / name;
  const CliRun run = run_cli({"init-model", "--layers", "1", "--d-model", "16", "--heads", "2",
                              "--ffn", "24", "--vocab", "20", "--out", path.string()});
  EXPECT_EQ(run.status, 0) << run.err;
  return path;
}

// A sparse file of `bytes` at `path` (no disk, no memory).
void write_sparse(const fs::path& path, off_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, bytes), 0);
  ::close(fd);
}

std::string deep_array(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

void expect_refused(const CliRun& run, const std::string& message) {
  EXPECT_EQ(run.status, cli::kExitFailure) << run.err;
  EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
}

TEST(HostileReaders, InspectRefusesADeepConfigJsonWithoutCrashing) {
  // 100,000 nested arrays: a stack overflow (SIGSEGV) before, from the message's dump().
  test::TempDir dir;
  const fs::path model = make_model(dir);
  write_file_atomically(model / "config.json", "{\"hidden_size\": " + deep_array(100'000) + "}");
  expect_refused(run_cli({"inspect", model.string()}),
                 (model / "config.json").string() +
                     ":1:80: JSON nested deeper than 64 levels (refused; real files nest a few)");
}

TEST(HostileReaders, AConfigJsonWithADuplicateKeyIsRefused) {
  test::TempDir dir;
  const fs::path model = make_model(dir);
  const std::string config = read_file(model / "config.json");
  // A second hidden_size at the end used to win silently.
  write_file_atomically(model / "config.json",
                        config.substr(0, config.rfind('}')) + ",\n  \"hidden_size\": 32\n}\n");
  const CliRun run = run_cli({"inspect", model.string()});
  expect_refused(run, "duplicate key 'hidden_size' (a key may appear once in an object)");
  EXPECT_NE(run.err.find((model / "config.json").string() + ":"), std::string::npos) << run.err;
}

TEST(HostileReaders, ASparse3GiBConfigJsonIsRefusedByNameBeforeItIsRead) {
  // 4.27 GB of memory before (read whole, then parsed).
  test::TempDir dir;
  const fs::path model = make_model(dir);
  write_sparse(model / "config.json", off_t{3} << 30);
  expect_refused(run_cli({"inspect", model.string()}),
                 (model / "config.json").string() +
                     ": the file holds 3221225472 bytes, more than the 16 MiB (16777216 bytes) "
                     "accepted for a config.json file; refused without reading it");
}

TEST(HostileReaders, ASparse3GiBHardwareFileIsRefusedByName) {
  // 6.47 GB of memory before.
  test::TempDir dir;
  write_sparse(dir / "gpu.toml", off_t{3} << 30);
  expect_refused(run_cli({"pipeline", "--layers", "4", "--block-size", "2", "--d-model", "64",
                          "--hardware", (dir / "gpu.toml").string()}),
                 (dir / "gpu.toml").string() +
                     ": the file holds 3221225472 bytes, more than the 16 MiB (16777216 bytes) "
                     "accepted for a hardware .toml file");
}

TEST(HostileReaders, ASparse3GiBScenarioIsRefusedByName) {
  test::TempDir dir;
  write_sparse(dir / "big.toml", off_t{3} << 30);
  expect_refused(run_cli({"report", (dir / "big.toml").string(), "--out", (dir / "r").string()}),
                 (dir / "big.toml").string() +
                     ": the file holds 3221225472 bytes, more than the 16 MiB (16777216 bytes) "
                     "accepted for a scenario .toml file");
  EXPECT_FALSE(fs::exists(dir / "r"));
}

// A checkpoint of a 2-step run in DIR/run.
fs::path make_checkpoint(const test::TempDir& dir) {
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  const CliRun run =
      run_cli(test::tiny_train_args(dir / "data.txt", dir / "run", /*steps=*/2, /*batch=*/2));
  EXPECT_EQ(run.status, 0) << run.err;
  return dir / "run";
}

std::vector<std::string> resume_args(const fs::path& run) {
  return {"train", "--resume", run.string(), "--out", run.string(), "--steps", "4"};
}

TEST(HostileReaders, TrainResumeRefusesADeepStateWithoutCrashing) {
  test::TempDir dir;
  const fs::path run = make_checkpoint(dir);
  write_file_atomically(run / "train_state.json", "{\"options\": " + deep_array(100'000) + "}");
  expect_refused(run_cli(resume_args(run)),
                 (run / "train_state.json").string() +
                     ":1:76: JSON nested deeper than 64 levels (refused; real files nest a few)");
}

TEST(HostileReaders, TrainResumeRefusesAStateWithoutChecksums) {
  // "version": 1 turned the check of model.safetensors & co. off: a one-line edit.
  test::TempDir dir;
  const fs::path run = make_checkpoint(dir);
  std::string state = read_file(run / "train_state.json");
  const auto at = state.find("\"version\": 2");
  ASSERT_NE(at, std::string::npos) << state;
  state.replace(at, 12, "\"version\": 1");
  write_file_atomically(run / "train_state.json", state);
  const auto before = read_file(run / "model.safetensors");
  expect_refused(run_cli(resume_args(run)),
                 (run / "train_state.json").string() +
                     ": version 1 records no checksums of the checkpoint's files, so config.json, "
                     "model.safetensors, optimizer.safetensors and train_log.csv cannot be checked "
                     "against it; attnres resumes only a checkpoint it can check. Start a new run "
                     "from its weights instead: attnres train --model " +
                     run.string());
  EXPECT_EQ(read_file(run / "model.safetensors"), before);
}

}  // namespace test_hostile_readers
}  // namespace attnres
