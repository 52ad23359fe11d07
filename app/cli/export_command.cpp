// attnres export: a model in another checkpoint layout (docs/interop.md) — the Kimi K3 Hugging
// Face layout (--format hf: attn_res_block_size, BF16/F16/F32, shards with an index) or the lab's
// own (--format lab: F32, the attn_res object). Reads any layout load_model reads.
#include <filesystem>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

void add_hf_write_options(po::options_description& options, HfWriteFlags& flags) {
  options.add_options()("format", po::value(&flags.format)->default_value(flags.format),
                        "checkpoint layout: lab (the attn_res object, F32) | hf (Kimi K3's "
                        "Hugging Face layout, docs/interop.md)")(
      "dtype", po::value(&flags.dtype),
      "--format hf: tensor dtype bf16 | f16 | f32 (default: the model's own, bf16 for F32 lab "
      "models)")("max-shard-size", po::value(&flags.max_shard_mb),
                 "--format hf: shard the weights into files of at most this many MB, with "
                 "model.safetensors.index.json (default: one file)");
}

HfExportOptions parse_hf_write_flags(const po::variables_map& values, const HfWriteFlags& flags) {
  require_either("--format", flags.format, "lab", "hf");
  if (flags.format != "hf") {
    for (const char* flag : {"dtype", "max-shard-size"}) {
      if (values.count(flag)) {
        throw UsageError(std::string("--") + flag +
                         " applies to --format hf (the lab's layout is one F32 file); give "
                         "--format hf or leave it out");
      }
    }
    return {};
  }
  HfExportOptions options;
  const std::string dtype = values.count("dtype") ? flags.dtype : "bf16";
  if (dtype == "bf16") {
    options.dtype = TensorDType::bf16;
  } else if (dtype == "f16") {
    options.dtype = TensorDType::f16;
  } else if (dtype == "f32") {
    options.dtype = TensorDType::f32;
  } else {
    throw UsageError("--dtype must be bf16, f16 or f32, got '" + dtype + "'");
  }
  if (values.count("max-shard-size")) {
    if (!(flags.max_shard_mb > 0.0) || flags.max_shard_mb > 1e9) {
      throw UsageError("--max-shard-size must be a positive number of MB, got " +
                       format_number(flags.max_shard_mb));
    }
    options.max_shard_bytes = static_cast<std::uint64_t>(flags.max_shard_mb * 1e6);
  }
  return options;
}

int export_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  std::string model_dir, out_dir;
  HfWriteFlags flags;
  flags.format = "hf";
  po::options_description options = command_options("export");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory in any layout of docs/interop.md")(
      "out", po::value(&out_dir)->required(),
      "output directory: new, empty, or written by attnres (see --force)")(
      "force", "replace the contents of an --out directory that holds other files");
  add_hf_write_options(options, flags);
  po::variables_map values;
  if (parse_or_help(args, options, values, out,
                    "usage: attnres export --model DIR --out DIR [--format hf|lab] "
                    "[--dtype bf16|f16|f32] [--max-shard-size MB] [--force]\n"
                    "Writes the model in Kimi K3's Hugging Face layout (attn_res_block_size in "
                    "decoder layers, self_attention_res_* / mlp_res_* / output_attn_res_* "
                    "tensors) or in the lab's; import -> export gives the same tensors back "
                    "(docs/interop.md).")) {
    return kExitOk;
  }
  // Checked before the model is read: the flags, then the output directory.
  HfExportOptions hf = parse_hf_write_flags(values, flags);
  OutputDirectoryOptions output;
  output.owner = "model";
  output.force = values.count("force") > 0;
  output.inputs = {fs::path(model_dir)};
  const fs::path target = clean_output_path(out_dir, "--out");
  std::vector<std::string> notes = check_output_directory(target, output);

  ProgressBar progress("loading");
  CheckpointReport report;
  const ModelWeights<float> model = load_model_as<float>(model_dir, progress.callback(), &report);
  if (flags.format == "hf" && !values.count("dtype") && report.dtypes.size() == 1) {
    // Keep the model's own dtype; the lab's F32 files (and F64) become BF16.
    const TensorDType stored =
        parse_enum(kTensorDTypeNames, report.dtypes.begin()->first, report.files.front(), "dtype");
    const bool keep = stored == TensorDType::f16 ||
                      (stored == TensorDType::f32 && report.layout != CheckpointLayout::lab);
    if (keep) hf.dtype = stored;
  }
  if (flags.format == "hf") k3_block_layers(model.config);  // refuse before writing anything
  progress.set_label("writing");
  output.progress = progress.callback();
  std::vector<std::string> files;
  const OutputDirectoryResult written =
      write_output_directory(target, output, [&](const fs::path& staging) {
        if (flags.format == "hf") {
          files = save_hf_model(model, staging, hf, progress.callback());
        } else {
          save_model(model.cast<double>(), staging);
          files = {"model.safetensors", "config.json"};
        }
      });
  out << "wrote " << printable_text(target.string()) << ": ";
  for (std::size_t i = 0; i < files.size(); ++i) out << (i ? ", " : "") << files[i];
  out << "\n  from " << printable_text(model_dir) << " (" << to_string(report.layout) << " layout";
  for (const auto& [dtype, count] : report.dtypes) out << ", " << count << " " << dtype;
  out << ") to the " << (flags.format == "hf" ? "Kimi K3 Hugging Face" : "lab's") << " layout";
  if (flags.format == "hf") {
    const int layers = k3_block_layers(model.config);
    out << " as " << to_string(hf.dtype) << ", attn_res_block_size "
        << (layers > 0 ? std::to_string(layers) : std::string("null"));
  }
  out << "\n";
  for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli
