// Running the CLI in-process from tests: exit status and both output streams.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <QImage>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace attnres::test {

struct CliRun {
  int status;
  std::string out;
  std::string err;
};

inline CliRun run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = cli::run(args, out, err);
  return {status, out.str(), err.str()};
}

#ifdef ATTNRES_CLI_BINARY
// Starts the attnres program (not in-process: tests that signal or kill it) with `args`, the
// `environment` added to its own, its standard output and error written to `out` and `err`
// (/dev/null when empty). Returns the child's pid.
inline pid_t spawn_cli(const std::vector<std::string>& args,
                       const std::vector<std::pair<std::string, std::string>>& environment,
                       const std::string& out = {}, const std::string& err = {}) {
  const pid_t child = fork();
  if (child == 0) {
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    const int o =
        ::open(out.empty() ? "/dev/null" : out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e =
        ::open(err.empty() ? "/dev/null" : err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::string binary = ATTNRES_CLI_BINARY;
    std::vector<std::string> copies = args;
    std::vector<char*> argv{binary.data()};
    for (auto& a : copies) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return child;
}

// The same with its output discarded and `variable`=`value` in its environment when a variable
// is given.
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::string& variable = {},
                       const std::string& value = {}) {
  std::vector<std::pair<std::string, std::string>> environment;
  if (!variable.empty()) environment.emplace_back(variable, value);
  return spawn_cli(args, environment);
}
#endif

// `attnres train` of a tiny model (1 layer, d_model 16, 2 heads, ffn 24, one thread) on `data`
// into `out`: `steps` steps of `batch` sequences of 16 bytes, with the flags `extra`.
inline std::vector<std::string> tiny_train_args(const std::filesystem::path& data,
                                                const std::filesystem::path& out, int steps,
                                                int batch,
                                                const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"train",
                                   "--layers",
                                   "1",
                                   "--d-model",
                                   "16",
                                   "--heads",
                                   "2",
                                   "--ffn",
                                   "24",
                                   "--data",
                                   data.string(),
                                   "--steps",
                                   std::to_string(steps),
                                   "--seq",
                                   "16",
                                   "--batch",
                                   std::to_string(batch),
                                   "--threads",
                                   "1",
                                   "--out",
                                   out.string()};
  args.insert(args.end() - 2, extra.begin(), extra.end());
  return args;
}

// A sweep of the block-size I/O metric over `values` into `out`, named `name`.
inline std::vector<std::string> sweep_args(const std::string& name, const std::string& out,
                                           const std::string& values = "1,2,4") {
  return {"sweep",
          "--sublayers",
          "8",
          "--blocks",
          "2",
          "--d-model",
          "16",
          "--x",
          "blocks",
          "--values",
          values,
          "--metric",
          "io_multiples_of_d.block_two_phase",
          "--name",
          name,
          "--out",
          out};
}

// A PNG at least 600 pixels wide that is not one flat colour (more than 5 colours on a 7-px grid).
inline void expect_non_blank_png(const std::filesystem::path& path) {
  QImage image(QString::fromStdString(path.string()));
  ASSERT_FALSE(image.isNull()) << path;
  EXPECT_GE(image.width(), 600);
  std::set<QRgb> colours;
  for (int y = 0; y < image.height(); y += 7) {
    for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 5u) << path << " looks blank";
}

// A random Block AttnRes model (L = 4 sublayers, d = 32, query std 1) written by `init-model` into
// DIR/m; the tests of forward, bench and --chart read it. Returns its directory.
inline std::string make_block_test_model(const std::filesystem::path& dir, int block_size) {
  const std::string path = (dir / "m").string();
  const CliRun made = run_cli({"init-model",
                               "--layers",
                               "2",
                               "--d-model",
                               "32",
                               "--heads",
                               "4",
                               "--kv-heads",
                               "2",
                               "--ffn",
                               "40",
                               "--vocab",
                               "50",
                               "--mode",
                               "block",
                               "--block-size",
                               std::to_string(block_size),
                               "--seed",
                               "4",
                               "--query-std",
                               "1",
                               "--weight-std",
                               "0.3",
                               "--out",
                               path});
  EXPECT_EQ(made.status, 0) << made.err;
  return path;
}

}  // namespace attnres::test
