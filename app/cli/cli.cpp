#include "cli.hpp"

#include <boost/program_options/errors.hpp>
#include <charconv>
#include <ostream>

#include "attnres/error.hpp"

namespace attnres::cli {

namespace {

void print_help(std::ostream& out) {
  out << "attnres — Attention Residuals lab (reference forward passes, traces)\n\n"
         "usage: attnres <command> [options]\n\n"
         "commands:\n"
         "  init-model   create a random Llama-style model with AttnRes tensors\n"
         "               (config.json + model.safetensors)\n"
         "  forward      run a forward pass (standard / full / block residual) and print\n"
         "               per-sublayer norms and the depth-attention weights\n"
         "  cost         memory I/O, history, prefill memory, pipeline traffic, FLOPs of each\n"
         "               residual scheme for one setting (table, JSON or CSV)\n"
         "  scaling      the paper's scaling-law fits: compute to reach a loss, multipliers\n"
         "  sweep        the cost engine over one parameter or a grid of two (CSV/JSON, chart)\n"
         "  pipeline     simulate a pipelined training iteration (1F1B / interleaved): does\n"
         "               the AttnRes traffic hide behind compute? plus the time model\n"
         "  metrics      list the metric keys (JSON paths, CSV rows, sweep metrics)\n"
         "  report       run a scenario file: report.md, report.json, CSV tables, PNG/SVG charts\n\n"
         "Run 'attnres <command> --help' for a command's options.\n";
}

}  // namespace

std::vector<int> parse_token_ids(const std::string& text, const std::string& flag) {
  std::vector<int> ids;
  std::size_t position = 0;
  int index = 0;
  while (position < text.size()) {
    const char c = text[position];
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      ++position;
      continue;
    }
    std::size_t end = position;
    while (end < text.size() && text[end] != ' ' && text[end] != ',' && text[end] != '\t' &&
           text[end] != '\n') {
      ++end;
    }
    const std::string word = text.substr(position, end - position);
    int value = 0;
    const auto [ptr, error] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (error != std::errc() || ptr != word.data() + word.size() || value < 0) {
      throw UsageError(flag + ": '" + word + "' (token " + std::to_string(index) +
                       ") is not a token id; expected non-negative integers separated by spaces "
                       "or commas");
    }
    ids.push_back(value);
    ++index;
    position = end;
  }
  if (ids.empty()) throw UsageError(flag + ": no token ids given");
  return ids;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help(out);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    out << "attnres 0.1.0\n";
    return kExitOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "init-model") return init_model_command(rest, out, err);
    if (command == "forward") return forward_command(rest, out, err);
    if (command == "cost") return cost_command(rest, out, err);
    if (command == "scaling") return scaling_command(rest, out, err);
    if (command == "sweep") return sweep_command(rest, out, err);
    if (command == "report") return report_command(rest, out, err);
    if (command == "pipeline") return pipeline_command(rest, out, err);
    if (command == "metrics") return metrics_command(rest, out, err);
    err << "attnres: unknown command '" << command
        << "' (expected init-model, forward, cost, scaling, sweep, pipeline, metrics or report; see attnres --help)\n";
    return kExitUsage;
  } catch (const UsageError& error) {
    err << "attnres " << command << ": " << error.what() << " (see attnres " << command
        << " --help)\n";
    return kExitUsage;
  } catch (const boost::program_options::error& error) {
    err << "attnres " << command << ": " << error.what() << " (see attnres " << command
        << " --help)\n";
    return kExitUsage;
  } catch (const Error& error) {
    err << "attnres " << command << ": error: " << error.what() << "\n";
    return kExitFailure;
  } catch (const std::exception& error) {
    err << "attnres " << command << ": internal error: " << error.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace attnres::cli
