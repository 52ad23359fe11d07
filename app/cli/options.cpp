// The flag helpers of options.hpp (strict parsing with one error style, the usage-line wrapping,
// the model-shape and scheme flags, --block-size after --mode) and cli.hpp's parse_engine_flags:
// what every command does with its flags before its own work.
#include "options.hpp"

#include <cmath>
#include <map>

#include "attnres/cost_metrics.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/hardware.hpp"
#include "attnres/quoted_text.hpp"
#include "cli.hpp"

namespace attnres::cli {

void check_precision_flag(const EngineOptions& engine, Precision precision,
                          const std::string& flag) {
  if (precision == Precision::bf16 && engine.engine == EngineKind::reference) {
    throw UsageError(flag +
                     " bf16 runs on the fast engine; --engine reference computes in f32 or f64 "
                     "(docs/engines.md)");
  }
  if (engine.device == Device::cuda && precision != Precision::f32) {
    throw UsageError("--device cuda computes in f32; drop " + flag + " " + to_string(precision));
  }
}

Precision parse_precision_flag(const std::string& text, bool f64) {
  const Precision precision =
      parse_flag_value([&] { return parse_precision(text, "--precision"); });
  if (!f64 && precision == Precision::f64) {
    throw UsageError("--precision f64: training keeps f32 weights; expected bf16 or f32");
  }
  return precision;
}

std::string precision_description(Precision precision) {
  if (precision != Precision::bf16) return to_string(precision);
  const MatrixUnits units = matrix_units();
  return "bf16 (bf16 products, f32 accumulation; " + units.isa +
         (units.native_bf16 ? ")" : ", emulated: this CPU has no native bf16 units)");
}

std::string threads_help(const std::string& what) {
  return what + " (0: every core, at most " + std::to_string(kMaxThreads) + ")";
}

EngineOptions parse_engine_flags(const std::string& engine, const std::string& device, int threads,
                                 Precision precision, bool threads_given) {
  EngineOptions options;
  options.engine = parse_flag_value([&] { return parse_engine(engine, "--engine"); });
  options.device = parse_flag_value([&] { return parse_device(device, "--device"); });
  parse_flag_value([&] { check_thread_count(threads, "--threads"); });
  options.threads = threads;
  options = with_precision(options, precision);
  if (options.device == Device::cuda && options.engine == EngineKind::reference) {
    throw UsageError("--device cuda runs the fast engine; --engine reference runs on the CPU only");
  }
  check_precision_flag(options, precision, "--precision");
  if (options.device == Device::cuda) {
    if (threads_given) {
      throw UsageError(
          "--threads sets the CPU threads of the fast engine; with --device cuda the GPU computes "
          "and it would change nothing: leave it out or give --device cpu");
    }
  }
  if (threads_given && options.engine == EngineKind::reference) {
    throw UsageError(
        "--threads sets the threads of the fast engine; --engine reference runs on one thread and "
        "it would change nothing: leave it out or give --engine fast");
  }
  return options;
}

namespace {

// config.json keys -> the flags that set them, so validation errors name what the user typed.
std::string flag_for_key(const std::string& key) {
  static const std::map<std::string, std::string> flags = {
      {"hidden_size", "--d-model"},
      {"num_hidden_layers", "--layers"},
      {"num_attention_heads", "--heads"},
      {"num_key_value_heads", "--kv-heads"},
      {"intermediate_size", "--ffn"},
      {"vocab_size", "--vocab"},
      {"rms_norm_eps", "--rms-norm-eps"},
      {"rope_theta", "--rope-theta"},
      {"attn_res.block_size", "--block-size"},
      {"attn_res.key_norm_eps", "--key-norm-eps"},
      {"attn_res.gate", "--gate"},
      {"attn_res.key_norm", "--no-key-norm"},
      {"attn_res.window", "--window"},
      {"attn_res.heads", "--depth-heads"},
      {"attn_res.query_source", "--query-source"},
      {"attn_res.mixing", "--mixing"},
      {"attn_res.streams", "--streams"},
      {"attn_res.dynamic", "--static-mhc"},
      {"attn_res.sinkhorn_iterations", "--sinkhorn-iterations"}};
  auto it = flags.find(key);
  return it == flags.end() ? key : it->second;
}

std::string wrap_usage(const std::string& usage) {
  constexpr std::size_t kWidth = 100;
  const std::size_t end = usage.find('\n');
  const std::string line = usage.substr(0, end);
  std::string out, current;
  std::size_t start = 0;
  while (start < line.size()) {
    std::size_t space = line.find(' ', start);
    if (space == std::string::npos) space = line.size();
    const std::string word = line.substr(start, space - start);
    if (!current.empty() && current.size() + 1 + word.size() > kWidth) {
      out += current + "\n";
      current = "    " + word;
    } else {
      current += (current.empty() ? "" : " ") + word;
    }
    start = space + 1;
  }
  out += current;
  return end == std::string::npos ? out : out + usage.substr(end);
}

}  // namespace

void add_model_shape_options(po::options_description& options, ModelShapeFlags& flags,
                             bool required, int default_vocab) {
  ModelConfig& config = flags.config;
  auto need = [&](po::typed_value<int>* value) { return required ? value->required() : value; };
  auto* vocab = po::value(&config.vocab_size);
  if (default_vocab > 0) {
    vocab->default_value(default_vocab);
  } else if (required) {
    vocab->required();
  }
  po::options_description group("model shape flags");  // the usage lines' "[model shape flags]"
  group.add_options()("layers", need(po::value(&config.num_hidden_layers)),
                      "transformer layers (L = 2 x layers sublayers)")(
      "d-model", need(po::value(&config.hidden_size)), "hidden width d")(
      "heads", need(po::value(&config.num_attention_heads)), "attention heads H (divides d)")(
      "kv-heads", po::value(&config.num_key_value_heads), "key/value heads (divides H; default H)")(
      "ffn", need(po::value(&config.intermediate_size)), "SwiGLU width F")("vocab", vocab,
                                                                           "vocabulary size")(
      "query-std", po::value(&flags.random.query_std)->default_value(0.0),
      "std of the pseudo-queries (0: zero queries, every read is a mean)")(
      "weight-std", po::value(&flags.random.weight_std)->default_value(0.02),
      "std of projection and embedding weights")(
      "rms-norm-eps", po::value(&config.rms_norm_eps)->default_value(1e-6, "1e-6"), "RMSNorm eps")(
      "rope-theta", po::value(&config.rope_theta)->default_value(10000.0), "RoPE base")(
      "key-norm-eps", po::value(&config.attn_res.key_norm_eps)->default_value(1e-6, "1e-6"),
      "eps of the depth-attention key norm");
  options.add(group);
}

void add_scheme_options(po::options_description& options, ModelSchemeFlags& flags) {
  po::options_description group("scheme flags");  // the usage lines' "[scheme flags]"
  group.add_options()(
      "gate", po::value(&flags.gate),
      "depth gate: softmax | sigmoid | sigmoid_normalized (Full/Block; docs/schemes.md)")(
      "no-key-norm", "score the raw sources (no key norm; Full/Block)")(
      "window", po::value(&flags.window),
      "Full only: the embedding plus the last W outputs (0 = all)")(
      "depth-heads", po::value(&flags.depth_heads),
      "depth-attention heads H (divides d; Full/Block)")(
      "query-source", po::value(&flags.query_source),
      "static | input (w + W RMSNorm(latest source); Full/Block)")(
      "mixing", po::value(&flags.mixing),
      "attention | scalars (learned logits per source; Full/Block)")(
      "streams", po::value(&flags.streams), "mHC streams m (--mode mhc; default 4)")(
      "static-mhc", "mHC with static biases only (no input-dependent coefficients)")(
      "sinkhorn-iterations", po::value(&flags.sinkhorn_iterations),
      "mHC Sinkhorn-Knopp iterations (default 20)");
  options.add(group);
}

bool scheme_flags_given(const po::variables_map& values) {
  for (const char* flag : {"gate", "no-key-norm", "window", "depth-heads", "query-source", "mixing",
                           "streams", "static-mhc", "sinkhorn-iterations"}) {
    if (values.count(flag)) return true;
  }
  return false;
}

void apply_scheme_flags(const po::variables_map& values, const ModelSchemeFlags& flags,
                        AttnResConfig& scheme) {
  if (values.count("gate"))
    scheme.gate = parse_flag_value([&] { return parse_depth_gate(flags.gate, "--gate"); });
  if (values.count("no-key-norm")) scheme.key_norm = false;
  if (values.count("window")) scheme.window = flags.window;
  if (values.count("depth-heads")) scheme.heads = flags.depth_heads;
  if (values.count("query-source")) {
    scheme.query_source =
        parse_flag_value([&] { return parse_query_source(flags.query_source, "--query-source"); });
  }
  if (values.count("mixing"))
    scheme.mixing = parse_flag_value([&] { return parse_depth_mixing(flags.mixing, "--mixing"); });
  if (values.count("streams")) scheme.streams = flags.streams;
  if (values.count("static-mhc")) scheme.dynamic = false;
  if (values.count("sinkhorn-iterations")) scheme.sinkhorn_iterations = flags.sinkhorn_iterations;
}

void validate_scheme(const ModelConfig& config, const AttnResConfig& scheme) {
  ModelConfig checked = config;
  checked.attn_res = scheme;
  try {
    checked.validate("invalid scheme", flag_for_key);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
}

bool same_tensors(ResidualMode a, ResidualMode b) {
  const auto plain = [](ResidualMode m) {
    return m == ResidualMode::standard || m == ResidualMode::full || m == ResidualMode::block;
  };
  return a == b || (plain(a) && plain(b));
}

bool model_shape_given(const po::variables_map& values) {
  for (const char* flag : {"layers", "d-model", "heads", "kv-heads", "ffn", "query-std",
                           "weight-std", "rms-norm-eps", "rope-theta", "key-norm-eps"}) {
    if (given(values, flag)) return true;
  }
  return given(values, "vocab");
}

void finish_model_shape(const po::variables_map& values, ModelShapeFlags& flags) {
  if (!values.count("kv-heads"))
    flags.config.num_key_value_heads = flags.config.num_attention_heads;
  // A standard deviation that is negative, NaN or infinite would write weights every reader
  // refuses (or a model of NaNs): refused before any work.
  auto standard_deviation = [](const char* flag, double value) {
    if (!(value >= 0.0) || !std::isfinite(value)) {
      throw UsageError(std::string(flag) + " must be a finite number >= 0, got " +
                       format_number(value));
    }
  };
  standard_deviation("--query-std", flags.random.query_std);
  standard_deviation("--weight-std", flags.random.weight_std);
  try {
    flags.config.validate("invalid model shape", flag_for_key);
  } catch (const Error& error) {
    throw UsageError(error.what());
  }
}

std::optional<ResidualMode> parse_mode_flag(const po::variables_map& values,
                                            const std::string& mode_text) {
  if (!values.count("mode")) return std::nullopt;
  return parse_flag_value([&] { return parse_residual_mode(mode_text, "--mode"); });
}

ModeFlags apply_block_size_flag(const po::variables_map& values, const std::string& mode_text,
                                int block_size, const ModelConfig& config,
                                ForwardOptions& options) {
  const int L = config.sublayers();
  const ResidualMode mode = options.mode.value_or(config.attn_res.mode);
  ModeFlags flags{
      mode, values.count("mode") ? "--mode " + mode_text : "the model's mode " + to_string(mode)};
  if (values.count("block-size")) {
    if (mode != ResidualMode::block) {
      throw UsageError("--block-size applies to Block AttnRes, but " + flags.source +
                       " is not block (add --mode block)");
    }
    if (block_size < 1 || block_size > L) {
      throw UsageError("--block-size " + std::to_string(block_size) +
                       " is out of range: expected 1 <= S <= L = " + std::to_string(L) +
                       " sublayers");
    }
    options.block_size = block_size;
  }
  if (mode == ResidualMode::block && options.block_size.value_or(config.attn_res.block_size) == 0) {
    throw UsageError("--mode block needs --block-size S (1 <= S <= L = " + std::to_string(L) +
                     "); the model's config.json has none");
  }
  return flags;
}

void refuse_two_phase_without_effect(const ModelConfig& config, const ForwardOptions& options,
                                     const std::string& mode_source) {
  AttnResConfig scheme;
  try {
    scheme = resolve_scheme(config, options);
  } catch (const Error&) {
    return;  // the pass itself says why it cannot run
  }
  if (scheme.mode == ResidualMode::standard) {
    throw UsageError("--two-phase applies to Full and Block AttnRes; " + mode_source +
                     " has no depth reads");
  }
  if (const std::string limit = scheme.two_phase_limit(); !limit.empty()) {
    throw UsageError("--two-phase would change nothing: " + limit +
                     ", so every read is one-shot; leave it out");
  }
}

po::options_description command_options(const std::string& command) {
  po::options_description options("attnres " + command + " options");
  options.add_options()("help,h", "show this help");
  return options;
}

void require_format(const std::string& format, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (format == a) return;
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  throw UsageError("--format must be one of " + list + ", got '" + format + "'");
}

void require_either(const std::string& flag, const std::string& value, const char* first,
                    const char* second) {
  if (value != first && value != second) {
    throw UsageError(flag + " must be " + first + " or " + second + ", got '" + value + "'");
  }
}

bool on_off(const std::string& flag, const std::string& value) {
  require_either(flag, value, "on", "off");
  return value == "on";
}

po::variables_map parse_options(const std::vector<std::string>& args,
                                const po::options_description& options,
                                const po::positional_options_description* positional) {
  namespace style = po::command_line_style;
  po::command_line_parser parser(args);
  parser.options(options).style(style::default_style & ~style::allow_guessing);
  if (positional) parser.positional(*positional);
  po::parsed_options parsed(nullptr);
  try {
    parsed = parser.run();
  } catch (const po::unknown_option& error) {
    std::string typed = error.get_option_name();
    std::vector<std::string> known;
    for (const auto& option : options.options()) known.push_back("--" + option->long_name());
    std::vector<std::string> longer;  // flags are never abbreviated: say which ones were meant
    for (const auto& flag : known) {
      if (typed.size() > 2 && flag.rfind(typed, 0) == 0) longer.push_back(flag);
    }
    std::string hint = did_you_mean(typed, known);
    if (!longer.empty()) {
      hint.clear();
      for (const auto& flag : longer) hint += (hint.empty() ? "" : "' or '") + flag;
    }
    throw UsageError("unknown flag '" + quoted_text(typed) + "'" +
                     (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                     (longer.empty() ? "" : "; flags are never abbreviated"));
  } catch (const po::too_many_positional_options_error&) {
    throw UsageError("too many arguments that are not flags");
  }
  for (const auto& option : parsed.options) {
    if (!option.string_key.empty() || option.original_tokens.empty()) continue;
    const std::string& word = option.original_tokens.front();
    const bool numeric =
        !word.empty() && word.find_first_not_of("0123456789, ") == std::string::npos;
    throw UsageError(
        "unexpected argument '" + quoted_text(word) + "'" +
        (numeric ? " (a list of token ids must be quoted as one argument: --tokens \"1 7 42\")"
                 : " (every value belongs to a flag: --flag VALUE)"));
  }
  po::variables_map values;
  po::store(parsed, values);
  return values;
}
bool parse_or_help(const std::vector<std::string>& args, const po::options_description& options,
                   po::variables_map& values, std::ostream& out, const std::string& usage,
                   const po::positional_options_description* positional) {
  values = parse_options(args, options, positional);
  if (values.count("help")) {
    out << wrap_usage(usage) << "\n" << options << "\n";
    return true;
  }
  po::notify(values);
  return false;
}

std::string hardware_flag_help() {
  std::string names;
  for (const auto& name : hardware_preset_names()) names += (names.empty() ? "" : " ") + name;
  return "preset (" + names + ") or a .toml file";
}

}  // namespace attnres::cli
