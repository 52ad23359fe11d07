// attnres bench forward: whole forward passes timed after a warm-up, and the depth read's
// bandwidth next to the machine's stream bandwidth (docs/engines.md); bench forward and train
// also put the pass's FLOP rate beside the machine's own matrix rate at the same precision and
// threads, so that a figure means the same on every machine.
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "attnres/architecture.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/gradient_engine.hpp"
#include "attnres/measure.hpp"
#include "attnres/model.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/training.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

// ---- The pass against the machine's matrix rate (docs/engines.md#figures-per-machine-kind).

// The model as the cost engine describes it, at T tokens: the pass's FLOPs are its
// pass_flops_per_token (core/cost architecture.hpp), never a count of our own.
CostInputs model_cost_inputs(const ModelConfig& config, int tokens) {
  CostInputs in;
  in.sublayers = config.sublayers();
  in.d_model = config.hidden_size;
  in.block_size = 1;  // the residual scheme adds no matrix product
  in.tokens = tokens;
  in.heads = config.num_attention_heads;
  in.kv_heads =
      config.num_key_value_heads > 0 ? config.num_key_value_heads : config.num_attention_heads;
  in.attention = in.kv_heads == in.heads ? AttentionKind::mha : AttentionKind::gqa;
  in.head_dim = config.head_dim();
  in.ffn = config.intermediate_size;
  in.mlp = MlpKind::swiglu;
  in.vocab = config.vocab_size;
  return resolve_cost_inputs(in);
}

// A weight product of the model: out (T, n) = in (T, k) W^T.
struct WeightProduct {
  const char* name;
  int n = 0, k = 0;
};

// The model's largest weight product as the engine runs them (fused q|k|v and gate|up; by n·k,
// the first of equals): the shape, with the pass's T rows, at which the machine's matrix rate is
// measured.
WeightProduct largest_product(const ModelConfig& config) {
  const int d = config.hidden_size, f = config.intermediate_size, dh = config.head_dim();
  const int heads = config.num_attention_heads;
  const int kv = config.num_key_value_heads > 0 ? config.num_key_value_heads : heads;
  const std::vector<WeightProduct> products = {{"q|k|v projection", (heads + 2 * kv) * dh, d},
                                               {"output projection", d, heads * dh},
                                               {"gate|up projection", 2 * f, d},
                                               {"down projection", d, f},
                                               {"LM head", config.vocab_size, d}};
  return *std::max_element(products.begin(), products.end(),
                           [](const WeightProduct& a, const WeightProduct& b) {
                             return std::int64_t{a.n} * a.k < std::int64_t{b.n} * b.k;
                           });
}

struct MatrixRate {
  WeightProduct product;
  GemmTiming gemm;                 // measure_gemm, as calibrate --measure times it
  double flop_per_token = 0;       // pass_flops_per_token
  double achieved_per_second = 0;  // flop_per_token x tokens/s
  double fraction() const { return achieved_per_second / gemm.flops_per_s(); }
};

// The machine's matrix rate for the pass's precision and threads at the model's largest product,
// and the pass's FLOP rate against it. `backward`: a training step (forward + backward).
MatrixRate measure_matrix_rate(const ModelConfig& config, int tokens, bool backward,
                               Precision precision, int threads, double tokens_per_second) {
  MatrixRate rate;
  rate.product = largest_product(config);
  ProgressBar progress("bench: matrix rate");
  rate.gemm = measure_gemm(precision, tokens, rate.product.n, rate.product.k, threads, 5,
                           progress.callback());
  throw_if_interrupted("benchmark");
  rate.flop_per_token = pass_flops_per_token(model_cost_inputs(config, tokens), backward);
  rate.achieved_per_second = rate.flop_per_token * tokens_per_second;
  return rate;
}

