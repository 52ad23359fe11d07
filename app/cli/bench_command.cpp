// attnres bench forward: whole forward passes timed after a warm-up, and the depth read's
// bandwidth next to the machine's stream bandwidth (docs/engines.md).
#include <nlohmann/json.hpp>
#include <ostream>

#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/measure.hpp"
#include "attnres/model.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace {

template <typename Scalar>
ForwardTiming time_model(const ModelWeights<double>& model, const std::vector<int>& tokens, const ForwardOptions& options,
                         const EngineOptions& engine_options, int repeat, int* threads_used) {
  const ModelWeights<Scalar> weights = model.cast<Scalar>();
  ForwardEngine<Scalar> engine(weights, engine_options);
  *threads_used = engine.threads();
  ProgressBar progress("bench");
  return time_forward(engine, tokens, options, repeat, progress.callback());
}

}  // namespace

int bench_command(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  if (args.empty() || (args[0] != "forward" && args[0] != "--help" && args[0] != "-h")) {
    throw UsageError(args.empty() ? "expected a benchmark: attnres bench forward ..."
                                  : "unknown benchmark '" + args[0] + "' (expected: forward)");
  }
  const std::vector<std::string> rest(args.begin() + (args[0] == "forward" ? 1 : 0), args.end());
  std::string model_dir, mode_text, engine_text, device_text, precision, format, two_phase_text, bandwidth_text;
  int seq = 0, repeat = 0, threads = 0, block_size = 0;
  po::options_description options("attnres bench forward options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value(&model_dir)->required(), "model directory (config.json + model.safetensors)")
      ("seq", po::value(&seq)->required(), "tokens T per forward pass (deterministic ids shared with the PyTorch peer)")
      ("repeat", po::value(&repeat)->default_value(5), "timed passes after one warm-up (the median is reported)")
      ("threads", po::value(&threads)->default_value(0), "CPU threads (0: every core)")
      ("mode", po::value(&mode_text), "standard | full | block (default: the model's)")
      ("block-size", po::value(&block_size), "block size S with --mode block")
      ("two-phase", po::value(&two_phase_text)->default_value("on"), "on | off")
      ("engine", po::value(&engine_text)->default_value("fast"), "fast | reference")
      ("device", po::value(&device_text)->default_value("cpu"), "cpu | cuda")
      ("precision", po::value(&precision)->default_value("f32"), "f32 | f64")
      ("bandwidth", po::value(&bandwidth_text)->default_value("on"),
       "on: also measure the depth read (9 and 17 sources) and the stream triad bandwidth")
      ("format", po::value(&format)->default_value("table"), "table | json");
  auto values = parse_options(rest, options);
  if (wants_help(values,
                 "usage: attnres bench forward --model DIR --seq T [--repeat K] [--threads N] [--mode M] "
                 "[--block-size S] [--two-phase on|off] [--engine fast|reference] [--device cpu|cuda] "
                 "[--precision f32|f64] [--bandwidth on|off] [--format table|json]",
                 options, out)) {
    return kExitOk;
  }
  po::notify(values);
  if (format != "table" && format != "json") throw UsageError("--format must be table or json, got '" + format + "'");
  if (precision != "f32" && precision != "f64") throw UsageError("--precision must be f32 or f64, got '" + precision + "'");
  if (two_phase_text != "on" && two_phase_text != "off") throw UsageError("--two-phase must be on or off, got '" + two_phase_text + "'");
  if (bandwidth_text != "on" && bandwidth_text != "off") throw UsageError("--bandwidth must be on or off, got '" + bandwidth_text + "'");
  if (seq < 1) throw UsageError("--seq must be >= 1, got " + std::to_string(seq));
  if (repeat < 1) throw UsageError("--repeat must be >= 1, got " + std::to_string(repeat));
  const EngineOptions engine = parse_engine_flags(engine_text, device_text, threads, precision);

  const ModelWeights<double> model = load_model(model_dir);
  ForwardOptions forward_options;
  forward_options.record_mixing = false;  // never on the timed path
  forward_options.two_phase = two_phase_text == "on";
  if (values.count("mode")) forward_options.mode = parse_flag_value([&] { return parse_residual_mode(mode_text, "--mode"); });
  const ResidualMode mode = apply_block_size_flag(values, mode_text, block_size, model.config, forward_options).mode;
  const std::vector<int> tokens = benchmark_tokens(seq, model.config.vocab_size);

  int threads_used = 1;
  const ForwardTiming timing = precision == "f32"
      ? time_model<float>(model, tokens, forward_options, engine, repeat, &threads_used)
      : time_model<double>(model, tokens, forward_options, engine, repeat, &threads_used);
  throw_if_interrupted("benchmark");
  const std::size_t peak = peak_resident_bytes();

  nlohmann::json json = {{"tokens_per_s", timing.tokens_per_s},
                         {"seconds_per_forward", timing.seconds_per_forward},
                         {"threads", threads_used},
                         {"engine", to_string(engine.engine)},
                         {"device", to_string(engine.device)},
                         {"precision", precision},
                         {"mode", to_string(mode)},
                         {"tokens", seq},
                         {"repeat", repeat},
                         {"seconds", timing.seconds},
                         {"peak_resident_bytes", peak}};
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
  table.add_row({"engine", to_string(engine.engine) + " on " + to_string(engine.device) + ", " + precision + ", " +
                               std::to_string(threads_used) + (threads_used == 1 ? " thread" : " threads")});
  table.add_row({"model", model_dir + ": d = " + std::to_string(model.config.hidden_size) + ", L = " +
                              std::to_string(model.config.sublayers()) + " sublayers, " + to_string(mode)});
  table.add_row({"tokens per forward (T)", std::to_string(seq)});
  table.add_row({"seconds per forward (median of " + std::to_string(repeat) + ")", format_number(timing.seconds_per_forward)});
  table.add_row({"tokens_per_s", format_number(timing.tokens_per_s)});
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
