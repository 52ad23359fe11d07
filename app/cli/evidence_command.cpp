// attnres evidence: the published quality evidence for Block AttnRes against N and its band at a
// depth (docs/quality.md): which share of Full AttnRes's gain over the standard residual Block
// AttnRes recovers at each N, by whom it was measured, and where the setting lies outside it.
#include <ostream>

#include "attnres/published_quality.hpp"
#include "attnres/report.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "table_output.hpp"

namespace attnres::cli {

int evidence_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  int sublayers = 0, layers = 0, blocks = 0;
  TableFormat format;
  po::options_description options = command_options("evidence");
  options.add_options()("sublayers", po::value(&sublayers),
                        "L, the model's sublayers (2 per layer); default 32, the paper's ablation")(
      "layers", po::value(&layers), "transformer layers (L = 2 x layers), instead of --sublayers")(
      "blocks", po::value(&blocks), "the N to state the band at (1 .. L); default: none marked");
  add_table_format_option(options, format);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres evidence [--sublayers L | --layers N] [--blocks N] "
                    "[--format table|markdown|json|csv [--table "
                    "quality_studies|quality_sources|quality_band]]")) {
    return kExitOk;
  }
  require_table_format(format);
  if (given(values, "sublayers") && given(values, "layers"))
    throw UsageError("give --sublayers or --layers, not both");
  if (given(values, "layers")) {
    if (layers < 1) throw UsageError("--layers must be >= 1, got " + std::to_string(layers));
    sublayers = 2 * layers;
  } else if (!given(values, "sublayers")) {
    sublayers = 32;
  }
  if (sublayers < 1 || sublayers > kMaxQualitySublayers) {
    throw UsageError("--sublayers must be between 1 and " + std::to_string(kMaxQualitySublayers) +
                     ", got " + std::to_string(sublayers));
  }
  if (given(values, "blocks") && (blocks < 1 || blocks > sublayers)) {
    throw UsageError("--blocks must be between 1 and L = " + std::to_string(sublayers) + ", got " +
                     std::to_string(blocks));
  }
  Report report;
  add_quality_section(sublayers, blocks, report);
  if (format.format == "table" || format.format == "markdown") {
    for (const auto& words : report.conclusions) out << words << "\n";
  }
  print_in_format(out, report.tables, format,
                  {"evidence", {{"sublayers", sublayers}, {"blocks", blocks}}});
  return kExitOk;
}

}  // namespace attnres::cli
