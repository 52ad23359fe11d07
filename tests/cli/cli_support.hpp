// Running the CLI in-process from tests: exit status and both output streams.
#pragma once

#include <gtest/gtest.h>

#include <QImage>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
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
