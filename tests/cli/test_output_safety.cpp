// The CLI never loses a user's files and runs only the command typed: output directories,
// strict flags, exit statuses, safe messages, interrupts (a real subprocess signalled in its
// write phase) and report provenance.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/format.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"
#include "cli_support.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_output_safety {

namespace fs = std::filesystem;
using test::CliRun;
using test::run_cli;
using test::sweep_args;

const std::string kScenario =
    "sections = [\"io\"]\n[model]\nsublayers = 8\nd_model = 16\nblocks = 2\n";

std::vector<std::string> listing(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    names.push_back(entry.path().lexically_relative(directory).generic_string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(OutputSafety, ReportRefusesADirectoryWithTheUsersFilesAndTouchesNothing) {
  // Before: `report study/s.toml --out study` exited 0 and deleted s.toml, notes.txt and data/.
  test::TempDir dir;
  fs::create_directories(dir / "study/data");
  write_file_atomically(dir / "study/s.toml", kScenario);
  write_file_atomically(dir / "study/notes.txt", "notes");
  write_file_atomically(dir / "study/data/points.csv", "1,2");
  const auto before = listing(dir / "study");
  const CliRun run =
      run_cli({"report", (dir / "study/s.toml").string(), "--out", (dir / "study").string()});
  EXPECT_EQ(run.status, cli::kExitFailure);
  EXPECT_NE(
      run.err.find("the directory holds files attnres did not write (data/, notes.txt, s.toml)"),
      std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--force"), std::string::npos) << run.err;
  EXPECT_EQ(listing(dir / "study"), before);

  // --force replaces the contents, but the scenario (an input) survives.
  const CliRun forced = run_cli(
      {"report", (dir / "study/s.toml").string(), "--out", (dir / "study").string(), "--force"});
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(read_file(dir / "study/s.toml"), kScenario);
  EXPECT_FALSE(fs::exists(dir / "study/notes.txt"));
  EXPECT_FALSE(fs::exists(dir / "study/data"));
  EXPECT_TRUE(fs::exists(dir / "study/report.md"));
  // Running again into its own report directory needs no --force.
  const CliRun again =
      run_cli({"report", (dir / "study/s.toml").string(), "--out", (dir / "study").string()});
  EXPECT_EQ(again.status, cli::kExitFailure) << "s.toml is still a file attnres did not write";
  const CliRun elsewhere =
      run_cli({"report", (dir / "study/s.toml").string(), "--out", (dir / "r").string()});
  ASSERT_EQ(elsewhere.status, 0) << elsewhere.err;
  const CliRun rerun =
      run_cli({"report", (dir / "study/s.toml").string(), "--out", (dir / "r").string()});
  ASSERT_EQ(rerun.status, 0) << rerun.err;
}

TEST(OutputSafety, TwoSweepsShareADirectory) {
  // Before: the second sweep replaced the whole directory, deleting the first sweep's files.
  test::TempDir dir;
  ASSERT_EQ(run_cli(sweep_args("io", (dir / "s").string())).status, 0);
  const CliRun second = run_cli(sweep_args("prefill", (dir / "s").string()));
  ASSERT_EQ(second.status, 0) << second.err;
  for (const char* name : {"io.csv", "io.json", "io.png", "io.svg", "prefill.csv", "prefill.json",
                           "prefill.png", "prefill.svg"}) {
    EXPECT_TRUE(fs::exists(dir / "s" / name)) << name;
  }
  // The same name again replaces only its own files.
  ASSERT_EQ(run_cli(sweep_args("io", (dir / "s").string())).status, 0);
  EXPECT_TRUE(fs::exists(dir / "s/prefill.csv"));
}

TEST(OutputSafety, TrailingSlashesDotAndRelativePathsWork) {
  // Before: `--out out/r/` failed with a raw filesystem message and left an empty folder.
  test::TempDir dir;
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  write_file_atomically("s.toml", kScenario);
  const CliRun slash = run_cli({"report", "s.toml", "--out", "out/r/"});
  EXPECT_EQ(slash.status, 0) << slash.err;
  EXPECT_EQ(slash.out.rfind("wrote out/r/report.md", 0), 0u) << slash.out;
  fs::create_directories("here");
  fs::current_path("here");
  const CliRun dot = run_cli(sweep_args("io", "."));
  EXPECT_EQ(dot.status, 0) << dot.err;
  const CliRun dot_slash = run_cli(sweep_args("prefill", "./"));
  EXPECT_EQ(dot_slash.status, 0) << dot_slash.err;
  fs::current_path(previous);
  EXPECT_TRUE(fs::exists(dir / "out/r/report.md"));
  EXPECT_TRUE(fs::exists(dir / "here/io.csv"));
  EXPECT_TRUE(fs::exists(dir / "here/prefill.csv"));
}

TEST(OutputSafety, InitModelFollowsTheSameRule) {
  // Before: init-model wrote into any existing directory.
  test::TempDir dir;
  fs::create_directories(dir / "m");
  write_file_atomically(dir / "m/README", "mine");
  const std::vector<std::string> args = {
      "init-model", "--layers", "1",       "--d-model", "8",     "--heads",           "2",
      "--ffn",      "8",        "--vocab", "8",         "--out", (dir / "m").string()};
  const CliRun refused = run_cli(args);
  EXPECT_EQ(refused.status, cli::kExitFailure);
  EXPECT_NE(refused.err.find("(README)"), std::string::npos) << refused.err;
  EXPECT_EQ(listing(dir / "m"), std::vector<std::string>{"README"});
  auto forced_args = args;
  forced_args.push_back("--force");
  ASSERT_EQ(run_cli(forced_args).status, 0);
  EXPECT_TRUE(fs::exists(dir / "m/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "m/README"));
  ASSERT_EQ(run_cli(args).status, 0) << "its own model directory is replaced without --force";
}

TEST(OutputSafety, NamesWithPathsAreRefused) {
  test::TempDir dir;
  for (const char* name : {"../escape", "a/b", "..", ".hidden"}) {
    const CliRun run = run_cli(sweep_args(name, (dir / "s").string()));
    EXPECT_EQ(run.status, cli::kExitUsage) << name;
    EXPECT_NE(run.err.find("--name"), std::string::npos) << run.err;
  }
  EXPECT_FALSE(fs::exists(dir / "s"));
  EXPECT_FALSE(fs::exists(dir / "escape.csv"));
}

TEST(StrictInputs, StrayArgumentsAreNamed) {
  // Before: `--tokens 1 7 42` ran silently with one token.
  test::TempDir dir;
  ASSERT_EQ(run_cli({"init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "50", "--out", (dir / "m").string()})
                .status,
            0);
  const CliRun run =
      run_cli({"forward", "--model", (dir / "m").string(), "--tokens", "1", "7", "42"});
  EXPECT_EQ(run.status, cli::kExitUsage);
  EXPECT_NE(run.err.find("unexpected argument '7'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("--tokens \"1 7 42\""), std::string::npos) << run.err;
  const CliRun word =
      run_cli({"cost", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "table"});
  EXPECT_EQ(word.status, cli::kExitUsage);
  EXPECT_NE(word.err.find("unexpected argument 'table'"), std::string::npos) << word.err;
  const CliRun two = run_cli({"report", "a.toml", "b.toml", "--out", "x"});
  EXPECT_EQ(two.status, cli::kExitUsage) << two.err;
}

TEST(StrictInputs, FlagsAreNeverGuessedAndMisspellingsGetSuggestions) {
  // Before: Boost accepted `--block` as `--block-size` (prefix guessing).
  const CliRun prefix = run_cli({"cost", "--sublayers", "8", "--block", "2", "--d-model", "16"});
  EXPECT_EQ(prefix.status, cli::kExitUsage);
  EXPECT_NE(prefix.err.find("unknown flag '--block'"), std::string::npos) << prefix.err;
  const CliRun typo = run_cli({"cost", "--sublayers", "8", "--blocks", "2", "--d-modle", "16"});
  EXPECT_NE(typo.err.find("did you mean '--d-model'?"), std::string::npos) << typo.err;
  const CliRun command = run_cli({"reprot"});
  EXPECT_EQ(command.status, cli::kExitUsage);
  EXPECT_NE(command.err.find("did you mean 'report'?"), std::string::npos) << command.err;
  // Case: H100 -> h100 (before: "did you mean 'a100'").
  const CliRun hardware = run_cli(
      {"pipeline", "--layers", "4", "--block-size", "2", "--d-model", "64", "--hardware", "H100"});
  EXPECT_EQ(hardware.status, cli::kExitUsage);
  EXPECT_NE(hardware.err.find("did you mean 'h100'?"), std::string::npos) << hardware.err;
  EXPECT_EQ(did_you_mean("h100", {"a100", "h100", "h200"}), "")
      << "never 'did you mean X' for X itself";
  const CliRun dtype =
      run_cli({"cost", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--dtype", "BF16"});
  EXPECT_NE(dtype.err.find("did you mean 'bf16'?"), std::string::npos) << dtype.err;
}

TEST(StrictInputs, ContradictoryOptionsAreErrors) {
  test::TempDir dir;
  ASSERT_EQ(run_cli({"init-model", "--layers", "2", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "50", "--out", (dir / "m").string()})
                .status,
            0);
  const std::string model = (dir / "m").string();
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"forward", "--model", model, "--tokens", "1", "--mode", "full", "--zero-placeholder"},
       "--zero-placeholder applies to Block AttnRes"},
      {{"forward", "--model", model, "--tokens", "1", "--mode", "standard", "--block-size", "2"},
       "--block-size applies to Block AttnRes"},
      {{"forward", "--model", model, "--tokens", "1", "--block-size", "2"},
       "the model's mode standard is not block"},
      {{"forward", "--model", model, "--tokens", "1,,2"}, "empty token id"},
      {{"forward", "--model", model, "--tokens", "1,2,"}, "ends with a comma"},
      {{"forward", "--model", model, "--tokens", "1", "--mode", "full", "--schedule-block", "5"},
       "--schedule-block 5 is larger than L = 4"},
      {{"forward", "--model", model, "--tokens", "1", "--mode", "block", "--block-size", "2",
        "--schedule-block", "2"},
       "--schedule-block applies to Full AttnRes"},
      {{"forward", "--model", model, "--tokens", "1", "--two-phase", "off"},
       "--two-phase applies to Full and Block"},
      {{"forward", "--model", model, "--tokens", "1", "--dump", model + "/model.safetensors"},
       "would overwrite"},
      {{"forward", "--model", model, "--tokens", "1", "--dump", (dir / "a").string(), "--trace",
        (dir / "a").string()},
       "name the same file"},
      {{"init-model", "--layers", "2", "--d-model", "8", "--heads", "2", "--ffn", "8", "--vocab",
        "50", "--mode", "full", "--block-size", "2", "--out", (dir / "x").string()},
       "--block-size applies to --mode block"},
      {{"pipeline", "--layers", "4", "--block-size", "2", "--d-model", "64", "--active-experts",
        "8"},
       "--active-experts: active applies to a mixture of experts: give the routed experts"},
      {{"pipeline", "--layers", "4", "--block-size", "2", "--d-model", "64", "--expert-ffn", "8"},
       "(experts >= 1)"},
      {{"cost", "--layers", "4", "--block-size", "2", "--d-model", "64", "--tp", "2"},
       "--tp does not change the cost report"},
      {{"layout", "--layers", "4", "--block-size", "2", "--d-model", "64", "--attention", "mqa"},
       "--attention does not change the layout"},
      {{"memory", "--layers", "4", "--block-size", "2", "--d-model", "64", "--workload",
        "inference", "--zero", "1", "--dp", "2"},
       "--zero describes training"},
      {{"pipeline", "--layers", "4", "--block-size", "2", "--d-model", "64", "--pp", "2",
        "--link-bandwidth", "5", "--ideal-links"},
       "contradict each other"},
      {{"sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x", "blocks",
        "--values", "1,2", "--metric", "io_multiples_of_d.mhc", "--format", "json", "--out",
        (dir / "s").string()},
       "--format json prints the sweep"},
      {{"sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x", "blocks",
        "--values", "1,2", "--y-values", "1,2", "--metric", "io_multiples_of_d.mhc"},
       "--y-values needs --y"},
      {{"sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x", "blocks",
        "--values", "1,2", "--metric", "io_multiples_of_d.mhc", "--force"},
       "--force applies to --out"},
  };
  for (const auto& c : cases) {
    const CliRun run = run_cli(c.args);
    EXPECT_EQ(run.status, cli::kExitUsage) << c.needle << ": " << run.err;
    EXPECT_NE(run.err.find(c.needle), std::string::npos) << run.err;
  }
  EXPECT_FALSE(fs::exists(dir / "s") || fs::exists(dir / "x") || fs::exists(dir / "a"));
}

TEST(StrictInputs, SweepGridsAreCapped) {
  const std::vector<std::string> grid = {"sweep",
                                         "--sublayers",
                                         "8",
                                         "--blocks",
                                         "2",
                                         "--d-model",
                                         "16",
                                         "--x",
                                         "d_model",
                                         "--values",
                                         "1:3000",
                                         "--y",
                                         "tokens",
                                         "--y-values",
                                         "1:1000",
                                         "--metric",
                                         "io_multiples_of_d.mhc"};
  const CliRun capped = run_cli(grid);
  EXPECT_EQ(capped.status, cli::kExitUsage);
  EXPECT_NE(capped.err.find("3000 x 1000 settings, more than --max-points 2000000"),
            std::string::npos)
      << capped.err;
  auto small = grid;
  small[10] = "1:30";
  small[14] = "1:10";
  small.insert(small.end(), {"--max-points", "299"});
  EXPECT_EQ(run_cli(small).status, cli::kExitUsage);
  small.back() = "300";
  const CliRun ok = run_cli(small);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(std::count(ok.out.begin(), ok.out.end(), '\n'), 301);  // header + 300 rows, streamed
}

TEST(SafeMessages, AHostileConfigJsonGivesAValidUtf8Message) {
  // Before: the JSON parser's message echoed the key's raw bytes (invalid UTF-8, an escape).
  test::TempDir dir;
  ASSERT_EQ(run_cli({"init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "50", "--out", (dir / "m").string()})
                .status,
            0);
  write_file_atomically(dir / "m/config.json",
                        "{\"hidden\xff\x1b]0;pwned\x07_size\": 8, \"\xc3\x28\": 1}\n");
  const CliRun run = run_cli({"forward", "--model", (dir / "m").string(), "--tokens", "1"});
  EXPECT_EQ(run.status, cli::kExitFailure);
  EXPECT_EQ(printable_text(run.err), run.err) << run.err;
  EXPECT_EQ(run.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(run.err.find('\x07'), std::string::npos);
  EXPECT_NE(run.err.find("config.json"), std::string::npos) << run.err;
}

// ASan reserves terabytes of address space.
using test::kAddressSanitizer;

TEST(SafeMessages, RunningOutOfMemoryIsReportedInOurWords) {
  // Before: "internal error: std::bad_alloc". A child process limited to 1 GiB of address space
  // runs a reference-engine forward pass whose T x T attention scores (T = 30000) need 3.6 GB
  // (the fast engine needs no such matrix and would succeed).
  if (kAddressSanitizer)
    GTEST_SKIP() << "an address-space limit does not work under AddressSanitizer";
  test::TempDir dir;
  ASSERT_EQ(run_cli({"init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8",
                     "--vocab", "50", "--out", (dir / "m").string()})
                .status,
            0);
  std::string tokens;
  for (int t = 0; t < 30000; ++t) tokens += "7 ";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    rlimit limit{1L << 30, 1L << 30};
    setrlimit(RLIMIT_AS, &limit);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    const std::string model = (dir / "m").string();
    std::ostringstream out, err;
    const int status = cli::run(
        {"forward", "--model", model, "--tokens", tokens, "--engine", "reference"}, out, err);
    const std::string text = err.str();
    if (::write(2, text.data(), text.size()) < 0) _exit(99);
    _exit(status);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << message;
  EXPECT_EQ(WEXITSTATUS(status), cli::kExitFailure) << message;
  EXPECT_NE(message.find("error: out of memory"), std::string::npos) << message;
  EXPECT_EQ(message.find("bad_alloc"), std::string::npos) << message;
}

TEST(Provenance, ReportFilesSayWhatProducedThem) {
  test::TempDir dir;
  write_file_atomically(dir / "s.toml", kScenario);
  ASSERT_EQ(run_cli({"report", (dir / "s.toml").string(), "--out", (dir / "r").string()}).status,
            0);
  const auto json = nlohmann::json::parse(read_file(dir / "r/report.json"));
  EXPECT_EQ(json["provenance"]["scenario_text"], kScenario);
  EXPECT_EQ(json["provenance"]["version"],
            run_cli({"--version"}).out.substr(8, run_cli({"--version"}).out.size() - 9));
  EXPECT_NE(read_file(dir / "r/report.md").find("## Provenance"), std::string::npos);
}

// Runs the real binary with the write-phase hold, signals it once it is in that phase, and
// returns its exit status; the directory must then hold no staging folder.
int interrupt_in_write_phase(const std::vector<std::string>& args, const fs::path& hold,
                             int signal_number) {
  const pid_t child = test::spawn_cli(args, "ATTNRES_TEST_HOLD_WRITE", hold.string());
  // Wait (bounded) for the child to reach the write phase; this is not a timing assertion.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(hold) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(fs::exists(hold)) << "the command never reached its write phase";
  kill(child, signal_number);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool has_staging(const fs::path& directory) {
  if (!fs::exists(directory)) return false;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.path().filename().string().find("staging") != std::string::npos ||
        entry.path().filename().string().find(".partial") != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(Interrupts, SigintDuringAReportsWritePhaseLeavesNothing) {
  test::TempDir dir;
  write_file_atomically(dir / "s.toml", kScenario);
  const int status = interrupt_in_write_phase(
      {"report", (dir / "s.toml").string(), "--out", (dir / "r").string()}, dir / "hold", SIGINT);
  EXPECT_EQ(status, 130);
  EXPECT_FALSE(fs::exists(dir / "r")) << "the directory it created is gone again";
  EXPECT_FALSE(has_staging(dir.path()));
}

TEST(Interrupts, SigtermDuringASweepsWritePhaseKeepsTheOtherSweep) {
  test::TempDir dir;
  ASSERT_EQ(run_cli(sweep_args("io", (dir / "s").string())).status, 0);
  const auto before = listing(dir / "s");
  const std::string csv = read_file(dir / "s/io.csv");
  auto args = sweep_args("prefill", (dir / "s").string());
  const int status = interrupt_in_write_phase(args, dir / "hold", SIGTERM);
  EXPECT_EQ(status, 130);
  EXPECT_EQ(listing(dir / "s"), before);
  EXPECT_EQ(read_file(dir / "s/io.csv"), csv);
  EXPECT_FALSE(has_staging(dir / "s"));
}

TEST(Interrupts, AForwardPassStopsWhenAskedTo) {
  const ModelWeights<double> model = random_model(test::model_config(3, 8, 2, 2, 8, 16), {});
  ForwardOptions options;
  std::vector<std::size_t> calls;
  options.progress = [&](std::size_t done, std::size_t total) {
    EXPECT_EQ(total, 6u);
    calls.push_back(done);
    return done < 2;  // stop before the third sublayer
  };
  EXPECT_THROW(forward(model, {1, 2, 3}, options), Cancelled);
  EXPECT_EQ(calls, (std::vector<std::size_t>{0, 1, 2}));
}

}  // namespace test_output_safety
}  // namespace attnres
