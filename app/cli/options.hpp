// Small helpers shared by the CLI commands: the start of every command (its options with --help,
// Boost.Program_options parsing with one error style, the help), the checks of flag values that
// several commands share, and the model-shape, scheme and mode flags of the model commands.
#pragma once

#include <boost/program_options.hpp>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres::cli {

namespace po = boost::program_options;

// The options of `attnres COMMAND` ("attnres cost options"), --help/-h first.
po::options_description command_options(const std::string& command);

// Parses `args` against `options` strictly:
//   - a flag must be spelt out in full (no prefix guessing: `--block` is not `--block-size`);
//   - an unknown flag is an error with the closest known flag as a suggestion;
//   - arguments that are not flags are an error naming them (with the hint to quote token
//     lists), except those `positional` accepts.
// Errors are UsageError (exit status 2).
po::variables_map parse_options(const std::vector<std::string>& args,
                                const po::options_description& options,
                                const po::positional_options_description* positional = nullptr);

// The start of every command: parses `args` (parse_options) into `values`. With --help it prints
// `usage` and the options on `out` and returns true (the command ends there, exit status 0),
// before po::notify, so that required flags do not get in the way of --help. Otherwise it runs
// po::notify (a required flag that is missing is an error) and returns false.
// The usage line (the first line of `usage`) is wrapped at spaces to 100 columns, continuation
// lines indented by four spaces; the lines after it are printed as given.
bool parse_or_help(const std::vector<std::string>& args, const po::options_description& options,
                   po::variables_map& values, std::ostream& out, const std::string& usage,
                   const po::positional_options_description* positional = nullptr);

// The help of a --hardware flag: the built-in presets (hardware_preset_names) or a .toml file.
std::string hardware_flag_help();

// True when the user typed `flag` (not just its default value).
inline bool given(const po::variables_map& values, const char* flag) {
  return values.count(flag) && !values[flag].defaulted();
}

// How a command writes a checkpoint (export, init-model): --format lab | hf, --dtype and
// --max-shard-size for hf (docs/interop.md).
struct HfWriteFlags {
  std::string format = "lab";
  std::string dtype;
  double max_shard_mb = 0.0;
};
void add_hf_write_options(po::options_description& options, HfWriteFlags& flags);
// The export options the flags ask for (BF16 without --dtype); UsageError for a bad value, or for
// --dtype / --max-shard-size without --format hf.
HfExportOptions parse_hf_write_flags(const po::variables_map& values, const HfWriteFlags& flags);

// --format `format` must be one of `allowed`: a UsageError listing them otherwise.
void require_format(const std::string& format, std::initializer_list<const char*> allowed);
// `value` of `flag` must be `first` or `second`: a UsageError "FLAG must be FIRST or SECOND, got
// 'VALUE'" otherwise.
void require_either(const std::string& flag, const std::string& value, const char* first,
                    const char* second);
// An on | off flag as a bool (require_either).
bool on_off(const std::string& flag, const std::string& value);

// The residual mode a forward pass of `config` runs (options.mode, set from --mode, else the
// model's), and how to name it in messages ("--mode full" / "the model's mode standard").
struct ModeFlags {
  ResidualMode mode;
  std::string source;
};
// --mode (`mode_text`) when it was given, else none (the model's mode).
std::optional<ResidualMode> parse_mode_flag(const po::variables_map& values,
                                            const std::string& mode_text);
// Applies --block-size (`block_size`, when given) to `options` after --mode: a UsageError when it
// is given outside Block AttnRes, outside 1..L, or when Block AttnRes has no block size at all.
ModeFlags apply_block_size_flag(const po::variables_map& values, const std::string& mode_text,
                                int block_size, const ModelConfig& config, ForwardOptions& options);

// --two-phase, given, must change the pass: a UsageError naming it when the scheme the pass runs
// (resolve_scheme of `config` and `options`; `mode_source` as ModeFlags::source) has no reads
// that split into two phases (the standard residual, mHC, an input-dependent query).
void refuse_two_phase_without_effect(const ModelConfig& config, const ForwardOptions& options,
                                     const std::string& mode_source);

// The model-shape flags shared by `init-model` and `train`: --layers, --d-model, --heads,
// --kv-heads, --ffn, --vocab, --query-std, --weight-std, --rms-norm-eps, --rope-theta,
// --key-norm-eps. `required` makes the first five (and --vocab unless it has a default) required.
struct ModelShapeFlags {
  ModelConfig config;
  RandomModelOptions random;
};
void add_model_shape_options(po::options_description& options, ModelShapeFlags& flags,
                             bool required, int default_vocab = 0);
// True when any of the shape flags was given.
bool model_shape_given(const po::variables_map& values);
// Defaults --kv-heads to --heads, checks the standard deviations and validates the shape (the
// mode and block size must already be in flags.config); errors are UsageErrors naming the flags.
void finish_model_shape(const po::variables_map& values, ModelShapeFlags& flags);

// The scheme flags of docs/schemes.md, shared by init-model, forward and train: --gate,
// --no-key-norm, --window, --depth-heads, --query-source, --mixing, --streams, --static-mhc,
// --sinkhorn-iterations.
struct ModelSchemeFlags {
  std::string gate, query_source, mixing;
  int window = 0, depth_heads = 1, streams = 4, sinkhorn_iterations = 20;
};
void add_scheme_options(po::options_description& options, ModelSchemeFlags& flags);
// True when any scheme flag was given.
bool scheme_flags_given(const po::variables_map& values);
// Applies the given scheme flags to `scheme` (mode and block size already set). Validation
// happens with the model shape (finish_model_shape / validate_scheme).
void apply_scheme_flags(const po::variables_map& values, const ModelSchemeFlags& flags,
                        AttnResConfig& scheme);
// Validates `scheme` on the shape of `config`; errors are UsageErrors naming the flags.
void validate_scheme(const ModelConfig& config, const AttnResConfig& scheme);
// True when modes `a` and `b` run on the same tensors: the same mode, or two of standard, full and
// block. Any other change of scheme needs a new model or a conversion (docs/schemes.md).
bool same_tensors(ResidualMode a, ResidualMode b);

}  // namespace attnres::cli
