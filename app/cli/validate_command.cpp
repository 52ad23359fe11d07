// attnres validate: the validation suite (docs/validation.md) — published, measured training runs
// predicted by the same step and memory functions `pipeline` and `memory` use, with the typical
// and worst error by regime and the runs the engine cannot express.
#include <ostream>

#include "attnres/json_reading.hpp"
#include "attnres/report.hpp"
#include "attnres/validation.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string suite_file;
  TableFormat format;
  po::options_description options = command_options("validate");
  options.add_options()("suite", po::value(&suite_file),
                        "a suite file of the same form instead of the built-in one "
                        "(resources/validation/training-runs.toml)");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres validate [--suite FILE.toml] [--format "
                    "table|markdown|json|csv [--table "
                    "validation_summary|validation_runs|validation_not_expressible]]\n"
                    "Published, measured training runs against the predicted step time and "
                    "memory per GPU, with the typical and worst error by regime "
                    "(docs/validation.md).")) {
    return kExitOk;
  }
  require_table_format(format);
  const ValidationSuite suite =
      given(values, "suite")
          ? parse_validation_suite(read_document(suite_file, "a validation suite .toml file"),
                                   suite_file)
          : builtin_validation_suite();
  const std::vector<ValidationResult> results = validate(suite);
  Report report;
  add_validation_section(results, report);
  print_in_format(out, report.tables, format,
                  {"validate", {{"suite", suite.source}, {"runs", suite.runs.size()}}});
  return kExitOk;
}

}  // namespace attnres::cli
