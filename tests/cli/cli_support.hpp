// Running the CLI in-process from tests: exit status and both output streams.
#pragma once

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

}  // namespace attnres::test
