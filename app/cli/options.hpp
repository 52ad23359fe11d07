// Small helpers shared by the CLI commands: Boost.Program_options parsing with one error style.
#pragma once

#include <boost/program_options.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace attnres::cli {

namespace po = boost::program_options;

// Parses `args` against `options`; positional arguments are not accepted. Boost's errors (unknown
// flag, missing required flag, malformed value) propagate as po::error and become exit status 2.
inline po::variables_map parse_options(const std::vector<std::string>& args,
                                       const po::options_description& options) {
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).run(), values);
  return values;
}

// True (and prints the help) when --help was given; call before po::notify so that required
// flags do not get in the way of --help.
inline bool wants_help(const po::variables_map& values, const std::string& usage,
                       const po::options_description& options, std::ostream& out) {
  if (!values.count("help")) return false;
  out << usage << "\n" << options << "\n";
  return true;
}

}  // namespace attnres::cli