void add_matrix_rate(nlohmann::json& json, const MatrixRate& rate) {
  json["model_flop_per_token"] = rate.flop_per_token;
  json["achieved_flop_per_second"] = rate.achieved_per_second;
  json["matrix_rate"] = {{"flop_per_second", rate.gemm.flops_per_s()},
                         {"product", rate.product.name},
                         {"m", rate.gemm.m},
                         {"n", rate.gemm.n},
                         {"k", rate.gemm.k}};
  json["fraction_of_matrix_rate"] = rate.fraction();
}

void add_matrix_rate_rows(TextTable& table, const MatrixRate& rate, bool backward,
                          Precision precision, int threads) {
  table.add_row({backward ? "model FLOPs per token (fwd + bwd)" : "model FLOPs per token",
                 format_number(rate.flop_per_token)});
  table.add_row({"achieved GFLOP/s", format_number(rate.achieved_per_second / 1e9)});
  table.add_row({"matrix rate GFLOP/s (" + to_string(precision) + ", " + std::to_string(threads) +
                     (threads == 1 ? " thread)" : " threads)"),
                 format_number(rate.gemm.flops_per_s() / 1e9)});
  table.add_row({"matrix product timed (m x n x k)",
                 std::to_string(rate.gemm.m) + " x " + std::to_string(rate.gemm.n) + " x " +
                     std::to_string(rate.gemm.k) + ", the " + rate.product.name});
  table.add_row({"share of the matrix rate", format_number(rate.fraction())});
}

template <typename Scalar>
ForwardTiming time_model(const ModelWeights<double>& model, const std::vector<int>& tokens,
                         const ForwardOptions& options, const EngineOptions& engine_options,
                         int repeat, int* threads_used) {
  const ModelWeights<Scalar> weights = model.cast<Scalar>();
  ForwardEngine<Scalar> engine(weights, engine_options);
  *threads_used = engine.threads();
  ProgressBar progress("bench");
  return time_forward(engine, tokens, options, repeat, progress.callback());
}

// attnres bench train: whole training steps (forward + backward + clipping + AdamW, f32) on a
// fixed batch, the same work the PyTorch peer (bench/peers/train_peer.py) times.
double median_of(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// --versus: a second precision to time on the same work (not the first one, and one the engine
// runs: the same checks as --precision's).
std::optional<Precision> versus_flag(const po::variables_map& values, const std::string& text,
                                     Precision precision, const EngineOptions& engine) {
  if (!given(values, "versus")) return std::nullopt;
  const Precision versus = parse_flag_value([&] { return parse_precision(text, "--versus"); });
  if (versus == precision) {
    throw UsageError("--versus " + text + " is the --precision already timed; give another one");
  }
  check_precision_flag(engine, versus, "--versus");
  return versus;
}

void add_versus(nlohmann::json& json, const std::optional<Precision>& versus,
                const std::optional<double>& versus_tokens_per_second, double tokens_per_second) {
  if (!versus) return;
  json["versus"] = {{"precision", to_string(*versus)},
                    {"tokens_per_second", *versus_tokens_per_second},
                    {"speedup", tokens_per_second / *versus_tokens_per_second}};
}

void add_versus_rows(TextTable& table, const std::optional<Precision>& versus,
                     const std::optional<double>& versus_tokens_per_second,
                     double tokens_per_second, Precision precision) {
  if (!versus) return;
  table.add_row({"tokens_per_second at " + to_string(*versus) + " (--versus)",
                 format_number(*versus_tokens_per_second)});
  table.add_row({"speed-up " + to_string(precision) + " / " + to_string(*versus),
                 format_number(tokens_per_second / *versus_tokens_per_second) + "x"});
}

struct TrainTiming {
  std::vector<double> seconds;
  int threads = 1;
};

// warmup + steps training steps of `model` (in Scalar) on `tokens`; the timed ones' seconds.
template <typename Scalar>
TrainTiming time_training(const ModelWeights<double>& loaded,
                          const std::vector<std::vector<int>>& tokens,
                          ForwardOptions forward_options, const EngineOptions& engine,
                          bool attn_res_tensors, int warmup, int steps) {
  ModelWeights<Scalar> model = loaded.cast<Scalar>();
  model.has_attn_res_tensors = attn_res_tensors;
  GradientEngine<Scalar> gradients_engine(model.config, engine);
  Gradients<Scalar> gradients;
  AdamState<Scalar> adam = adam_state_for(model);
  TrainTiming timing;
  timing.threads = gradients_engine.threads();
  ProgressBar progress("bench");
  forward_options.progress = progress.callback();
  for (int step = 1; step <= warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    gradients_engine.compute(model, tokens, forward_options, gradients);
    const double norm = gradient_norm(gradients.grad);
    adamw_update(model, gradients.grad, adam, step, 1e-4, clip_scale(norm, 1.0), AdamWOptions{});
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step > warmup) timing.seconds.push_back(elapsed);
  }
  return timing;
}

