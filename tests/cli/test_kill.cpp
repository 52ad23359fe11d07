// Kill it at any moment (docs/output-safety.md): the real `attnres` program is SIGKILLed at every
// step of its directory commits in turn (the test hook ATTNRES_TEST_KILL_AT=N kills it at the N-th
// step, so every window between two steps is hit once, deterministically, without sleeps). After
// each kill the directory holds exactly the old set or exactly the new one once the next command
// has looked at it, that next command works without --force, and a killed training run resumed
// (also in chains of kill, resume, kill) ends bit-identical to one that was never interrupted.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "attnres/atomic_file.hpp"
#include "attnres/output_dir.hpp"
#include "cli_support.hpp"
#include "test_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_kill {

namespace fs = std::filesystem;

struct Outcome {
  bool killed = false;  // by SIGKILL (the hook)
  int status = -1;      // exit status otherwise
};

// Runs the CLI binary with ATTNRES_TEST_KILL_AT=kill_at (0: no kill), output discarded.
Outcome run_binary(const std::vector<std::string>& args, long kill_at) {
  const pid_t child = kill_at > 0
                          ? test::spawn_cli(args, "ATTNRES_TEST_KILL_AT", std::to_string(kill_at))
                          : test::spawn_cli(args);
  int status = 0;
  waitpid(child, &status, 0);
  Outcome outcome;
  outcome.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

// The user-visible files of a directory (attnres's bookkeeping left out) and their bytes.
std::map<std::string, std::string> files_of(const fs::path& directory) {
  std::map<std::string, std::string> files;
  if (!fs::exists(directory)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    if (name.rfind(".attnres", 0) == 0) continue;
    if (entry.is_regular_file()) files[name] = read_file(entry.path());
  }
  return files;
}

// Leftovers of attnres's own at the top of a directory (staging folders, commit records,
// temporary files); the marker itself is expected.
std::vector<std::string> leftovers(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".attnres", 0) == 0 && name != kOutputMarkerName) names.push_back(name);
  }
  return names;
}

std::vector<std::string> train_args(const fs::path& data, const fs::path& out) {
  return {"train", "--layers", "1",           "--d-model",    "8",     "--heads",
          "2",     "--ffn",    "8",           "--mode",       "block", "--block-size",
          "1",     "--data",   data.string(), "--steps",      "4",     "--seq",
          "8",     "--batch",  "1",           "--eval-every", "2",     "--threads",
          "1",     "--out",    out.string()};
}

std::vector<std::string> resume_args(const fs::path& data, const fs::path& out) {
  return {"train", "--data", data.string(), "--resume", out.string(), "--out", out.string()};
}

TEST(Kill, EveryCommitStepOfTrainingResumesBitIdentical) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(2000));
  ASSERT_EQ(run_binary(train_args(dir / "data.txt", dir / "straight"), 0).status, 0);
  const auto straight = files_of(dir / "straight");
  ASSERT_EQ(straight.size(), 5u);

  int kills = 0;
  for (long at = 1;; ++at) {
    const fs::path run = dir / ("cut" + std::to_string(at));
    const Outcome first = run_binary(train_args(dir / "data.txt", run), at);
    if (!first.killed) {
      EXPECT_EQ(first.status, 0);
      break;  // past the last commit step
    }
    ++kills;
    // The first checkpoint may not have been switched in yet: then the run starts over.
    const bool has_checkpoint = [&] {
      recover_output_directory(run);  // completes an interrupted commit
      return fs::exists(run / "train_state.json");
    }();
    const Outcome next = has_checkpoint ? run_binary(resume_args(dir / "data.txt", run), 0)
                                        : run_binary(train_args(dir / "data.txt", run), 0);
    ASSERT_EQ(next.status, 0) << "kill at step " << at;
    EXPECT_EQ(files_of(run), straight) << "kill at step " << at;
    EXPECT_EQ(leftovers(run), std::vector<std::string>{}) << "kill at step " << at;
    ASSERT_LT(at, 200) << "the kill hook never stopped killing";
  }
  EXPECT_GE(kills, 10);  // three checkpoints (steps 2, 4 and the end), several steps each
}

