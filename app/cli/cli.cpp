#include "cli.hpp"

#include <boost/program_options/errors.hpp>
#include <filesystem>
#include <new>
#include <ostream>

#include "attnres/cancel.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/version.hpp"
#include "progress.hpp"

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
         "  train        train a tiny model on a text file (byte tokens, AdamW); checkpoints,\n"
         "               train_log.csv, resumable (docs/training.md)\n"
         "  mask         history masking on a trained model: remove depth sources from every\n"
         "               read, compare the loss change with random masks of equal mass\n"
         "  bench        time whole forward passes (tokens/s) and the depth read's bandwidth\n"
         "  cost         memory I/O, history, prefill memory, pipeline traffic, FLOPs of each\n"
         "               residual scheme for one setting (table, JSON or CSV)\n"
         "  strategies   bytes, launches, temporary and saved memory of each implementation\n"
         "               strategy (stack, arena, fused), forward and backward; step and decode\n"
         "               overheads (docs/math.md §3.6)\n"
         "  layout       every block against the pipeline's stages (layers, sublayers, lists)\n"
         "  recompute    memory per rank and recompute FLOPs with activation checkpointing\n"
         "  calibrate    modelled vs measured for public AttnRes overhead measurements\n"
         "  scaling      the paper's scaling-law fits: compute to reach a loss, multipliers\n"
         "  sweep        the cost engine over one parameter or a grid of two (CSV/JSON, chart)\n"
         "  pipeline     simulate a pipelined training iteration (1F1B / interleaved): does\n"
         "               the AttnRes traffic hide behind compute? plus the time model\n"
         "  metrics      list the metric keys (JSON paths, CSV rows, sweep metrics)\n"
         "  report       run a scenario file: report.md, report.json, CSV tables, PNG/SVG "
         "charts\n\n"
         "Run 'attnres <command> --help' for a command's options.\n";
}

}  // namespace

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
  const std::string prefix = "attnres " + printable_text(command) + ": ";
  const InterruptScope interrupts;
  try {
    if (command == "init-model") return init_model_command(rest, out, err);
    if (command == "forward") return forward_command(rest, out, err);
    if (command == "cost") return cost_command(rest, out, err);
    if (command == "scaling") return scaling_command(rest, out, err);
    if (command == "sweep") return sweep_command(rest, out, err);
    if (command == "report") return report_command(rest, out, err);
    if (command == "pipeline") return pipeline_command(rest, out, err);
    if (command == "strategies") return strategies_command(rest, out, err);
    if (command == "layout") return layout_command(rest, out, err);
    if (command == "recompute") return recompute_command(rest, out, err);
    if (command == "calibrate") return calibrate_command(rest, out, err);
    if (command == "metrics") return metrics_command(rest, out, err);
    if (command == "bench") return bench_command(rest, out, err);
    if (command == "train") return train_command(rest, out, err);
    if (command == "mask") return mask_command(rest, out, err);
    const std::vector<std::string> commands = {
        "init-model", "forward", "cost", "scaling", "sweep",     "pipeline",   "metrics",  "report",
        "bench",      "train",   "mask", "layout",  "recompute", "strategies", "calibrate"};
    const std::string hint = did_you_mean(command, commands);
    err << "attnres: unknown command '" << printable_text(command) << "'"
        << (hint.empty() ? "" : " (did you mean '" + hint + "'?)")
        << "; expected init-model, forward, train, mask, bench, cost, strategies, layout, "
           "recompute, calibrate, scaling, sweep, pipeline, metrics or report "
           "(see attnres --help)\n";
    return kExitUsage;
  } catch (const UsageError& error) {
    err << prefix << printable_text(error.what()) << " (see attnres " << printable_text(command)
        << " --help)\n";
    return kExitUsage;
  } catch (const boost::program_options::error& error) {
    err << prefix << printable_text(error.what()) << " (see attnres " << printable_text(command)
        << " --help)\n";
    return kExitUsage;
  } catch (const Cancelled& error) {
    err << prefix << printable_text(error.what()) << "; nothing was written\n";
    return kExitInterrupted;
  } catch (const Error& error) {
    err << prefix << "error: " << printable_text(error.what()) << "\n";
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    err << prefix
        << "error: out of memory (the model, sequence or sweep is too large for this "
           "machine; nothing was written)\n";
    return kExitFailure;
  } catch (const std::filesystem::filesystem_error& error) {
    err << prefix << "error: " << printable_text(error.code().message()) << ": '"
        << printable_text(error.path1().string()) << "'\n";
    return kExitFailure;
  } catch (const std::exception& error) {
    err << prefix << "internal error: " << printable_text(error.what()) << "\n";
    return kExitFailure;
  }
}

}  // namespace attnres::cli