int bench_train(const std::vector<std::string>& args, std::ostream& out) {
  std::string model_dir, mode_text, engine_text, format, precision_text, versus_text;
  int seq = 0, batch = 0, steps = 0, warmup = 0, threads = 0, block_size = 0;
  po::options_description options = command_options("bench train");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory (config.json + model.safetensors)")(
      "seq", po::value(&seq)->required(), "tokens T per sequence")(
      "batch", po::value(&batch)->default_value(8), "sequences B per step")(
      "steps", po::value(&steps)->default_value(5),
      "timed steps after the warm-up (the median is reported)")(
      "warmup", po::value(&warmup)->default_value(2), "untimed steps first")(
      "threads", po::value(&threads)->default_value(0), threads_help("CPU threads").c_str())(
      "mode", po::value(&mode_text), "standard | full | block (default: the model's)")(
      "block-size", po::value(&block_size), "block size S with --mode block")(
      "engine", po::value(&engine_text)->default_value("fast"), "fast | reference")(
      "precision", po::value(&precision_text)->default_value("f32"),
      "bf16 | f32 | f64 (bf16: f32 weights, bf16 matrix products; docs/engines.md)")(
      "versus", po::value(&versus_text),
      "also time this precision on the same batch and print the speed-up over it")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::variables_map values;
  if (parse_or_help(
          args, options, values, out,
          "usage: attnres bench train --model DIR --seq T [--batch B] [--steps N] [--warmup "
          "W] [--threads N] "
          "[--mode M] [--block-size S] [--engine fast|reference] [--precision bf16|f32|f64] "
          "[--versus bf16|f32|f64] [--format table|json]\n"
          "Times training steps (forward + backward + clip + AdamW; docs/training.md).\n"
          "Beside tokens/s: the step's FLOPs per token (forward + backward, the cost engine's "
          "count),\n"
          "the FLOP rate achieved, this machine's matrix rate at the same precision and threads\n"
          "(measured as calibrate --measure measures it, at the model's largest weight product "
          "with\n"
          "T rows) and the share of it achieved (docs/engines.md).")) {
    return kExitOk;
  }
  require_either("--format", format, "table", "json");
  if (seq < 2) throw UsageError("--seq must be >= 2, got " + std::to_string(seq));
  if (batch < 1) throw UsageError("--batch must be >= 1, got " + std::to_string(batch));
  if (steps < 1) throw UsageError("--steps must be >= 1, got " + std::to_string(steps));
  if (warmup < 0) throw UsageError("--warmup must be >= 0, got " + std::to_string(warmup));
  const Precision precision = parse_precision_flag(precision_text);
  const EngineOptions engine =
      parse_engine_flags(engine_text, "cpu", threads, precision, given(values, "threads"));
  const std::optional<Precision> versus = versus_flag(values, versus_text, precision, engine);
  const ModelWeights<double> loaded = load_model(model_dir);
  ForwardOptions forward_options;
  forward_options.record_mixing = false;
  forward_options.mode = parse_mode_flag(values, mode_text);
  const ResidualMode mode =
      apply_block_size_flag(values, mode_text, block_size, loaded.config, forward_options).mode;
  std::vector<std::vector<int>> tokens;
  for (int b = 0; b < batch; ++b)
    tokens.push_back(benchmark_tokens(seq, loaded.config.vocab_size, b));
  const bool attn_res_tensors = mode != ResidualMode::standard;
  auto time_at = [&](Precision p) {
    const EngineOptions at = with_precision(engine, p);
    return computes_in_f64(p) ? time_training<double>(loaded, tokens, forward_options, at,
                                                      attn_res_tensors, warmup, steps)
                              : time_training<float>(loaded, tokens, forward_options, at,
                                                     attn_res_tensors, warmup, steps);
  };
  const TrainTiming timing = time_at(precision);
  const std::vector<double>& seconds = timing.seconds;
  throw_if_interrupted("benchmark");
  const double median = median_of(seconds);
  const double tokens_per_second = static_cast<double>(batch) * seq / median;
  std::optional<double> versus_tokens_per_second;
  if (versus) {
    const TrainTiming other = time_at(*versus);
    throw_if_interrupted("benchmark");
    versus_tokens_per_second = static_cast<double>(batch) * seq / median_of(other.seconds);
  }
  const MatrixRate rate = measure_matrix_rate(loaded.config, seq, /*backward=*/true, precision,
                                              timing.threads, tokens_per_second);
  const std::size_t peak = peak_resident_bytes();
  nlohmann::json json = {{"schema", schema_tag("bench")},
                         {"kind", "train_step"},
                         {"tokens_per_second", tokens_per_second},
                         {"seconds_per_step", median},
                         {"threads", timing.threads},
                         {"engine", to_string(engine.engine)},
                         {"precision", to_string(precision)},
                         {"mode", to_string(mode)},
                         {"batch", batch},
                         {"tokens", seq},
                         {"steps", steps},
                         {"seconds", seconds},
                         {"peak_resident_bytes", peak}};
  if (mode == ResidualMode::block) json["block_size"] = *forward_options.block_size;
  add_matrix_rate(json, rate);
  add_versus(json, versus, versus_tokens_per_second, tokens_per_second);
  if (format == "json") {
    out << json.dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"measure", "value"});
  table.add_row({"engine", to_string(engine.engine) + ", " + precision_description(precision) +
                               ", " + std::to_string(timing.threads) + " thread(s)"});
  table.add_row({"model", model_dir + ": d = " + std::to_string(loaded.config.hidden_size) +
                              ", L = " + std::to_string(loaded.config.sublayers()) +
                              " sublayers, " + to_string(mode)});
  table.add_row({"batch", std::to_string(batch) + " x " + std::to_string(seq) + " tokens"});
  table.add_row(
      {"seconds per step (median of " + std::to_string(steps) + ")", format_number(median)});
  table.add_row({"tokens_per_second", format_number(tokens_per_second)});
  add_matrix_rate_rows(table, rate, /*backward=*/true, precision, timing.threads);
  add_versus_rows(table, versus, versus_tokens_per_second, tokens_per_second, precision);
  table.add_row({"peak resident memory (MB)", format_number(static_cast<double>(peak) / 1e6)});
  table.print(out);
  return kExitOk;
}

}  // namespace

