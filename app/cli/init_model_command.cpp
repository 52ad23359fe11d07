// attnres init-model: a random model written as DIR/config.json + DIR/model.safetensors.
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

int init_model_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  ModelShapeFlags shape;
  ModelConfig& config = shape.config;
  RandomModelOptions& random = shape.random;
  std::string mode_text = "standard";
  std::string out_dir;
  int head_dim = 0;
  HfWriteFlags write;
  po::options_description options = command_options("init-model");
  options.add_options()(
      "mode", po::value(&mode_text)->default_value("standard"),
      "residual mode stored in config.json: standard | full | block | denseformer | rescaled | mhc "
      "(docs/schemes.md)")(
      "block-size", po::value(&config.attn_res.block_size),
      "Block AttnRes block size S in sublayers (1..L; required with --mode block)")(
      "seed", po::value(&random.seed)->default_value(0), "random seed")(
      "out", po::value(&out_dir)->required(),
      "output directory: new, empty, or written by attnres (see --force)")(
      "force", "replace the contents of an --out directory that holds other files")(
      "head-dim", po::value(&head_dim),
      "attention head width where it is not d / heads (Hugging Face head_dim; Qwen3: 128)")(
      "qk-norm",
      "Qwen3's RMSNorm of each query and key head before RoPE (model_type qwen3; "
      "forward passes only, docs/interop.md)")(
      "tie-embeddings", "the LM head is the embedding matrix (tie_word_embeddings)");
  add_hf_write_options(options, write);
  add_model_shape_options(options, shape, /*required=*/true);
  ModelSchemeFlags scheme_flags;
  add_scheme_options(options, scheme_flags);
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres init-model --layers N --d-model D --heads H [--kv-heads K] "
          "--ffn F --vocab V [--mode M] [--block-size S] [--seed K] [--query-std s] "
          "[--weight-std s] [--rms-norm-eps e] [--rope-theta t] [--key-norm-eps e] [--gate "
          "G] [--no-key-norm] "
          "[--window W] [--depth-heads H] [--query-source static|input] [--mixing "
          "attention|scalars] "
          "[--streams m] [--static-mhc] [--sinkhorn-iterations K] [--head-dim N] [--qk-norm] "
          "[--tie-embeddings] [--format lab|hf] [--dtype bf16|f16|f32] [--max-shard-size MB] "
          "--out DIR [--force]\n"
          "--query-std draws every depth-mixing parameter (queries, projections, logits, "
          "mHC weights) from "
          "N(0, s^2); 0 is each scheme's documented start (docs/schemes.md).")) {
    return kExitOk;
  }
  config.attn_res.mode = parse_flag_value([&] { return parse_residual_mode(mode_text, "--mode"); });
  if (config.attn_res.mode == ResidualMode::block && !values.count("block-size")) {
    throw UsageError("--block-size is required with --mode block (1 <= S <= L sublayers)");
  }
  if (values.count("block-size") && config.attn_res.mode != ResidualMode::block) {
    throw UsageError("--block-size applies to --mode block, not --mode " + mode_text);
  }
  if (values.count("block-size") &&
      (config.attn_res.block_size < 1 || config.attn_res.block_size > config.sublayers())) {
    throw UsageError("--block-size " + std::to_string(config.attn_res.block_size) +
                     " is out of range: expected 1 <= S <= L = " +
                     std::to_string(config.sublayers()) + " sublayers");
  }
  apply_scheme_flags(values, scheme_flags, config.attn_res);
  if (values.count("head-dim")) {
    if (head_dim < 2 || head_dim % 2 != 0)
      throw UsageError("--head-dim must be a positive even number (RoPE), got " +
                       std::to_string(head_dim));
    if (head_dim * config.num_attention_heads != config.hidden_size)
      config.explicit_head_dim = head_dim;
  }
  config.qk_norm = values.count("qk-norm") > 0;
  config.tie_word_embeddings = values.count("tie-embeddings") > 0;
  const HfExportOptions hf = parse_hf_write_flags(values, write);
  finish_model_shape(values, shape);
  if (write.format == "hf") {
    try {
      k3_block_layers(config);
    } catch (const Error& error) {
      throw UsageError(std::string("--format hf: ") + error.what());
    }
  }

  OutputDirectoryOptions output;
  output.owner = "model";
  output.force = values.count("force") > 0;
  const fs::path target = clean_output_path(out_dir, "--out");
  std::vector<std::string> notes =
      check_output_directory(target, output);  // refuse before the work, not after

  // The memory pre-check, as load_model's: the model is built in float64, then written (an f32
  // or bf16 copy of each tensor at a time). Full AttnRes layouts with mixing scalars count (L+1)^2
  // logits (model_bytes); refused before any allocation instead of meeting the OOM killer.
  const std::uint64_t needed = model_bytes(config, "the model described", sizeof(double));
  const std::uint64_t available = available_memory_bytes();
  if (needed > available) {
    throw Error("the model described (" + std::to_string(config.num_hidden_layers) +
                " layers, d = " + std::to_string(config.hidden_size) + ", " +
                config.attn_res.describe() + ") needs " + std::to_string(needed / 1000000) +
                " MB as float64, but only " + std::to_string(available / 1000000) +
                " MB of memory is available; refusing before any work");
  }
  ModelWeights<double> model = random_model(config, random);
  if (config.tie_word_embeddings) model.lm_head = model.embed_tokens;
  ProgressBar progress("writing");
  output.progress = progress.callback();
  std::vector<std::string> files = {"config.json", "model.safetensors"};
  const OutputDirectoryResult written =
      write_output_directory(target, output, [&](const fs::path& staging) {
        if (write.format == "hf") {
          files = save_hf_model(model, staging, hf, progress.callback());
        } else {
          save_model(model, staging);
        }
      });

  const std::int64_t parameters = parameter_count(model);
  if (write.format == "hf") {
    out << "wrote " << printable_text(target.string()) << " (Kimi K3 Hugging Face layout): ";
    for (std::size_t i = 0; i < files.size(); ++i) out << (i ? ", " : "") << files[i];
  } else {
    out << "wrote " << printable_text((target / "config.json").string()) << " and "
        << printable_text((target / "model.safetensors").string());
  }
  out << "\n"
      << "  d = " << config.hidden_size << ", " << config.num_hidden_layers
      << " transformer layers = " << config.sublayers() << " sublayers, "
      << config.num_attention_heads << " heads (" << config.num_key_value_heads << " kv), ffn "
      << config.intermediate_size << ", vocab " << config.vocab_size << "\n"
      << "  residual scheme " << config.attn_res.describe();
  const TensorDType dtype = write.format == "hf" ? hf.dtype : TensorDType::f32;
  out << "; " << parameters << " parameters (" << to_string(dtype) << ", "
      << parameters * static_cast<std::int64_t>(element_size(dtype)) << " bytes)"
      << "; seed " << random.seed << ", query std " << random.query_std << "\n";
  for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli
