// cli::run: the one table of commands (name, the lines `attnres --help` shows, the function),
// from which the help, the dispatch, the did-you-mean hint and the "expected ..." list of an
// unknown command are made, and the error handling every command shares: how each kind of error
// is printed and which exit status it gives (cli.hpp).
#include "cli.hpp"

#include <boost/program_options/errors.hpp>
#include <filesystem>
#include <iterator>
#include <new>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string_view>

#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/quoted_text.hpp"
#include "attnres/version.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace {

struct Command {
  std::string_view name;
  // What `attnres --help` shows beside the name: lines separated by '\n', wrapped by hand.
  std::string_view summary;
  int (*run)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
  // did_you_mean suggests the first of equally close names; the names keep the order they had
  // there before this table, so that every hint stays as it was ("mst" is as close to `mask` as
  // to `cost`, and suggests `cost`).
  int suggestion_rank;
};

// Every command, in the order of `attnres --help`.
constexpr Command kCommands[] = {
    {"init-model",
     "create a random Llama-style model with AttnRes tensors\n"
     "(config.json + model.safetensors)",
     init_model_command, 0},
    {"forward",
     "run a forward pass (standard / full / block residual) and print\n"
     "per-sublayer norms and the depth-attention weights",
     forward_command, 1},
    {"read",
     "one depth read step by step: sources, scores, softmax, weighted sum\n"
     "and the two-phase merge of read r at token t (docs/math.md §2.2-2.4)",
     read_command, 18},
    {"animate",
     "the depth-attention map animated for slides (query std 0 -> 2, or Block\n"
     "S = 1 .. L): PNG/SVG frames, frames.json, animation.gif",
     animate_command, 19},
    {"export",
     "write a model in Kimi K3's Hugging Face layout (BF16, shards) or the\n"
     "lab's; reads either (docs/interop.md)",
     export_command, 20},
    {"inspect",
     "what a model's depth reads learnt: its AttnRes layout, pseudo-query\n"
     "norms and similarities, and routing statistics over a text",
     inspect_command, 21},
    {"train",
     "train a tiny model on a text file (byte tokens, AdamW); checkpoints,\n"
     "train_log.csv, resumable (docs/training.md)",
     train_command, 9},
    {"mask",
     "history masking on a trained model: remove depth sources from every\n"
     "read, compare the loss change with random masks of equal mass",
     mask_command, 10},
    {"bench", "time whole forward passes (tokens/s) and the depth read's bandwidth", bench_command,
     8},
    {"cost",
     "memory I/O, history, prefill memory, pipeline traffic, FLOPs of each\n"
     "residual scheme for one setting (table, JSON or CSV)",
     cost_command, 2},
    {"strategies",
     "bytes, launches, temporary and saved memory of each implementation\n"
     "strategy (stack, arena, fused), forward and backward; step and decode\n"
     "overheads (docs/math.md §3.6)",
     strategies_command, 13},
    {"layout", "every block against the pipeline's stages (layers, sublayers, lists)",
     layout_command, 11},
    {"recompute", "memory per rank and recompute FLOPs with activation checkpointing",
     recompute_command, 12},
    {"memory",
     "memory per rank under TP/CP/EP/PP/DP, ZeRO and recompute against the\n"
     "device capacity: fits or not, and communication per step",
     memory_command, 15},
    {"calibrate", "modelled vs measured for public AttnRes overhead measurements",
     calibrate_command, 14},
    {"scaling", "the paper's scaling-law fits: compute to reach a loss, multipliers",
     scaling_command, 3},
    {"evidence",
     "published quality against N: the share of Full AttnRes's gain Block\n"
     "AttnRes recovers, by study, and its band at your depth (docs/quality.md)",
     evidence_command, 17},
    {"validate",
     "published, measured training runs against the predicted step time and\n"
     "memory per GPU: typical and worst error by regime (docs/validation.md)",
     validate_command, 23},
    {"sweep", "the cost engine over one parameter or a grid of two (CSV/JSON, chart)",
     sweep_command, 4},
    {"pipeline",
     "simulate a pipelined training iteration (1F1B / interleaved): does\n"
     "the AttnRes traffic hide behind compute? plus the time model",
     pipeline_command, 5},
    {"plan",
     "which N and which parallel settings meet your budgets (AttnRes step\n"
     "overhead, memory, pipeline traffic): the Pareto set and why the others fail",
     plan_command, 16},
    {"metrics", "list the metric keys (JSON paths, CSV rows, sweep metrics)", metrics_command, 6},
    {"report", "run a scenario file: report.md, report.json, CSV tables, PNG/SVG charts",
     report_command, 7},
    {"recover",
     "complete an interrupted write of an output directory (a model, a\n"
     "checkpoint, a report), which commands that only read it refuse",
     recover_command, 22},
};

// Each rank once: the suggestion order is an order of all the commands.
constexpr bool suggestion_ranks_are_an_order() {
  bool taken[std::size(kCommands)] = {};
  for (const Command& command : kCommands) {
    const int rank = command.suggestion_rank;
    if (rank < 0 || rank >= static_cast<int>(std::size(kCommands)) || taken[rank]) return false;
    taken[rank] = true;
  }
  return true;
}
static_assert(suggestion_ranks_are_an_order());

