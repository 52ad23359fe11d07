// attnres mask: the history-masking experiment on a trained model (docs/training.md).
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/history_mask.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/training.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

std::string signed_fixed(double value, int decimals) {
  std::string text = format_fixed(value, decimals);
  if (value >= 0) text.insert(text.begin(), '+');
  return text;
}

}  // namespace

int mask_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string model_dir, data_path, format;
  std::vector<std::string> drops;
  int seq = 0, windows = 0, random = 0;
  std::uint64_t seed = 0;
  double fraction = 0.05;
  po::options_description options = command_options("mask");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "a trained Full or Block AttnRes model directory")(
      "data", po::value(&data_path)->required(),
      "text file; the loss is measured on its validation part")(
      "drop", po::value(&drops)->required(),
      "sources to remove from every read: embedding | distant:K (all but the "
      "K most recent) | recent:K (the K most recent); repeat the flag for several experiments")(
      "seq", po::value(&seq)->default_value(128), "tokens per validation window")(
      "windows", po::value(&windows)->default_value(8), "validation windows")(
      "val-fraction", po::value(&fraction)->default_value(0.05),
      "the last part of the file used for validation")(
      "random", po::value(&random)->default_value(8), "random masks of equal mass to compare with")(
      "seed", po::value(&seed)->default_value(0), "seed of the random masks")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres mask --model DIR --data FILE --drop embedding|distant:K|recent:K "
          "[--drop ...] "
          "[--seq T] [--val-fraction F] [--windows W] [--random R] [--seed S] [--format "
          "table|json]\n"
          "Removes the chosen depth sources from every read (renormalising the rest) and "
          "compares the loss "
          "change with random masks that remove the same attention mass (docs/training.md).")) {
    return kExitOk;
  }
  require_either("--format", format, "table", "json");
  if (seq < 2) throw UsageError("--seq must be at least 2, got " + std::to_string(seq));
  if (windows < 1) throw UsageError("--windows must be at least 1, got " + std::to_string(windows));
  if (random < 0) throw UsageError("--random must be >= 0, got " + std::to_string(random));
  if (given(values, "seed") && random == 0) {
    throw UsageError(
        "--seed draws the random masks; with --random 0 there are none and it would change "
        "nothing: leave it out or give --random R > 0");
  }
  std::vector<MaskSelection> selections;
  for (const auto& drop : drops)
    selections.push_back(parse_flag_value([&] { return parse_mask_selection(drop, "--drop"); }));
  // The data first (a bounded read of a regular file, docs/training.md), then the model.
  const TextData data = load_text_data(data_path, fraction, seq);
  const ModelWeights<double> model = load_model(model_dir);
  if (model.config.vocab_size < kByteVocabulary) {
    throw Error(model_dir + ": the model's vocabulary has " +
                std::to_string(model.config.vocab_size) +
                " ids; the data file's bytes need at least 256 (a model trained by attnres train)");
  }
  const auto tokens = validation_windows(data, seq, windows);
  std::vector<MaskExperiment> results;
  {
    ProgressBar progress("masking");
    for (const auto& selection : selections) {
      results.push_back(
          history_mask_experiment(model, tokens, selection, random, seed, progress.callback()));
    }
  }
  throw_if_interrupted("history masking");
  if (format == "json") {
    nlohmann::json experiments = nlohmann::json::array();
    for (const auto& e : results) {
      experiments.push_back({{"drop", e.selection},
                             {"base_loss", e.base_loss},
                             {"masked_loss", e.masked_loss},
                             {"delta", e.delta},
                             {"reads_masked", e.reads_masked},
                             {"mass_removed", e.mass_removed},
                             {"random_mass_removed", e.random_mass_removed},
                             {"random_deltas", e.random_deltas},
                             {"random_mean", e.random_mean},
                             {"random_std", e.random_std}});
    }
    const nlohmann::json json = {{"schema", schema_tag("mask")}, {"experiments", experiments}};
    out << json.dump(2) << "\n";
    return kExitOk;
  }
  out << "history masking on " << printable_text(model_dir) << " ("
      << to_string(model.config.attn_res.mode) << "), " << tokens.size()
      << " validation windows of " << seq << " tokens from " << data_path << "\n"
      << "loss without a mask: " << format_fixed(results.front().base_loss, 4) << " nats/token\n\n";
  TextTable table({"drop", "reads", "mass removed", "loss change", "random masks: mass",
                   "loss change (mean ± std)"});
  for (const auto& e : results) {
    table.add_row({e.selection, std::to_string(e.reads_masked), format_fixed(e.mass_removed, 3),
                   signed_fixed(e.delta, 4), format_fixed(e.random_mass_removed, 3),
                   e.random_deltas.empty()
                       ? "-"
                       : signed_fixed(e.random_mean, 4) + " ± " + format_fixed(e.random_std, 4)});
  }
  table.print(out);
  out << "\nmass removed: mean over masked reads of the weight the unmasked model gives the "
         "removed sources; the "
         "random masks remove (nearly) the same mass per read from random sources.\n";
  return kExitOk;
}

}  // namespace attnres::cli
