// attnres train and forward --grad from the command line (docs/training.md): outputs, the final
// JSON, bad inputs with clear errors and no partial output, Ctrl-C + --resume = uninterrupted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "attnres/safetensors.hpp"
#include "attnres/training.hpp"
#include "cli_support.hpp"
#include "test_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_train_cli {

namespace fs = std::filesystem;
using test::run_cli;
using test::spawn_cli;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> train_args(const fs::path& data, const fs::path& out,
                                    const std::string& steps = "6") {
  return {"train", "--layers", "1",           "--d-model",    "16",    "--heads",
          "2",     "--ffn",    "24",          "--mode",       "block", "--block-size",
          "1",     "--data",   data.string(), "--steps",      steps,   "--seq",
          "16",    "--batch",  "2",           "--eval-every", "3",     "--threads",
          "1",     "--out",    out.string()};
}

TEST(TrainCli, WritesACheckpointAndEndsWithJson) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  const auto run = run_cli(train_args(dir / "data.txt", dir / "run"));
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* file : {"config.json", "model.safetensors", "optimizer.safetensors",
                           "train_state.json", "train_log.csv"}) {
    EXPECT_TRUE(fs::exists(dir / "run" / file)) << file;
  }
  const auto json = nlohmann::json::parse(run.out.substr(run.out.rfind("\n{")));
  EXPECT_EQ(json["steps"], 6);
  EXPECT_EQ(json["mode"], "block");
  EXPECT_GT(json["tokens_per_second"].get<double>(), 0.0);
  EXPECT_GT(json["peak_resident_bytes"].get<double>(), 0.0);
  EXPECT_LT(json["final_val_loss"].get<double>(), json["initial_val_loss"].get<double>());
  const std::string log = read_file(dir / "run/train_log.csv");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 8);  // header + steps 0..6
  EXPECT_EQ(log.rfind("step,tokens,train_loss,val_loss,lr,grad_norm,output_rms_1,output_rms_2,"
                      "output_grad_rms_1",
                      0),
            0u);
  // The trained model loads in the other commands.
  const auto forward =
      run_cli({"forward", "--model", (dir / "run").string(), "--tokens", "104 101 108 108 111"});
  EXPECT_EQ(forward.status, 0) << forward.err;
  // --format json prints only the object.
  const auto quiet = run_cli([&] {
    auto args = train_args(dir / "data.txt", dir / "run2");
    args.insert(args.end(), {"--format", "json"});
    return args;
  }());
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(nlohmann::json::parse(quiet.out)["steps"], 6);
}

TEST(TrainCli, BadInputsAreClearErrorsWithoutOutput) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  write_file_atomically(dir / "empty.txt", "");
  write_file_atomically(dir / "binary.bin", std::string("\x7f"
                                                        "ELF\0\0\0",
                                                        7) +
                                                test::sample_text(100));
  struct Case {
    std::vector<std::string> args;
    int status;
    std::string message;
  };
  auto with = [&](const fs::path& data, std::vector<std::string> extra = {}) {
    auto args = train_args(data, dir / "out");
    for (std::size_t i = 0; i + 1 < extra.size(); i += 2) {
      auto it = std::find(args.begin(), args.end(), extra[i]);
      if (it != args.end()) {
        *(it + 1) = extra[i + 1];
      } else {
        args.push_back(extra[i]);
        args.push_back(extra[i + 1]);
      }
    }
    return args;
  };
  const std::vector<Case> cases = {
      {with(dir / "empty.txt"), 1, "empty.txt: the data file is empty"},
      {with(dir / "binary.bin"), 1, "binary.bin: byte 4 is NUL"},
      {with(dir / "missing.txt"), 1, "missing.txt: cannot read the data file"},
      {with(dir / "data.txt", {"--vocab", "100"}), 1, "byte-level text needs at least 256"},
      {with(dir / "data.txt", {"--steps", "0"}), 2, "--steps must be at least 1, got 0"},
      {with(dir / "data.txt", {"--seq", "1"}), 2, "--seq must be at least 2"},
      {with(dir / "data.txt", {"--seq", "4000"}), 1, "each part needs at least 4001"},
      {with(dir / "data.txt", {"--block-size", "9"}), 2, "--block-size 9 is out of range"},
  };
  for (const auto& c : cases) {
    const auto run = run_cli(c.args);
    EXPECT_EQ(run.status, c.status) << c.message << "\n" << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(dir / "out")) << c.message;
  }
  // Neither a model nor a shape; both; resume with settings.
  EXPECT_EQ(run_cli({"train", "--data", (dir / "data.txt").string(), "--steps", "2", "--seq", "8",
                     "--batch", "1", "--out", (dir / "out").string()})
                .status,
            2);
  // An --out directory holding other files is refused and left alone.
  fs::create_directories(dir / "busy");
  write_file_atomically(dir / "busy/notes.txt", "mine");
  const auto busy = run_cli(train_args(dir / "data.txt", dir / "busy"));
  EXPECT_EQ(busy.status, 1);
  EXPECT_NE(busy.err.find("notes.txt"), std::string::npos) << busy.err;
  EXPECT_EQ(read_file(dir / "busy/notes.txt"), "mine");
  // Unwritable --out (a file in the way).
  write_file_atomically(dir / "afile", "x");
  const auto blocked = run_cli(train_args(dir / "data.txt", dir / "afile/run"));
  EXPECT_NE(blocked.status, 0);
  EXPECT_NE(blocked.err.find("afile"), std::string::npos) << blocked.err;
}