TEST(Kill, ChainsOfKillsAndResumesEndBitIdentical) {
  test::TempDir dir;
  write_file_atomically(dir / "data.txt", test::sample_text(2000));
  ASSERT_EQ(run_binary(train_args(dir / "data.txt", dir / "straight"), 0).status, 0);
  const auto straight = files_of(dir / "straight");
  for (const long at : {2L, 3L, 5L}) {
    const fs::path run = dir / ("chain" + std::to_string(at));
    // Every run of the chain is killed at the same step of its own commits until one finishes.
    Outcome outcome = run_binary(train_args(dir / "data.txt", run), at);
    int links = 1;
    while (outcome.killed && links < 30) {
      bool has_checkpoint = false;
      {
        recover_output_directory(run);
        has_checkpoint = fs::exists(run / "train_state.json");
      }
      outcome = has_checkpoint ? run_binary(resume_args(dir / "data.txt", run), at)
                               : run_binary(train_args(dir / "data.txt", run), at);
      ++links;
    }
    ASSERT_FALSE(outcome.killed) << "the chain at " << at << " never finished";
    ASSERT_EQ(outcome.status, 0);
    EXPECT_GE(links, 2) << at;
    EXPECT_EQ(files_of(run), straight) << "chain killed at step " << at;
  }
}

// For report-like writers: the old set or the new one, never a mix, and the next run works.
// Kill steps 1, 2, 3 (before the record, at it, at the first move) and then every `stride`-th.
void expect_old_or_new(const std::vector<std::string>& first_args,
                       const std::vector<std::string>& second_args, const fs::path& out,
                       long stride = 1) {
  ASSERT_EQ(run_binary(first_args, 0).status, 0);
  const auto old_set = files_of(out);
  const fs::path copy = out.string() + ".old";
  fs::copy(out, copy, fs::copy_options::recursive);
  ASSERT_EQ(run_binary(second_args, 0).status, 0);
  const auto new_set = files_of(out);
  ASSERT_NE(old_set, new_set);
  int saw_old = 0, saw_new = 0;
  for (long at = 1;; at += at < 3 ? 1 : stride) {
    fs::remove_all(out);
    fs::copy(copy, out, fs::copy_options::recursive);
    const Outcome outcome = run_binary(second_args, at);
    if (!outcome.killed) break;
    std::map<std::string, std::string> seen;
    {
      recover_output_directory(out);
      seen = files_of(out);
    }
    if (seen == old_set) {
      ++saw_old;
    } else if (seen == new_set) {
      ++saw_new;
    } else {
      ADD_FAILURE() << "kill at step " << at << " left a mix of the old and the new files";
    }
    ASSERT_EQ(run_binary(second_args, 0).status, 0) << "the next run after a kill at " << at;
    EXPECT_EQ(files_of(out), new_set);
    EXPECT_EQ(leftovers(out), std::vector<std::string>{});
    ASSERT_LT(at, 500);
  }
  EXPECT_GE(saw_old, 1);
  EXPECT_GE(saw_new, 1);
}

TEST(Kill, InitModelOverAModelOfAnotherShapeIsTheOldOrTheNewModel) {
  test::TempDir dir;
  const std::string out = (dir / "m").string();
  expect_old_or_new({"init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "20", "--out", out},
                    {"init-model", "--layers", "2", "--d-model", "16", "--heads", "2", "--ffn",
                     "16", "--vocab", "30", "--mode", "full", "--out", out},
                    out);
}

TEST(Kill, ASweepIsTheOldOrTheNewSet) {
  test::TempDir dir;
  const std::string out = (dir / "s").string();
  expect_old_or_new(test::sweep_args("io", out, "1,2"), test::sweep_args("io", out, "1,2,4,8"),
                    out);
}

TEST(Kill, AReportIsTheOldOrTheNewSet) {
  test::TempDir dir;
  const std::string out = (dir / "r").string();
  const std::string scenarios = ATTNRES_SCENARIOS_DIR;
  expect_old_or_new({"report", scenarios + "/paper-table1.toml", "--out", out},
                    {"report", scenarios + "/pipeline-cache.toml", "--out", out}, out,
                    /*stride=*/4);
}

}  // namespace test_kill
}  // namespace attnres