int bench_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  if (!args.empty() && args[0] == "train")
    return bench_train(std::vector<std::string>(args.begin() + 1, args.end()), out);
  if (args.empty() || (args[0] != "forward" && args[0] != "--help" && args[0] != "-h")) {
    throw UsageError(args.empty()
                         ? "expected a benchmark: attnres bench forward|train ..."
                         : "unknown benchmark '" + args[0] + "' (expected: forward or train)");
  }
  const std::vector<std::string> rest(args.begin() + (args[0] == "forward" ? 1 : 0), args.end());
  std::string model_dir, mode_text, engine_text, device_text, precision_text, versus_text, format,
      two_phase_text, bandwidth_text;
  int seq = 0, repeat = 0, threads = 0, block_size = 0;
  po::options_description options = command_options("bench forward");
  options.add_options()("model", po::value(&model_dir)->required(),
                        "model directory (config.json + model.safetensors)")(
      "seq", po::value(&seq)->required(),
      "tokens T per forward pass (deterministic ids shared with the PyTorch peer)")(
      "repeat", po::value(&repeat)->default_value(5),
      "timed passes after one warm-up (the median is reported)")(
      "threads", po::value(&threads)->default_value(0), threads_help("CPU threads").c_str())(
      "mode", po::value(&mode_text), "standard | full | block (default: the model's)")(
      "block-size", po::value(&block_size), "block size S with --mode block")(
      "two-phase", po::value(&two_phase_text)->default_value("on"), "on | off")(
      "engine", po::value(&engine_text)->default_value("fast"), "fast | reference")(
      "device", po::value(&device_text)->default_value("cpu"), "cpu | cuda")(
      "precision", po::value(&precision_text)->default_value("f32"),
      "bf16 | f32 | f64 (bf16: f32 weights, bf16 matrix products; docs/engines.md)")(
      "versus", po::value(&versus_text),
      "also time this precision on the same tokens and print the speed-up over it")(
      "bandwidth", po::value(&bandwidth_text)->default_value("on"),
      "on: also measure the depth read (9 and 17 sources) and the stream triad bandwidth")(
      "format", po::value(&format)->default_value("table"), "table | json");
  po::variables_map values;
  if (parse_or_help(
          rest, options, values, out,
          "usage: attnres bench forward --model DIR --seq T [--repeat K] [--threads N] [--mode M] "
          "[--block-size S] [--two-phase on|off] [--engine fast|reference] [--device cpu|cuda] "
          "[--precision bf16|f32|f64] [--versus bf16|f32|f64] [--bandwidth on|off] "
          "[--format table|json]\n"
          "Times forward passes. Beside tokens/s (CPU): the pass's FLOPs per token (the cost "
          "engine's\n"
          "count), the FLOP rate achieved, this machine's matrix rate at the same precision and\n"
          "threads (measured as calibrate --measure measures it, at the model's largest weight\n"
          "product with T rows) and the share of it achieved (docs/engines.md).")) {
    return kExitOk;
  }
  require_either("--format", format, "table", "json");
  require_either("--two-phase", two_phase_text, "on", "off");
  require_either("--bandwidth", bandwidth_text, "on", "off");
  if (seq < 1) throw UsageError("--seq must be >= 1, got " + std::to_string(seq));
  if (repeat < 1) throw UsageError("--repeat must be >= 1, got " + std::to_string(repeat));
  const Precision precision = parse_precision_flag(precision_text);
  const EngineOptions engine =
      parse_engine_flags(engine_text, device_text, threads, precision, given(values, "threads"));
  const std::optional<Precision> versus = versus_flag(values, versus_text, precision, engine);
  if (given(values, "bandwidth") && bandwidth_text == "on" && engine.device != Device::cpu) {
    throw UsageError(
        "--bandwidth on measures the CPU's memory bandwidth; with --device cuda it would be "
        "skipped: leave it out or give --device cpu");
  }

  const ModelWeights<double> model = load_model(model_dir);
  ForwardOptions forward_options;
  forward_options.record_mixing = false;  // never on the timed path
  forward_options.two_phase = two_phase_text == "on";
  forward_options.mode = parse_mode_flag(values, mode_text);
  const ModeFlags mode_flags =
      apply_block_size_flag(values, mode_text, block_size, model.config, forward_options);
  const ResidualMode mode = mode_flags.mode;
  if (given(values, "two-phase"))
    refuse_two_phase_without_effect(model.config, forward_options, mode_flags.source);
  const std::vector<int> tokens = benchmark_tokens(seq, model.config.vocab_size);

  int threads_used = 1;
  const ForwardTiming timing =
      computes_in_f64(precision)
          ? time_model<double>(model, tokens, forward_options, engine, repeat, &threads_used)
          : time_model<float>(model, tokens, forward_options, engine, repeat, &threads_used);
  throw_if_interrupted("benchmark");
  std::optional<double> versus_tokens_per_second;
  if (versus) {
    const EngineOptions other = with_precision(engine, *versus);
    int other_threads = 1;
    versus_tokens_per_second =
        (computes_in_f64(*versus)
             ? time_model<double>(model, tokens, forward_options, other, repeat, &other_threads)
             : time_model<float>(model, tokens, forward_options, other, repeat, &other_threads))
            .tokens_per_second;
    throw_if_interrupted("benchmark");
  }
  // The matrix rate is the CPU's: a CUDA pass has none beside it here.
  std::optional<MatrixRate> rate;
  if (engine.device == Device::cpu) {
    rate = measure_matrix_rate(model.config, seq, /*backward=*/false, precision, threads_used,
                               timing.tokens_per_second);
  }
  const std::size_t peak = peak_resident_bytes();

  nlohmann::json json = {{"schema", schema_tag("bench")},
                         {"kind", "forward"},
                         {"tokens_per_second", timing.tokens_per_second},
                         {"seconds_per_forward", timing.seconds_per_forward},
                         {"threads", threads_used},
                         {"engine", to_string(engine.engine)},
                         {"device", to_string(engine.device)},
                         {"precision", to_string(precision)},
                         {"mode", to_string(mode)},
                         {"tokens", seq},
                         {"repeat", repeat},
                         {"seconds", timing.seconds},
                         {"peak_resident_bytes", peak}};
  if (rate) add_matrix_rate(json, *rate);
  add_versus(json, versus, versus_tokens_per_second, timing.tokens_per_second);
  Bandwidth read9, read17, triad;
  const bool bandwidth = bandwidth_text == "on" && engine.device == Device::cpu;
  if (bandwidth) {
    read9 = measure_depth_read(9, seq, model.config.hidden_size, threads_used);
    read17 = measure_depth_read(17, seq, model.config.hidden_size, threads_used);
    triad = measure_stream_triad(threads_used);
    json["depth_read"] = {{"sources_9_bytes_per_s", read9.bytes_per_s()},
                          {"sources_17_bytes_per_s", read17.bytes_per_s()},
                          {"stream_triad_bytes_per_s", triad.bytes_per_s()},
                          {"fraction_of_triad_9", read9.bytes_per_s() / triad.bytes_per_s()},
                          {"fraction_of_triad_17", read17.bytes_per_s() / triad.bytes_per_s()}};
  }
  if (format == "json") {
    out << json.dump(2) << "\n";
    return kExitOk;
  }
  TextTable table({"measure", "value"});
  table.add_row({"engine", to_string(engine.engine) + " on " + to_string(engine.device) + ", " +
                               precision_description(precision) + ", " +
                               std::to_string(threads_used) +
                               (threads_used == 1 ? " thread" : " threads")});
  table.add_row({"model", model_dir + ": d = " + std::to_string(model.config.hidden_size) +
                              ", L = " + std::to_string(model.config.sublayers()) + " sublayers, " +
                              to_string(mode)});
  table.add_row({"tokens per forward (T)", std::to_string(seq)});
  table.add_row({"seconds per forward (median of " + std::to_string(repeat) + ")",
                 format_number(timing.seconds_per_forward)});
  table.add_row({"tokens_per_second", format_number(timing.tokens_per_second)});
  if (rate) add_matrix_rate_rows(table, *rate, /*backward=*/false, precision, threads_used);
  add_versus_rows(table, versus, versus_tokens_per_second, timing.tokens_per_second, precision);
  table.add_row({"peak resident memory (MB)", format_number(static_cast<double>(peak) / 1e6)});
  if (bandwidth) {
    table.add_row({"depth read, 9 sources (GB/s)", format_number(read9.bytes_per_s() / 1e9)});
    table.add_row({"depth read, 17 sources (GB/s)", format_number(read17.bytes_per_s() / 1e9)});
    table.add_row({"stream triad (GB/s)", format_number(triad.bytes_per_s() / 1e9)});
  }
  table.print(out);
  return kExitOk;
}

}  // namespace attnres::cli
