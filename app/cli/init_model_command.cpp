// attnres init-model: a random model written as DIR/config.json + DIR/model.safetensors.
#include <filesystem>
#include <map>

#include "attnres/error.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

// config.json keys -> the flags that set them, so validation errors name what the user typed.
std::string flag_for_key(const std::string& key) {
  static const std::map<std::string, std::string> flags = {
      {"hidden_size", "--d-model"},          {"num_hidden_layers", "--layers"},
      {"num_attention_heads", "--heads"},    {"num_key_value_heads", "--kv-heads"},
      {"intermediate_size", "--ffn"},        {"vocab_size", "--vocab"},
      {"rms_norm_eps", "--rms-norm-eps"},    {"rope_theta", "--rope-theta"},
      {"attn_res.block_size", "--block-size"}, {"attn_res.key_norm_eps", "--key-norm-eps"}};
  auto it = flags.find(key);
  return it == flags.end() ? key : it->second;
}

}  // namespace

int init_model_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  ModelConfig config;
  RandomModelOptions random;
  std::string mode_text = "standard";
  std::string out_dir;
  po::options_description options("attnres init-model options");
  options.add_options()
      ("help,h", "show this help")
      ("layers", po::value(&config.num_hidden_layers)->required(),
       "transformer layers (L = 2 x layers sublayers)")
      ("d-model", po::value(&config.hidden_size)->required(), "hidden width d")
      ("heads", po::value(&config.num_attention_heads)->required(), "attention heads H (divides d)")
      ("kv-heads", po::value(&config.num_key_value_heads),
       "key/value heads (divides H; default H)")
      ("ffn", po::value(&config.intermediate_size)->required(), "SwiGLU width F")
      ("vocab", po::value(&config.vocab_size)->required(), "vocabulary size")
      ("mode", po::value(&mode_text)->default_value("standard"),
       "residual mode stored in config.json: standard | full | block")
      ("block-size", po::value(&config.attn_res.block_size),
       "Block AttnRes block size S in sublayers (1..L; required with --mode block)")
      ("seed", po::value(&random.seed)->default_value(0), "random seed")
      ("query-std", po::value(&random.query_std)->default_value(0.0),
       "std of the pseudo-queries (0: zero queries, every read is a mean)")
      ("weight-std", po::value(&random.weight_std)->default_value(0.02),
       "std of projection and embedding weights")
      ("rms-norm-eps", po::value(&config.rms_norm_eps)->default_value(1e-6), "RMSNorm eps")
      ("rope-theta", po::value(&config.rope_theta)->default_value(10000.0), "RoPE base")
      ("key-norm-eps", po::value(&config.attn_res.key_norm_eps)->default_value(1e-6),
       "eps of the depth-attention key norm")
      ("out", po::value(&out_dir)->required(),
       "output directory: new, empty, or written by attnres (see --force)")
      ("force", "replace the contents of an --out directory that holds other files");
  auto values = parse_options(args, options);
  if (wants_help(values,
                 "usage: attnres init-model --layers N --d-model D --heads H [--kv-heads K] "
                 "--ffn F --vocab V [--mode M] [--block-size S] [--seed K] [--query-std s] "
                 "[--weight-std s] [--rms-norm-eps e] [--rope-theta t] [--key-norm-eps e] --out DIR [--force]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  if (!values.count("kv-heads")) config.num_key_value_heads = config.num_attention_heads;
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
  if (!(random.query_std >= 0.0)) throw UsageError("--query-std must be >= 0");
  if (!(random.weight_std >= 0.0)) throw UsageError("--weight-std must be >= 0");
  try {
    config.validate("invalid model shape", flag_for_key);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }

  OutputDirectoryOptions output;
  output.owner = "model";
  output.force = values.count("force") > 0;
  const fs::path target = clean_output_path(out_dir, "--out");
  check_output_directory(target, output);  // refuse before the work, not after

  const ModelWeights<double> model = random_model(config, random);
  ProgressBar progress("writing");
  output.progress = progress.callback();
  const OutputDirectoryResult written = write_output_directory(target, output, [&](const fs::path& staging) { save_model(model, staging); });

  const std::int64_t parameters = parameter_count(model);
  out << "wrote " << (target / "config.json").string() << " and "
      << (target / "model.safetensors").string() << "\n"
      << "  d = " << config.hidden_size << ", " << config.num_hidden_layers
      << " transformer layers = " << config.sublayers() << " sublayers, " << config.num_attention_heads
      << " heads (" << config.num_key_value_heads << " kv), ffn " << config.intermediate_size
      << ", vocab " << config.vocab_size << "\n"
      << "  residual mode " << to_string(config.attn_res.mode);
  if (config.attn_res.block_size) out << ", block size S = " << config.attn_res.block_size;
  out << "; " << parameters << " parameters (F32, " << parameters * 4 << " bytes)"
      << "; seed " << random.seed << ", query std " << random.query_std << "\n";
  for (const auto& note : output_directory_notes(written)) out << "note: " << note << "\n";
  return kExitOk;
}

}  // namespace attnres::cli