void print_help(std::ostream& out) {
  constexpr std::size_t kNameWidth = 13;  // "  NAME" padded: the summaries start in column 16
  out << "attnres — Attention Residuals lab (reference forward passes, traces)\n\n"
         "usage: attnres <command> [options]\n\n"
         "commands:\n";
  for (const Command& command : kCommands) {
    std::string name(command.name);
    name.resize(kNameWidth, ' ');
    out << "  " << name;
    for (const char c : command.summary) {
      if (c == '\n') {
        out << "\n" << std::string(2 + kNameWidth, ' ');
      } else {
        out << c;
      }
    }
    out << "\n";
  }
  out << "\nRun 'attnres <command> --help' for a command's options.\n";
}

// The did-you-mean candidates for an unknown command, in their suggestion order.
std::vector<std::string> suggestion_candidates() {
  std::vector<std::string> names(std::size(kCommands));
  for (const Command& command : kCommands)
    names[static_cast<std::size_t>(command.suggestion_rank)] = std::string(command.name);
  return names;
}

// "init-model, forward, ... or report": every command, in the order of the help.
std::string command_list() {
  std::string list;
  for (std::size_t i = 0; i < std::size(kCommands); ++i) {
    list += i == 0 ? "" : i + 1 == std::size(kCommands) ? " or " : ", ";
    list += kCommands[i].name;
  }
  return list;
}

}  // namespace

bool wants_json(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--format=json") return true;
    if (args[i] == "--format" && i + 1 < args.size() && args[i + 1] == "json") return true;
  }
  return false;
}

void print_json_error(std::ostream& out, const std::string& message, int exit_status,
                      const char* kind) {
  const nlohmann::ordered_json error = {
      {"schema", schema_tag("error")},
      {"error", {{"message", message}, {"exit_status", exit_status}, {"kind", kind}}}};
  out << error.dump(2) << "\n";
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help(out);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    out << "attnres " << kVersion << "\n";
    return kExitOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string prefix = "attnres " + quoted_text(command) + ": ";
  const bool json = wants_json(rest);
  // The message on stderr and, with --format json, the same message as a JSON error object on
  // stdout (a script reading stdout always gets JSON).
  auto fail = [&](const std::string& message, int status, const char* kind) {
    err << message << "\n";
    if (json) print_json_error(out, message, status, kind);
    return status;
  };
  // One prefix per message: a message that already starts with "COMMAND: " (the trainer's
  // "train: ...", the pipeline's "pipeline: ...") loses it under "attnres COMMAND: ".
  auto text = [&](const char* what) {
    std::string message = printable_text(what);
    const std::string own = printable_text(command) + ": ";
    if (message.rfind(own, 0) == 0) message.erase(0, own.size());
    return message;
  };
  const InterruptScope interrupts;
  try {
    for (const Command& entry : kCommands) {
      if (entry.name == command) return entry.run(rest, out, err);
    }
    const std::string hint = did_you_mean(command, suggestion_candidates());
    return fail("attnres: unknown command '" + quoted_text(command) + "'" +
                    (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; expected " +
                    command_list() + " (see attnres --help)",
                kExitUsage, "usage");
  } catch (const UsageError& error) {
    return fail(
        prefix + text(error.what()) + " (see attnres " + printable_text(command) + " --help)",
        kExitUsage, "usage");
  } catch (const boost::program_options::error& error) {
    // Boost's messages quote the value typed ("the argument ('...') for option '--seq' is
    // invalid"): bounded, so a 10 MB value is not echoed whole.
    std::string message = error.what();
    const auto open = message.find("('"), close = message.rfind("')");
    if (open != std::string::npos && close != std::string::npos && close > open + 2) {
      message = message.substr(0, open + 2) +
                quoted_text(message.substr(open + 2, close - open - 2)) + message.substr(close);
    }
    return fail(prefix + quoted_text(message, 4 * kMaxQuotedBytes) + " (see attnres " +
                    printable_text(command) + " --help)",
                kExitUsage, "usage");
  } catch (const Cancelled& error) {
    return fail(prefix + text(error.what()) + "; nothing was written", kExitInterrupted,
                "cancelled");
  } catch (const Error& error) {
    return fail(prefix + "error: " + text(error.what()), kExitFailure, "error");
  } catch (const std::bad_alloc&) {
    return fail(prefix +
                    "error: out of memory (the model, sequence or sweep is too large for this "
                    "machine; nothing was written)",
                kExitFailure, "error");
  } catch (const std::filesystem::filesystem_error& error) {
    return fail(prefix + "error: " + printable_text(error.code().message()) + ": '" +
                    printable_text(error.path1().string()) + "'",
                kExitFailure, "error");
  } catch (const std::exception& error) {
    return fail(prefix + "internal error: " + text(error.what()), kExitFailure, "error");
  }
}

}  // namespace attnres::cli