// Data files that are not regular files are refused at once, by train and by mask alike (mask
// read 4.3 GB of /dev/zero before refusing it), and --threads has its bound.
TEST(TrainCli, DataThatIsNotARegularFileAndTooManyThreadsAreRefused) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  const auto zero = run_cli(train_args("/dev/zero", dir / "out"));
  EXPECT_EQ(zero.status, 1) << zero.err;
  EXPECT_NE(zero.err.find("/dev/zero: the data file is a device"), std::string::npos) << zero.err;
  const auto folder = run_cli(train_args(dir.path(), dir / "out"));
  EXPECT_NE(folder.err.find("the data file is a directory"), std::string::npos) << folder.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  const auto model =
      run_cli({"init-model", "--layers", "1", "--d-model", "16", "--heads", "2", "--ffn", "24",
               "--vocab", "256", "--mode", "full", "--out", (dir / "m").string()});
  ASSERT_EQ(model.status, 0) << model.err;
  const auto mask = run_cli({"mask", "--model", (dir / "m").string(), "--data", "/dev/zero",
                             "--drop", "embedding", "--seq", "8"});
  EXPECT_EQ(mask.status, 1) << mask.err;
  EXPECT_NE(mask.err.find("/dev/zero: the data file is a device"), std::string::npos) << mask.err;
  auto threads = train_args(dir / "data.txt", dir / "out");
  *(std::find(threads.begin(), threads.end(), "--threads") + 1) = "5000";
  const auto many = run_cli(threads);
  EXPECT_NE(many.status, 0) << many.err;
  EXPECT_NE(many.err.find("must be between 0 (every core) and 256, got 5000"), std::string::npos)
      << many.err;
  EXPECT_FALSE(fs::exists(dir / "out/model.safetensors"));
}

TEST(TrainCli, CorruptCheckpointIsAClearError) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  ASSERT_EQ(run_cli(train_args(dir / "data.txt", dir / "run")).status, 0);
  const std::string bytes = read_file(dir / "run/optimizer.safetensors");
  write_file_atomically(dir / "run/optimizer.safetensors", bytes.substr(0, bytes.size() / 2));
  const auto run =
      run_cli({"train", "--data", (dir / "data.txt").string(), "--resume", (dir / "run").string(),
               "--out", (dir / "run").string(), "--steps", "8"});
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("optimizer.safetensors"), std::string::npos) << run.err;
  const auto settings =
      run_cli({"train", "--data", (dir / "data.txt").string(), "--resume", (dir / "run").string(),
               "--out", (dir / "run").string(), "--lr", "1"});
  EXPECT_EQ(settings.status, 2);
  EXPECT_NE(settings.err.find("--lr cannot change a resumed run"), std::string::npos)
      << settings.err;
}

// Runs the real binary, waits until it has written its first checkpoint (the test hook holds it
// there), sends SIGINT and returns the exit status.
int train_and_interrupt(const std::vector<std::string>& args, const fs::path& hold) {
  const pid_t child = spawn_cli(args, "ATTNRES_TEST_HOLD_TRAIN", hold.string());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(hold) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(fs::exists(hold)) << "training never reached its first checkpoint";
  kill(child, SIGINT);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(TrainCli, CtrlCSavesACheckpointAndResumeEqualsAnUninterruptedRun) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  ASSERT_EQ(run_cli(train_args(dir / "data.txt", dir / "straight", "9")).status, 0);
  EXPECT_EQ(train_and_interrupt(train_args(dir / "data.txt", dir / "cut", "9"), dir / "hold"), 130);
  const auto state = nlohmann::json::parse(read_file(dir / "cut/train_state.json"));
  const int stopped_at = state["step"].get<int>();
  EXPECT_GE(stopped_at, 3);
  EXPECT_LT(stopped_at, 9);
  const auto resumed = run_cli({"train", "--data", (dir / "data.txt").string(), "--resume",
                                (dir / "cut").string(), "--out", (dir / "cut").string()});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed at step " + std::to_string(stopped_at)), std::string::npos)
      << resumed.out;
  EXPECT_EQ(read_file(dir / "cut/model.safetensors"),
            read_file(dir / "straight/model.safetensors"));
  EXPECT_EQ(read_file(dir / "cut/optimizer.safetensors"),
            read_file(dir / "straight/optimizer.safetensors"));
  EXPECT_EQ(read_file(dir / "cut/train_log.csv"), read_file(dir / "straight/train_log.csv"));
}

