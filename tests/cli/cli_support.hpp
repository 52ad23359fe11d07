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

}  // namespace attnres::test