TEST(TrainCli, ResumeSaysWhatItRemovedFromTheCheckpointDirectory) {
  // Before: a killed run's staging folder was removed silently on resume, although
  // docs/output-safety.md says the command says so.
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(4000));
  ASSERT_EQ(run_cli(train_args(dir / "data.txt", dir / "run", "3")).status, 0);
  const std::string stale = ".attnres-staging.999999.0";
  fs::create_directories(dir / "run" / stale);
  write_file_atomically(dir / "run" / stale / "model.safetensors", "half");
  const auto resumed = run_cli({"train", "--data", (dir / "data.txt").string(), "--resume",
                                (dir / "run").string(), "--out", (dir / "run").string()});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("note: removed " + (dir / "run" / stale).string() +
                             ", a staging folder left by an interrupted run"),
            std::string::npos)
      << resumed.out;
  EXPECT_FALSE(fs::exists(dir / "run" / stale));
  const auto json = nlohmann::json::parse(resumed.out.substr(resumed.out.rfind("\n{")));
  EXPECT_EQ(json["notes"].size(), 1u);
}

// Every file of a checkpoint directory, by name, with its bytes (staging folders included).
std::map<std::string, std::string> directory_bytes(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    files[fs::relative(entry.path(), dir).string()] =
        entry.is_regular_file() ? read_file(entry.path()) : std::string("(folder)");
  }
  return files;
}

// Runs in `dir` while alive; back where it was after.
struct WorkingDirectory {
  explicit WorkingDirectory(const fs::path& dir) : previous(fs::current_path()) {
    fs::current_path(dir);
  }
  ~WorkingDirectory() { fs::current_path(previous); }
  fs::path previous;
};

// `train --resume DIR` without --data takes the data file train_state.json records (an absolute
// path, so from any directory) and trains the same bits as a resume given --data. Both split the
// file as the run did: before, a resume split at the default --val-fraction (0.05), whatever the
// run's own was, and validated on other bytes.
TEST(TrainCli, ResumeWithoutDataTrainsOnTheRecordedFile) {
  test::TempDir dir;
  const std::string text = test::sample_text(4000);
  write_file_atomically(dir / "data.txt", text);
  const auto validation_bytes = static_cast<std::size_t>(static_cast<double>(text.size()) * 0.2);
  const std::string split = "(" + std::to_string(text.size() - validation_bytes) + " + " +
                            std::to_string(validation_bytes) + " bytes)";
  fs::create_directories(dir / "elsewhere");
  {
    const WorkingDirectory here(dir.path());  // --data as a relative path
    auto args = train_args("data.txt", "run", "3");
    args.insert(args.end(), {"--val-fraction", "0.2"});
    const auto first = run_cli(args);
    ASSERT_EQ(first.status, 0) << first.err;
  }
  const auto recorded = nlohmann::json::parse(read_file(dir / "run/train_state.json"))["data"];
  EXPECT_EQ(recorded["path"], fs::absolute(dir / "data.txt").lexically_normal().string());
  EXPECT_EQ(recorded["validation_bytes"], validation_bytes);
  fs::copy(dir / "run", dir / "with", fs::copy_options::recursive);
  fs::copy(dir / "run", dir / "without", fs::copy_options::recursive);
  const WorkingDirectory elsewhere(dir / "elsewhere");
  const auto with =
      run_cli({"train", "--data", (dir / "data.txt").string(), "--resume", (dir / "with").string(),
               "--out", (dir / "with").string(), "--steps", "6"});
  ASSERT_EQ(with.status, 0) << with.err;
  const auto without = run_cli({"train", "--resume", (dir / "without").string(), "--out",
                                (dir / "without").string(), "--steps", "6"});
  ASSERT_EQ(without.status, 0) << without.err;
  EXPECT_NE(without.out.find("resumed at step 3"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("data " + recorded["path"].get<std::string>() + " " + split),
            std::string::npos)
      << without.out;
  for (const char* file :
       {"model.safetensors", "optimizer.safetensors", "train_log.csv", "train_state.json"}) {
    EXPECT_EQ(read_file(dir / "without" / file), read_file(dir / "with" / file)) << file;
  }
  const auto state = nlohmann::json::parse(read_file(dir / "without/train_state.json"));
  EXPECT_EQ(state["step"], 6);
  EXPECT_EQ(state["data"]["validation_bytes"], validation_bytes);
  EXPECT_EQ(state["data"]["fnv1a64"], recorded["fnv1a64"]);
}

// A data file changed or gone since the checkpoint is refused before any training, naming the
// file and the fingerprints (the one recorded, and the one the file has now), and nothing in the
// checkpoint directory changes.
TEST(TrainCli, ResumeRefusesAChangedOrMissingDataFile) {
  test::TempDir dir;
  const std::string text = test::sample_text(4000);
  write_file_atomically(dir / "data.txt", text);
  ASSERT_EQ(run_cli(train_args(dir / "data.txt", dir / "run", "3")).status, 0);
  const auto before = directory_bytes(dir / "run");
  const std::string data = fs::absolute(dir / "data.txt").lexically_normal().string();
  const std::string recorded = std::to_string(fnv1a64(text));
  const std::vector<std::string> resume = {
      "train", "--resume", (dir / "run").string(), "--out", (dir / "run").string(), "--steps", "6"};
  // Changed: one byte more.
  write_file_atomically(dir / "data.txt", text + "x");
  const std::string now = std::to_string(fnv1a64(text + "x"));
  for (const bool give_data : {false, true}) {
    auto args = resume;
    if (give_data) args.insert(args.end(), {"--data", data});
    const auto changed = run_cli(args);
    EXPECT_EQ(changed.status, 1) << changed.err;
    EXPECT_NE(changed.err.find(data +
                               " is not the data this run started with: its FNV-1a 64 "
                               "fingerprint is " +
                               now + ", " + (dir / "run/train_state.json").string() + " records " +
                               recorded),
              std::string::npos)
        << changed.err;
    EXPECT_EQ(directory_bytes(dir / "run"), before);
  }
  // Missing.
  fs::rename(dir / "data.txt", dir / "moved.txt");
  const auto missing = run_cli(resume);
  EXPECT_EQ(missing.status, 1) << missing.err;
  EXPECT_NE(missing.err.find((dir / "run/train_state.json").string() + " records the data file " +
                             data + " (FNV-1a 64 " + recorded + "), which cannot be used: " + data +
                             ": cannot read the data file (does it exist?)"),
            std::string::npos)
      << missing.err;
  EXPECT_EQ(directory_bytes(dir / "run"), before);
  // The same bytes under another name, given with --data, resume the run.
  write_file_atomically(dir / "moved.txt", text);
  auto moved = resume;
  moved.insert(moved.end(), {"--data", (dir / "moved.txt").string()});
  const auto resumed = run_cli(moved);
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resumed at step 3"), std::string::npos) << resumed.out;
}

TEST(ForwardGrad, DumpsLossAndEveryGradient) {
  test::TempDir dir;
  ASSERT_EQ(run_cli({"init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "20", "--mode", "full", "--query-std", "0.5", "--out",
                     (dir / "m").string()})
                .status,
            0);
  const auto run =
      run_cli({"forward", "--model", (dir / "m").string(), "--tokens", "1 2 3", "--grad",
               "--precision", "f64", "--dump", (dir / "g.safetensors").string()});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("nats/token over 2 predicted positions"), std::string::npos) << run.out;
  const auto file = SafetensorsFile::read(dir / "g.safetensors");
  ASSERT_NE(file.find("loss"), nullptr);
  EXPECT_EQ(file.find("loss")->dtype, TensorDType::f64);
  ASSERT_NE(file.find("grad.model.layers.0.mlp_res.query"), nullptr);
  ASSERT_NE(file.find("grad.lm_head.weight"), nullptr);
  EXPECT_EQ(file.find("sublayer_output_grad_rms")->shape, std::vector<std::int64_t>{2});
  EXPECT_NE(file.find("logits"), nullptr);
  const auto one = run_cli({"forward", "--model", (dir / "m").string(), "--tokens", "1", "--grad"});
  EXPECT_EQ(one.status, 2);
  EXPECT_NE(one.err.find("--grad needs at least 2 tokens"), std::string::npos) << one.err;
}

}  // namespace test_train_cli
}  // namespace attnres
